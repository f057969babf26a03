// ServingObserver: how the serving path reports what it does, so that
// server/ can export metrics (prometheus-cpp) without the engine depending on
// Prometheus or on a global metrics registry. Every method has a no-op
// default; implement only what you export.
//
// Threading: methods are called concurrently from request threads (Submit)
// and worker threads, so implementations must be thread-safe, and they must
// not block: they run on the latency path. OnQueueDepth runs under the
// batcher's lock (so depth reports arrive in order) and must not call into
// the ModelInstance. string_views are valid only during the call.
#ifndef RANKD_ENGINE_SERVING_OBSERVER_H_
#define RANKD_ENGINE_SERVING_OBSERVER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace rankd::engine {

// The model version an event belongs to.
struct ModelVersionRef {
  absl::string_view name;
  int64_t version = 0;
};

// One request's outcome.
struct RequestEvent {
  absl::StatusCode code = absl::StatusCode::kOk;
  int32_t candidates = 0;
  // Enqueue -> batch cut (or -> completion if never computed).
  absl::Duration queue;
  // Its batch's Execute; zero if never computed.
  absl::Duration compute;
  // Enqueue -> completion; zero if rejected at Submit.
  absl::Duration total;
  // Submit returned OK (the request was queued; its done callback ran).
  // False for rejections answered by Submit itself.
  bool admitted = false;
};

// One executed batch.
struct BatchEvent {
  absl::string_view worker;  // Worker::name()
  int32_t requests = 0;
  int64_t candidates = 0;
  absl::Duration compute;
  absl::StatusCode code = absl::StatusCode::kOk;
};

class ServingObserver {
 public:
  virtual ~ServingObserver() = default;

  // Exactly once per Submit: for an admitted request just before its done
  // callback runs (OK, DEADLINE_EXCEEDED, CANCELLED, the worker's error...);
  // for a rejected one (RESOURCE_EXHAUSTED, FAILED_PRECONDITION,
  // INVALID_ARGUMENT...) before Submit returns the error.
  virtual void OnRequestDone(const ModelVersionRef& model,
                             const RequestEvent& event) {}

  // After each batch's Execute, before its requests' callbacks.
  virtual void OnBatch(const ModelVersionRef& model, const BatchEvent& event) {}

  // Whenever the queue's depth changes.
  virtual void OnQueueDepth(const ModelVersionRef& model,
                            int64_t queued_requests,
                            int64_t queued_candidates) {}

  // After a successful batch, once per table with count > 0: ids that did not
  // resolve and pooled the default vector. For a dynamic table they are keys
  // not stored (misses); for a static table, ids out of range.
  virtual void OnUnresolvedIds(const ModelVersionRef& model,
                               absl::string_view table, bool dynamic_table,
                               int64_t count) {}

  // A computed request had `count` (> 0) scores that are NaN or +-Inf; it
  // fails with INTERNAL instead of answering them (ModelInstance). Called
  // just before that request's OnRequestDone.
  virtual void OnNonFiniteScores(const ModelVersionRef& model, int64_t count) {}

  // After a successful batch, once per table in pinned host memory (CUDA
  // backend, placement HOST): lookups served from the HBM cache (hits) and
  // read from host memory (misses), the bytes those reads moved, and the
  // cache's occupancy (-1: the table has no cache).
  virtual void OnEmbeddingCache(const ModelVersionRef& model, absl::string_view table,
                                int64_t hits, int64_t misses, int64_t host_read_bytes,
                                double occupancy) {}
};

// A shared no-op observer (never destroyed).
ServingObserver* NoopServingObserver();

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_SERVING_OBSERVER_H_
