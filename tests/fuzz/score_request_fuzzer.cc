// Fuzz target: ScoreRequest bytes -> wire parse -> conversion and validation
// against loaded models (server/request_conversion.h) -> scoring on the CPU
// engine. Validation is what stands between a client and the engine's
// indexing, so every request it accepts is scored: an id it let through
// out of range, or a length that disagrees with the ids, is an ASan report.
// Accepted requests must give one score per candidate, each in [0, 1] when
// finite (the engine's final sigmoid).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "engine/cpu/cpu_engine.h"
#include "engine/request_validation.h"
#include "rankd/v1/ranking.pb.h"
#include "server/request_conversion.h"
#include "tests/fuzz/fuzz_models.h"
#include "tests/fuzz/quiet_protobuf.h"

namespace {

struct Target {
  std::shared_ptr<rankd::engine::Model> model;
  std::unique_ptr<rankd::engine::CpuEngine> engine;
};

std::vector<Target>* Targets() {
  static std::vector<Target>* targets = [] {
    auto* t = new std::vector<Target>;
    for (const auto& spec : rankd::fuzz::ScoreModelSpecs()) {
      Target target;
      target.model = rankd::engine::testing::MakeRandomModel(spec);
      // One thread: the engine runs the request on the calling thread.
      auto engine = rankd::engine::CpuEngine::Create(target.model, {1, 256});
      if (!engine.ok()) std::abort();
      target.engine = std::move(*engine);
      t->push_back(std::move(target));
    }
    return t;
  }();
  return targets;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rankd::fuzz::QuietProtobufLogs();
  rankd::v1::ScoreRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  // The server's limits keep a single input cheap (a real server sets them
  // from flags); both with and without a magnitude bound.
  rankd::engine::RequestLimits limits;
  limits.max_candidates = 256;
  limits.max_ids_per_feature = 4096;
  for (const float max_abs : {0.0f, 1e4f}) {
    limits.max_abs_input = max_abs;
    for (Target& t : *Targets()) {
      absl::StatusOr<rankd::engine::Request> converted =
          rankd::server::ToEngineRequest(*t.model, request, limits);
      if (!converted.ok()) {
        if (converted.status().code() != absl::StatusCode::kInvalidArgument) {
          std::fprintf(stderr, "conversion error is not INVALID_ARGUMENT: %s\n",
                       converted.status().ToString().c_str());
          std::abort();
        }
        continue;
      }
      absl::StatusOr<std::vector<float>> scores = t.engine->Score(*converted);
      if (!scores.ok()) {
        std::fprintf(stderr, "a converted request failed to score: %s\n",
                     scores.status().ToString().c_str());
        std::abort();
      }
      if (static_cast<int64_t>(scores->size()) != request.num_candidates()) std::abort();
      for (float s : *scores) {
        if (std::isfinite(s) && (s < 0.0f || s > 1.0f)) {
          std::fprintf(stderr, "score %g outside [0, 1]\n", s);
          std::abort();
        }
      }
    }
  }
  return 0;
}
