// What the request fuzzers (score_request_fuzzer, kserve_infer_fuzzer) share:
// the models of ScoreModelSpecs with a CPU engine each, the limits a request
// is converted under, and the checks on a conversion's outcome. Every
// failed check prints why and aborts (a libFuzzer finding).
#ifndef RANKD_TESTS_FUZZ_SCORE_TARGETS_H_
#define RANKD_TESTS_FUZZ_SCORE_TARGETS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/model/model.h"
#include "engine/request.h"
#include "engine/request_validation.h"

namespace rankd::fuzz {

struct ScoreTarget {
  std::shared_ptr<engine::Model> model;
  std::unique_ptr<engine::CpuEngine> engine;  // one thread: runs on the caller
};

// The models of ScoreModelSpecs, made on the first call (fuzz targets are
// single-threaded).
std::vector<ScoreTarget>& ScoreTargets();

// The magnitude bounds each request is converted under: none, and 1e4.
inline constexpr float kMaxAbsInputs[] = {0.0f, 1e4f};

// The server's limits, small enough to keep one input cheap (a real server
// sets them from flags), with `max_abs_input`.
engine::RequestLimits FuzzLimits(float max_abs_input);

// Aborts unless `status` is INVALID_ARGUMENT; `step` names what refused.
void RequireInvalidArgument(const absl::Status& status, const char* step);

// Scores a request the conversion accepted on `target`'s engine. Aborts
// unless it scores, with `candidates` scores (what the client sent), each in
// [0, 1] when finite (the engine's final sigmoid).
void ScoreAccepted(ScoreTarget& target, const engine::Request& request, int64_t candidates);

}  // namespace rankd::fuzz

#endif  // RANKD_TESTS_FUZZ_SCORE_TARGETS_H_
