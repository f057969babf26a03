// DynamicBatcher: the bounded queue in front of one model version's workers.
// It groups whole requests into batches by candidate count and age, honours
// per-request deadlines and cancellation, and answers a full queue at once
// (DESIGN.md, "Data path of one request", step 2).
//
// Batch formation (TryCutBatch, a deterministic function of `now` and the
// queue; NextBatch is the blocking loop around it):
//   1. Queued requests whose deadline has passed are completed with
//      DEADLINE_EXCEEDED, cancelled ones with CANCELLED; neither is computed.
//   2. A batch is cut when the queued candidates reach
//      preferred_batch_candidates, when the oldest request has waited
//      max_queue_delay_us, or at once after Stop().
//   3. A batch takes whole requests from the front in FIFO order while the
//      total stays within max_batch_candidates; a request larger than that
//      goes alone in its own batch. A request's candidates are never split,
//      dropped, duplicated or reordered: the batch carries the request itself.
//
// Deadline-aware admission (Options::admit_by_deadline). The batcher measures
// how fast its queue drains: over the intervals between cuts while it is
// backlogged (a cut left a batch due at once behind it, so the next cut
// waits only for a worker), candidates cut per second, folded into a moving
// average every kDrainWindow. A request that finds the queue non-empty and
// would, at that rate, wait more than half its time left ((queued candidates
// + its own) / rate > (deadline - now) / 2; the other half is for its batch's
// compute and the way back) is refused at once with RESOURCE_EXHAUSTED.
// Without that, an overloaded FIFO queue makes every request wait until just
// before its deadline and most expire anyway: goodput collapses. Until the
// first measurement (and whenever the queue is empty) requests are admitted.
//
// Ownership and threading: all methods are thread-safe. The batcher owns the
// queued items (and so their `done` callbacks) until it hands them out in a
// Batch or completes them itself. `done` callbacks the batcher runs (expired,
// cancelled, destroyed) run on the thread that called TryCutBatch /
// NextBatch / the destructor, never under the batcher's lock. The destructor
// requires that no thread is inside NextBatch; it completes anything still
// queued with UNAVAILABLE (ModelInstance drains first, so that never happens
// there).
#ifndef RANKD_ENGINE_SERVING_DYNAMIC_BATCHER_H_
#define RANKD_ENGINE_SERVING_DYNAMIC_BATCHER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "engine/request.h"
#include "engine/serving/clock.h"

namespace rankd::engine {

// Where a request's time went; passed to its `done` callback (and to metrics).
struct RequestTiming {
  absl::Time enqueue_time;
  // Enqueue -> its batch was cut; for a request completed without compute
  // (expired, cancelled), enqueue -> completion.
  absl::Duration queue;
  // Execute() of its batch; zero when it was never computed.
  absl::Duration compute;
  // Enqueue -> completion.
  absl::Duration total;
  // The batch it was computed in; 0 when it was never computed.
  int32_t batch_requests = 0;
  int64_t batch_candidates = 0;
};

// Runs once per admitted request. `status` is OK when the scores were written.
using DoneCallback = absl::AnyInvocable<void(absl::Status status,
                                             const RequestTiming& timing) &&>;

// One request waiting in the batcher.
struct QueuedRequest {
  // --- Set by the caller. ---
  // Views into caller memory (the server: the decoded ScoreRequest). The
  // caller keeps that memory alive until `done` has been called.
  Request request;
  // request.num_candidates floats of caller memory (the server: the
  // response's scores, so nothing is copied). Written by the worker that
  // computes the request, before `done`; unspecified when status is not OK.
  absl::Span<float> scores;
  // Absolute deadline. absl::InfiniteFuture() (gRPC's "no deadline") means
  // none: Enqueue sets now + default_timeout_us.
  absl::Time deadline = absl::InfiniteFuture();
  // Optional; true once the client has gone away. Called under the batcher's
  // lock, possibly many times: it must be cheap, thread-safe, non-blocking
  // and must not call into the batcher (e.g. read an atomic that the RPC's
  // OnCancel sets).
  std::function<bool()> cancelled;
  // Required. Called exactly once if and only if Enqueue returned OK, on a
  // worker or batcher thread; it must not block (it delays the batch's other
  // requests) and must not call ModelInstance::Shutdown.
  DoneCallback done;

  // --- Set by Enqueue. ---
  absl::Time enqueue_time;
};

// Requests handed to one worker, in FIFO order.
struct Batch {
  std::vector<QueuedRequest> requests;
  int64_t num_candidates = 0;  // sum of requests[i].request.num_candidates
  absl::Time cut_time;
};

class DynamicBatcher {
 public:
  struct Options {
    // Most candidates in one batch (a larger request still runs, alone).
    int32_t max_batch_candidates = 4096;
    // Longest the oldest queued request waits for its batch to fill. 0 = cut
    // whatever is queued as soon as a worker asks.
    int64_t max_queue_delay_us = 0;
    // Cut as soon as this many candidates are queued; 0 = max_batch_candidates.
    int32_t preferred_batch_candidates = 0;
    // Queue bound in requests; Enqueue beyond it answers RESOURCE_EXHAUSTED.
    int32_t max_queue_requests = 1024;
    // Deadline of requests that carry none (10 s).
    int64_t default_timeout_us = 10'000'000;
    // Refuse requests that would wait past their deadlines (see the top of
    // the file). On by default.
    bool admit_by_deadline = true;
    // A worker that finds the queue empty first spins this long (real time,
    // whatever the clock) watching for a new request before it sleeps.
    // Waking a sleeping thread costs tens of microseconds on a virtual
    // machine (milliseconds at the tail); a spinning one takes the next
    // request at once, at the price of that much CPU per idle spell. At most
    // one worker spins at a time (the others sleep), so an idle batcher costs
    // one core however many workers it has; a request that finds a worker
    // spinning signals no one. 0 = sleep at once. In [0, 10000].
    int64_t idle_spin_us = 0;
  };

  // Called with the new depth whenever it changes. Runs under the batcher's
  // lock (so reports arrive in order): it must be cheap (set a gauge) and must
  // not call into the batcher.
  using QueueDepthCallback =
      std::function<void(int64_t queued_requests, int64_t queued_candidates)>;

  // Called for each request the batcher completes itself (expired,
  // cancelled, or left at destruction), just before its `done`, on the same
  // thread and outside the lock. Lets the owner observe those outcomes
  // without wrapping every request's `done` in another closure (a heap
  // allocation per request).
  using DroppedCallback = std::function<void(const QueuedRequest& item,
                                             const absl::Status& status,
                                             const RequestTiming& timing)>;

  // INVALID_ARGUMENT naming the offending field, or OK.
  static absl::Status ValidateOptions(const Options& options);

  // `clock` (null = RealClock::Get()) must outlive the batcher.
  static absl::StatusOr<std::unique_ptr<DynamicBatcher>> Create(
      const Options& options, Clock* clock = nullptr,
      QueueDepthCallback on_queue_depth = nullptr,
      DroppedCallback on_dropped = nullptr);

  ~DynamicBatcher();
  DynamicBatcher(const DynamicBatcher&) = delete;
  DynamicBatcher& operator=(const DynamicBatcher&) = delete;

  // Admits `item` and returns OK (its `done` will run exactly once), or
  // returns an error at once and never calls `done` (it is destroyed), so the
  // caller answers the client itself:
  //   INVALID_ARGUMENT     num_candidates < 1, scores size != num_candidates,
  //                        or no `done`;
  //   FAILED_PRECONDITION  after Stop();
  //   RESOURCE_EXHAUSTED   max_queue_requests requests are queued, or (with
  //                        admit_by_deadline) it would wait in the queue
  //                        past its deadline;
  //   DEADLINE_EXCEEDED    its deadline has already passed.
  absl::Status Enqueue(QueuedRequest item);

  struct CutResult {
    // A batch to execute, if one is due at `now`.
    std::optional<Batch> batch;
    // Without a batch: when a call could next cut one or expire a request;
    // absl::InfiniteFuture() when the queue is empty.
    absl::Time wake_time = absl::InfiniteFuture();
  };
  // One step of batch formation at `now` (see the top of the file). Completes
  // expired / cancelled requests (on this thread, after releasing the lock)
  // before returning.
  CutResult TryCutBatch(absl::Time now);

  // Blocks until a batch is due and returns it; std::nullopt once Stop() has
  // been called and the queue is empty. For worker threads.
  std::optional<Batch> NextBatch();

  // Stops admitting requests and makes everything queued due at once, so
  // NextBatch callers drain the queue and then get std::nullopt. Idempotent.
  void Stop();
  bool stopped() const { return stopped_.load(std::memory_order_acquire); }
  // Workers spinning on an empty queue now (Options::idle_spin_us): 0 or 1.
  int spinning_workers() const {
    absl::MutexLock lock(&mu_);
    return spinning_;
  }

  int64_t queued_requests() const;
  int64_t queued_candidates() const;
  // The measured drain rate in candidates per second; 0 until measured.
  double drain_rate() const;

  // Cut intervals are accumulated for this long before they update the drain
  // rate (a few batches at typical batch times).
  static constexpr absl::Duration kDrainWindow = absl::Milliseconds(20);
  const Options& options() const { return options_; }

 private:
  struct Dropped {
    QueuedRequest item;
    absl::Status status;
  };

  DynamicBatcher(const Options& options, Clock* clock,
                 QueueDepthCallback on_queue_depth, DroppedCallback on_dropped);
  CutResult CutLocked(absl::Time now, std::vector<Dropped>* dropped)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReportDepthLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Updates the drain rate with a batch of `candidates` cut at `now`.
  void NoteCutLocked(absl::Time now, int64_t candidates) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // RESOURCE_EXHAUSTED when `item` would wait past its deadline, else OK.
  absl::Status AdmitByDeadlineLocked(const QueuedRequest& item, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CompleteDropped(std::vector<Dropped>* dropped, absl::Time now) const;

  const Options options_;
  const int64_t preferred_candidates_;  // resolved (never 0)
  const absl::Duration max_queue_delay_;
  const absl::Duration default_timeout_;
  Clock* const clock_;
  const QueueDepthCallback on_queue_depth_;
  const DroppedCallback on_dropped_;

  // Read without the lock by stopped(); written under it so waiters see it.
  std::atomic<bool> stopped_{false};
  // Requests ever enqueued; read without the lock by spinning workers
  // (Options::idle_spin_us) to notice a new request.
  std::atomic<uint64_t> enqueued_{0};
  mutable absl::Mutex mu_;
  // Signalled when the queue may have a batch due sooner than its waiters
  // think (a request arrived, a cut left requests behind, Stop).
  absl::CondVar cv_;
  std::deque<QueuedRequest> queue_ ABSL_GUARDED_BY(mu_);
  int64_t queued_candidates_ ABSL_GUARDED_BY(mu_) = 0;
  // Workers inside their idle spin (Options::idle_spin_us): at most 1.
  int spinning_ ABSL_GUARDED_BY(mu_) = 0;
  // Drain measurement (NoteCutLocked): the last cut, whether it left the
  // queue backlogged, the open window's sums, and the rate (0 = unknown).
  absl::Time last_cut_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool backlogged_ ABSL_GUARDED_BY(mu_) = false;
  int64_t window_candidates_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration window_time_ ABSL_GUARDED_BY(mu_);
  double drain_rate_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_SERVING_DYNAMIC_BATCHER_H_
