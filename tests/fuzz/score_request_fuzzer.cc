// Fuzz target: ScoreRequest bytes -> wire parse -> conversion and validation
// against loaded models (server/request_conversion.h) -> scoring on the CPU
// engine. Validation is what stands between a client and the engine's
// indexing, so every request it accepts is scored: an id it let through
// out of range, or a length that disagrees with the ids, is an ASan report.
// Accepted requests must give one score per candidate, each in [0, 1] when
// finite (the engine's final sigmoid).
#include <cstdint>

#include "engine/request_validation.h"
#include "rankd/v1/ranking.pb.h"
#include "server/request_conversion.h"
#include "tests/fuzz/quiet_protobuf.h"
#include "tests/fuzz/score_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rankd::fuzz::QuietProtobufLogs();
  rankd::v1::ScoreRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  for (const float max_abs : rankd::fuzz::kMaxAbsInputs) {
    const rankd::engine::RequestLimits limits = rankd::fuzz::FuzzLimits(max_abs);
    for (rankd::fuzz::ScoreTarget& t : rankd::fuzz::ScoreTargets()) {
      absl::StatusOr<rankd::engine::Request> converted =
          rankd::server::ToEngineRequest(*t.model, request, limits);
      if (!converted.ok()) {
        rankd::fuzz::RequireInvalidArgument(converted.status(), "conversion");
        continue;
      }
      rankd::fuzz::ScoreAccepted(t, *converted, request.num_candidates());
    }
  }
  return 0;
}
