// Worker: one execution context of a backend, the unit a ModelInstance runs
// one thread for. The CPU worker wraps a CpuEngine; the CUDA worker owns a
// stream, a pinned staging arena, device buffers and a cuBLASLt handle. The
// interface names none of that, so the serving path is backend-neutral.
#ifndef RANKD_ENGINE_SERVING_WORKER_H_
#define RANKD_ENGINE_SERVING_WORKER_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "engine/batch_stats.h"
#include "engine/request.h"

namespace rankd::engine {

class LiveTables;  // engine/updates/live_tables.h

// Threading: a ModelInstance calls Execute from one thread only (the thread
// that owns this worker), one batch at a time, so implementations need no
// locking of their own state. That thread is not the one that constructed the
// worker, nor necessarily the one that destroys it: per-thread state (e.g.
// the CUDA current device) must be set inside Execute.
class Worker {
 public:
  virtual ~Worker() = default;

  // For logs and metrics, e.g. "cpu:0", "cuda:1/2". Bounded set of values.
  virtual absl::string_view name() const = 0;

  // Scores requests[i] into scores[i] (requests[i]->num_candidates floats)
  // and blocks until they are written. Requests have passed ValidateRequest
  // for this worker's model. `stats` (may be null) receives the batch's
  // side counts. A non-OK status fails every request of the batch.
  virtual absl::Status Execute(absl::Span<const Request* const> requests,
                               absl::Span<const absl::Span<float>> scores,
                               BatchStats* stats) = 0;

  // Warm-up (engine/serving/warmup.h), before the worker serves: scores like
  // Execute, and also takes every path Execute takes for a batch of this
  // size only while other workers are busy, so that no first-use cost of
  // such a path (a CUDA graph's capture) falls on a served batch. Default:
  // Execute.
  virtual absl::Status WarmUp(absl::Span<const Request* const> requests,
                              absl::Span<const absl::Span<float>> scores) {
    return Execute(requests, scores, nullptr);
  }

  // Embedding updates (live_tables.h). A worker whose batches run on a
  // device queue, and whose tables order each update on that queue after the
  // batches enqueued before it, may hold `live`'s gate (a BatchScope) only
  // while it enqueues a batch: it keeps `live` and returns true. Otherwise it
  // returns false and the ModelInstance holds a BatchScope around each whole
  // Execute. Called once, before the first Execute; `live` outlives the
  // worker's batches.
  virtual bool AttachLiveTables(LiveTables* live) { return false; }
};

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_SERVING_WORKER_H_
