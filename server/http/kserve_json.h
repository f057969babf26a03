// The KServe v2 (Open Inference Protocol) REST bodies <-> the protocol's
// messages, so the REST endpoints reuse the gRPC front end's conversion and
// validation (server/kserve_conversion.h) and answer with the same errors.
//
// Request: an inference request JSON object
//   {"id": "...", "parameters": {...},
//    "inputs": [{"name": "dense", "datatype": "FP32", "shape": [2, 13],
//                "data": [0.1, ...] (flat, or nested row-major arrays),
//                "parameters": {...}}, ...],
//    "outputs": [{"name": "scores", "parameters": {...}}]}
// is read with a SAX parser straight into a ModelInferRequest with typed
// contents: no JSON document is built, nesting is bounded (no recursion
// anywhere), every number is checked against its tensor's datatype (an
// INT64 tensor holds integers, FP32 values within float range, INT32 within
// int32), and the binary tensor extension (binary_data_size) is refused by
// name. Errors are INVALID_ARGUMENT naming the input (its index and name)
// and the field.
//
// Responses are written as text directly (scores with the shortest digits
// that read back to the same float, so a client's float32 is bit-equal to
// the gRPC answer).
#ifndef RANKD_SERVER_HTTP_KSERVE_JSON_H_
#define RANKD_SERVER_HTTP_KSERVE_JSON_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "inference/grpc_predict_v2.pb.h"

namespace rankd::server {

// Deepest nesting of arrays and objects a request body may have (the
// envelope takes 4 levels; `data` of a [B, n] tensor 2 more).
inline constexpr int kMaxJsonDepth = 32;

// Parses an inference request body into `out` (model name and version are
// the URL's: set by the caller).
absl::Status ParseKServeInferJson(absl::string_view body, inference::ModelInferRequest* out);

// The inference response body: model, version, the request's id and the
// `scores` output tensor.
std::string KServeInferResponseJson(absl::string_view model_name, int64_t version,
                                    absl::string_view id, absl::Span<const float> scores);

// The model metadata body ({"name", "versions", "platform", "inputs",
// "outputs"}; shapes as numbers).
std::string KServeModelMetadataJson(const inference::ModelMetadataResponse& metadata);

// {"error": "<message>"}: the body of every error answer.
std::string ErrorJson(absl::string_view message);

// A JSON string literal (quotes and escapes; invalid UTF-8 replaced).
std::string JsonString(absl::string_view text);

// The shortest decimal text that reads back as `value` (finite values).
void AppendFloat(float value, std::string* out);

}  // namespace rankd::server

#endif  // RANKD_SERVER_HTTP_KSERVE_JSON_H_
