// Warm-up: scores synthetic requests through a ModelInstance before it is
// reported ready, so the first real request pays no first-touch costs
// (first-touch page faults, thread-pool start, GPU graph capture).
#ifndef RANKD_ENGINE_SERVING_WARMUP_H_
#define RANKD_ENGINE_SERVING_WARMUP_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "engine/serving/model_instance.h"
#include "engine/serving/worker.h"

namespace rankd::engine {

// Sends one request of each size in `candidate_counts` (valid ids: row 0 of
// static tables, the first stored key of dynamic ones; dense values 0.5) and
// waits for all. Any failure is returned with the size that failed.
absl::Status WarmUp(ModelInstance& instance, const std::vector<int32_t>& candidate_counts);

// Runs every worker's WarmUp directly (before a ModelInstance owns them) on
// two requests of each size in `candidate_counts`: one built as WarmUp's,
// one whose bags hold other than one id each (two, or none and one where a
// feature takes at most one). Each CUDA worker so captures the graphs of
// every bucket those sizes reach, for one-hot and multi-hot batches, on the
// paths of an idle GPU and of a busy one. Errors name the worker and the
// size.
absl::Status WarmUpWorkers(const Model& model, absl::Span<const std::unique_ptr<Worker>> workers,
                           const std::vector<int32_t>& candidate_counts);

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_SERVING_WARMUP_H_
