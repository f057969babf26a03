#include "tests/fuzz/score_targets.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "engine/testing/test_models.h"
#include "tests/fuzz/fuzz_models.h"

namespace rankd::fuzz {

std::vector<ScoreTarget>& ScoreTargets() {
  static std::vector<ScoreTarget>* targets = [] {
    auto* t = new std::vector<ScoreTarget>;
    for (const auto& spec : ScoreModelSpecs()) {
      ScoreTarget target;
      target.model = engine::testing::MakeRandomModel(spec);
      auto cpu = engine::CpuEngine::Create(target.model, {1, 256});
      if (!cpu.ok()) std::abort();
      target.engine = std::move(*cpu);
      t->push_back(std::move(target));
    }
    return t;
  }();
  return *targets;
}

engine::RequestLimits FuzzLimits(float max_abs_input) {
  engine::RequestLimits limits;
  limits.max_candidates = 256;
  limits.max_ids_per_feature = 4096;
  limits.max_abs_input = max_abs_input;
  return limits;
}

void RequireInvalidArgument(const absl::Status& status, const char* step) {
  if (status.code() == absl::StatusCode::kInvalidArgument) return;
  std::fprintf(stderr, "%s error is not INVALID_ARGUMENT: %s\n", step, status.ToString().c_str());
  std::abort();
}

void ScoreAccepted(ScoreTarget& target, const engine::Request& request, int64_t candidates) {
  absl::StatusOr<std::vector<float>> scores = target.engine->Score(request);
  if (!scores.ok()) {
    std::fprintf(stderr, "a converted request failed to score: %s\n",
                 scores.status().ToString().c_str());
    std::abort();
  }
  if (static_cast<int64_t>(scores->size()) != candidates) {
    std::fprintf(stderr, "%zu scores for %lld candidates\n", scores->size(),
                 static_cast<long long>(candidates));
    std::abort();
  }
  for (float s : *scores) {
    if (std::isfinite(s) && (s < 0.0f || s > 1.0f)) {
      std::fprintf(stderr, "score %g outside [0, 1]\n", s);
      std::abort();
    }
  }
}

}  // namespace rankd::fuzz
