// ModelInstance: one model version being served. It owns the version's
// DynamicBatcher and one thread per Worker; each thread loops
// NextBatch -> Worker::Execute -> complete every request of the batch.
//
// Ownership: the instance shares the model (read-only), owns the batcher, the
// workers and their threads, and borrows the observer and the clock (both
// must outlive it). Requests stay owned by the caller (QueuedRequest).
//
// Scores are checked when a request completes: a request with a NaN or Inf
// score (an overflow in the model's float32 arithmetic) is answered INTERNAL
// naming the candidate, never OK (docs/operations.md, "Limits").
//
// Threading: Submit may be called from any number of threads. Done callbacks
// of computed requests run on the worker thread that computed them, or, with
// Options::completion_threads > 0, on the instance's completion threads (the
// worker hands the finished batch over and computes the next one at once; a
// batch is cut into at most completion_threads contiguous slices, each
// completed in FIFO order; no order between slices or batches; small batches
// that leave the queue empty still complete on the worker, see
// Options::complete_inline_when_idle). Requests that
// expire or are cancelled while queued complete on whichever worker thread
// noticed. Shutdown (and so the destructor) stops admitting requests, waits
// until every admitted request has been computed or completed and its
// callback has returned (the workers are joined first, then the completion
// threads drain and are joined), and joins the threads; it must not be called
// from a done callback or an observer method (it would wait for itself).
#ifndef RANKD_ENGINE_SERVING_MODEL_INSTANCE_H_
#define RANKD_ENGINE_SERVING_MODEL_INSTANCE_H_

#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/model/model.h"
#include "engine/request_validation.h"
#include "engine/serving/clock.h"
#include "engine/serving/completion_executor.h"
#include "engine/serving/dynamic_batcher.h"
#include "engine/serving/observer.h"
#include "engine/serving/worker.h"
#include "engine/updates/live_tables.h"
#include "rankd/v1/model_config.pb.h"

namespace rankd::engine {

class ModelInstance {
 public:
  struct Options {
    DynamicBatcher::Options batching;
    // Run ValidateRequest (with `limits`) in Submit. Off by default: the
    // server validates every request against the model before it submits
    // (DESIGN.md data path, step 1); embedders that do not must turn it on,
    // because workers assume valid requests.
    bool validate_requests = false;
    RequestLimits limits;
    // Threads that run computed requests' done callbacks (and their
    // OnRequestDone reports) instead of the worker thread; 0 = the worker
    // completes its batch itself before taking the next one. Worth it when
    // completing a request costs host time comparable to computing it (small
    // requests on a GPU); on a machine with few cores the extra hand-off
    // costs more than it frees (docs/benchmarks.md, "Per-request host path").
    int completion_threads = 0;
    // With completion threads: a batch of fewer than kMinSlice requests that
    // leaves the queue empty is completed on the worker thread anyway. Under
    // load the queue is rarely empty and batches go to the completion threads
    // as above; at low load this saves a thread wake-up per request on the
    // latency path, when the worker has nothing else to do.
    bool complete_inline_when_idle = true;
    // The version's update side (online embedding updates): each batch holds
    // its gate shared, for the whole batch or, where the worker attaches it
    // (Worker::AttachLiveTables), while the batch is enqueued, so an update
    // is applied between batches (live_tables.h). Null = tables never change.
    std::shared_ptr<LiveTables> live_tables;
    // Nice increment of the worker threads (kernels/cpu/thread_priority.h);
    // 0 = the priority of the thread that calls Create. The server raises it
    // for the CPU backend, whose workers compute on the host, so that the
    // threads receiving and refusing requests run first when cores are
    // saturated. At most kernels::kMaxNice.
    int worker_nice = 0;
  };

  // Batches are handed to completion threads in slices of at least this many
  // requests: waking a thread costs more than completing a few requests.
  static constexpr size_t kMinSlice = 8;

  // Options from a model's config: its BatchingConfig, with 0 meaning the
  // DynamicBatcher::Options default (as model_config.proto documents).
  static Options OptionsFromConfig(const rankd::v1::ModelConfig& config);

  // Starts one thread per worker (the number of workers is the number of
  // threads; at least one, none null). Every worker must compute `model`.
  // `observer` null = no-op; `clock` null = RealClock. INVALID_ARGUMENT
  // naming the field for bad options.
  static absl::StatusOr<std::unique_ptr<ModelInstance>> Create(
      std::shared_ptr<const Model> model, const Options& options,
      std::vector<std::unique_ptr<Worker>> workers,
      ServingObserver* observer = nullptr, Clock* clock = nullptr);

  // Shutdown().
  ~ModelInstance();
  ModelInstance(const ModelInstance&) = delete;
  ModelInstance& operator=(const ModelInstance&) = delete;

  // Queues `item` for scoring. OK: item.done runs exactly once, later, on a
  // worker thread. Otherwise item.done is never called and the error is the
  // answer (see DynamicBatcher::Enqueue; plus INVALID_ARGUMENT from
  // validation when validate_requests is on).
  absl::Status Submit(QueuedRequest item);

  // Stops admitting (Submit answers FAILED_PRECONDITION), finishes all queued
  // and in-flight requests (queued ones are cut at once, not after
  // max_queue_delay; expired or cancelled ones still fail as such), then joins
  // the worker threads. Idempotent; concurrent callers all wait for the end.
  void Shutdown();

  int64_t queued_requests() const { return batcher_->queued_requests(); }
  int num_workers() const { return static_cast<int>(workers_.size()); }
  const Model& model() const { return *model_; }
  const std::shared_ptr<const Model>& shared_model() const { return model_; }
  ModelVersionRef ref() const { return {model_->name, model_->version}; }

 private:
  ModelInstance(std::shared_ptr<const Model> model, const Options& options,
                std::vector<std::unique_ptr<Worker>> workers,
                ServingObserver* observer, Clock* clock);
  void RunWorker(Worker* worker);

  // What every request of one executed batch shares at completion.
  struct BatchOutcome {
    absl::Status status;
    absl::Time cut_time, start, end;
    int32_t batch_requests = 0;
    int64_t batch_candidates = 0;
  };
  // Reports each request to the observer, then runs its done, in order.
  // A request of a successful batch with a NaN or Inf score gets INTERNAL
  // instead (CheckFiniteScores).
  void CompleteRequests(absl::Span<QueuedRequest> requests,
                        const BatchOutcome& outcome);
  // OK when every score of `q` is finite; else reports the count to the
  // observer and returns INTERNAL naming the first such candidate. One pass
  // over the request's scores, whichever backend computed them.
  absl::Status CheckFiniteScores(const QueuedRequest& q);
  // Completes `batch` on the completion threads (in slices) and returns.
  void HandOff(std::vector<QueuedRequest> requests, const BatchOutcome& outcome);

  const std::shared_ptr<const Model> model_;
  const Options options_;
  ServingObserver* const observer_;
  Clock* const clock_;
  // Destroyed after the threads are joined (Shutdown in the destructor), so a
  // thread never outlives its worker.
  const std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<DynamicBatcher> batcher_;
  // Null when completion_threads is 0. Shut down after the worker threads are
  // joined (no more hand-offs), before the workers are destroyed.
  std::unique_ptr<CompletionExecutor> completions_;

  // Serializes Shutdown callers; worker threads never take it.
  absl::Mutex shutdown_mu_;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(shutdown_mu_);
};

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_SERVING_MODEL_INSTANCE_H_
