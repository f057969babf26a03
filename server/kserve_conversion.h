// KServe v2 (Open Inference Protocol) tensors <-> rankd's engine request and
// scores. A ranking model takes these inputs (ModelMetadata lists them):
//   dense            FP32  [B, num_dense]   (absent when num_dense is 0)
//   <feature>        INT64 [total ids]      every sparse feature, bags concatenated
//   <feature>.lengths INT32 [B], or [1]     ids per bag; [1]: one bag shared by all
//                                           B candidates (request-level features: [1])
//   <feature>.weights FP32 [total ids]      optional per-id weights
// and gives one output, `scores` FP32 [B]. B is dense's first dimension (or,
// with no dense features, the longest `.lengths`). Elements come either
// typed (contents.fp32_contents / int64_contents / int_contents) or as
// raw_input_contents (little-endian, one entry per input, in input order);
// the answer uses the form the request used.
//
// The engine request views the message's arrays where it can (typed
// contents, and raw contents whose bytes are aligned for their type); raw
// bytes that are not aligned are copied into the view's own storage.
#ifndef RANKD_SERVER_KSERVE_CONVERSION_H_
#define RANKD_SERVER_KSERVE_CONVERSION_H_

#include <cstdint>
#include <cstring>
#include <list>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "engine/model/model.h"
#include "engine/request.h"
#include "engine/request_validation.h"
#include "inference/grpc_predict_v2.pb.h"

namespace rankd::server {

// The name of the single output tensor.
inline constexpr char kKServeScoresTensor[] = "scores";

// An engine request made from a ModelInferRequest, and what it views.
struct KServeRequest {
  engine::Request request;
  bool raw = false;  // the request sent raw_input_contents: answer raw
  // Aligned copies of raw contents that were not aligned for their type (a
  // list: stable addresses, and no allocation while empty, the usual case).
  std::list<std::vector<int64_t>> copies;
};

// `bytes` as elements of T: a view of them when their address is aligned for
// T, else of a copy appended to `copies` (the bytes are the elements,
// little-endian, bytes.size() a multiple of sizeof(T)).
template <typename T>
absl::Span<const T> ViewOrCopy(absl::string_view bytes, std::list<std::vector<int64_t>>* copies) {
  static_assert(alignof(T) <= alignof(int64_t));
  const size_t n = bytes.size() / sizeof(T);
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(T) == 0) {
    return absl::MakeConstSpan(reinterpret_cast<const T*>(bytes.data()), n);
  }
  std::vector<int64_t>& copy = copies->emplace_back((bytes.size() + 7) / 8);
  std::memcpy(copy.data(), bytes.data(), bytes.size());
  return absl::MakeConstSpan(reinterpret_cast<const T*>(copy.data()), n);
}

// `request.model_version` as a version number: 0 for "" (the latest ready
// version); INVALID_ARGUMENT naming the field when it is not a positive
// decimal integer.
absl::StatusOr<int64_t> ParseKServeVersion(const std::string& version);

// Converts and validates `request` against `model`: INVALID_ARGUMENT naming
// the tensor for an unknown, repeated or missing input, a wrong datatype or
// shape, contents of the wrong kind or size, raw and typed contents mixed, a
// requested output other than `scores`, and everything
// engine::ValidateRequest checks. `request` must outlive `out`.
absl::Status ToEngineRequest(const engine::Model& model,
                             const inference::ModelInferRequest& request,
                             const engine::RequestLimits& limits, KServeRequest* out);

// Fills `response`'s identity (model name, version, id) and the `scores`
// output tensor with `num_scores` zeros, typed or raw as `raw` says, and
// returns where the scores go (inside `response`: write them there).
absl::Span<float> PrepareKServeResponse(const std::string& model_name, int64_t version,
                                        const std::string& id, int32_t num_scores, bool raw,
                                        inference::ModelInferResponse* response);

// The input tensors `model` takes, for ModelMetadata.
void KServeModelInputs(const engine::Model& model,
                       inference::ModelMetadataResponse* response);

}  // namespace rankd::server

#endif  // RANKD_SERVER_KSERVE_CONVERSION_H_
