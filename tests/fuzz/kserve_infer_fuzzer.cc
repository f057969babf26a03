// Fuzz target: a KServe v2 inference request, as the REST body (JSON, read
// by server/http/kserve_json.h's SAX parser) or as ModelInferRequest bytes
// (the gRPC front end), -> conversion and validation against loaded models
// (server/kserve_conversion.h) -> scoring on the CPU engine. The input's
// first byte picks the form: even, the rest is a JSON body; odd, protobuf
// bytes. The JSON parser and the conversion are what stand between a client
// and the engine's indexing, so every request they accept is scored: an id
// let through out of range, a length that disagrees with the ids or a
// tensor shorter than its shape is an ASan report. Refusals must be
// INVALID_ARGUMENT; accepted requests give one score per candidate, each in
// [0, 1] when finite (the engine's final sigmoid).
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "engine/request_validation.h"
#include "inference/grpc_predict_v2.pb.h"
#include "server/http/kserve_json.h"
#include "server/kserve_conversion.h"
#include "tests/fuzz/quiet_protobuf.h"
#include "tests/fuzz/score_targets.h"

namespace {

// Converts `request` for every model, with and without a magnitude bound,
// and scores what the conversion accepts.
void ConvertAndScore(const inference::ModelInferRequest& request) {
  for (const float max_abs : rankd::fuzz::kMaxAbsInputs) {
    const rankd::engine::RequestLimits limits = rankd::fuzz::FuzzLimits(max_abs);
    for (rankd::fuzz::ScoreTarget& t : rankd::fuzz::ScoreTargets()) {
      rankd::server::KServeRequest converted;
      absl::Status s = rankd::server::ToEngineRequest(*t.model, request, limits, &converted);
      if (!s.ok()) {
        rankd::fuzz::RequireInvalidArgument(s, "conversion");
        continue;
      }
      rankd::fuzz::ScoreAccepted(t, converted.request, converted.request.num_candidates);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rankd::fuzz::QuietProtobufLogs();
  if (size == 0) return 0;
  const bool wire = (data[0] & 1) != 0;
  const absl::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  inference::ModelInferRequest request;
  if (wire) {
    if (!request.ParseFromArray(rest.data(), static_cast<int>(rest.size()))) return 0;
  } else {
    absl::Status parsed = rankd::server::ParseKServeInferJson(rest, &request);
    if (!parsed.ok()) {
      rankd::fuzz::RequireInvalidArgument(parsed, "JSON");
      return 0;
    }
  }
  ConvertAndScore(request);
  return 0;
}
