#include "engine/serving/model_instance.h"

#include <pthread.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/thread_priority.h"
#include "kernels/cpu/thread_start.h"

namespace rankd::engine {

ModelInstance::Options ModelInstance::OptionsFromConfig(
    const rankd::v1::ModelConfig& config) {
  const rankd::v1::BatchingConfig& b = config.batching();
  Options options;
  DynamicBatcher::Options& o = options.batching;
  if (b.max_batch_candidates() != 0) {
    o.max_batch_candidates = b.max_batch_candidates();
  }
  if (b.max_queue_delay_us() != 0)
    o.max_queue_delay_us = b.max_queue_delay_us();
  if (b.preferred_batch_candidates() != 0) {
    o.preferred_batch_candidates = b.preferred_batch_candidates();
  }
  if (b.max_queue_requests() != 0)
    o.max_queue_requests = b.max_queue_requests();
  if (b.default_timeout_us() != 0)
    o.default_timeout_us = b.default_timeout_us();
  o.admit_by_deadline = !b.disable_deadline_admission();
  return options;
}

absl::StatusOr<std::unique_ptr<ModelInstance>> ModelInstance::Create(
    std::shared_ptr<const Model> model, const Options& options,
    std::vector<std::unique_ptr<Worker>> workers, ServingObserver* observer,
    Clock* clock) {
  if (model == nullptr) {
    return absl::InvalidArgumentError("ModelInstance: no model");
  }
  absl::Status valid = DynamicBatcher::ValidateOptions(options.batching);
  if (!valid.ok()) return valid;
  if (workers.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ModelInstance of ", model->name, " v", model->version,
                     ": workers must hold at least one worker"));
  }
  for (size_t i = 0; i < workers.size(); ++i) {
    if (workers[i] == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("ModelInstance: workers[", i, "] is null"));
    }
  }
  if (options.completion_threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ModelInstance options: completion_threads must be >= 0, got ",
        options.completion_threads));
  }
  if (options.worker_nice < 0 || options.worker_nice > kernels::kMaxNice) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ModelInstance options: worker_nice must be in [0, ", kernels::kMaxNice,
        "], got ", options.worker_nice));
  }
  if (observer == nullptr) observer = NoopServingObserver();
  if (clock == nullptr) clock = RealClock::Get();
  std::unique_ptr<ModelInstance> instance(new ModelInstance(
      std::move(model), options, std::move(workers), observer, clock));

  ModelInstance* self = instance.get();
  absl::StatusOr<std::unique_ptr<DynamicBatcher>> batcher =
      DynamicBatcher::Create(options.batching, clock,
                             [self](int64_t requests, int64_t candidates) {
                               self->observer_->OnQueueDepth(
                                   self->ref(), requests, candidates);
                             },
                             // Requests the batcher completes itself (expired,
                             // cancelled) are reported here; computed ones
                             // in CompleteRequests.
                             [self](const QueuedRequest& q, const absl::Status& s,
                                    const RequestTiming& timing) {
                               self->observer_->OnRequestDone(
                                   self->ref(),
                                   RequestEvent{s.code(), q.request.num_candidates,
                                                timing.queue, timing.compute,
                                                timing.total, /*admitted=*/true});
                             });
  if (!batcher.ok()) return batcher.status();
  instance->batcher_ = std::move(batcher).value();
  if (options.completion_threads > 0) {
    CompletionExecutor::Options copts;
    copts.num_threads = options.completion_threads;
    auto completions = CompletionExecutor::Create(copts);
    if (!completions.ok()) return completions.status();
    instance->completions_ = std::move(completions).value();
  }

  {
    absl::MutexLock lock(&instance->shutdown_mu_);
    for (const std::unique_ptr<Worker>& worker : instance->workers_) {
      absl::StatusOr<std::thread> thread =
          kernels::TryStartThread(absl::StrCat("the thread of worker ", worker->name()),
                                  &ModelInstance::RunWorker, self, worker.get());
      // The instance's destructor stops the batcher (nothing was admitted)
      // and joins the workers already started.
      if (!thread.ok()) return thread.status();
      instance->threads_.push_back(std::move(thread).value());
    }
  }
  return instance;
}

ModelInstance::ModelInstance(std::shared_ptr<const Model> model,
                             const Options& options,
                             std::vector<std::unique_ptr<Worker>> workers,
                             ServingObserver* observer, Clock* clock)
    : model_(std::move(model)),
      options_(options),
      observer_(observer),
      clock_(clock),
      workers_(std::move(workers)) {}

ModelInstance::~ModelInstance() { Shutdown(); }

absl::Status ModelInstance::Submit(QueuedRequest item) {
  const int32_t candidates = item.request.num_candidates;
  absl::Status status;
  if (options_.validate_requests) {
    status = ValidateRequest(*model_, item.request, options_.limits);
  }
  if (status.ok()) {
    // `done` is not wrapped: admitted requests are reported to the observer
    // where they complete (CompleteRequests, or the batcher's drop hook).
    status = batcher_->Enqueue(std::move(item));
  }
  if (!status.ok()) {
    observer_->OnRequestDone(ref(), RequestEvent{status.code(), candidates});
  }
  return status;
}

void ModelInstance::Shutdown() {
  absl::MutexLock lock(&shutdown_mu_);
  // Null only when Create failed before making it; then no thread exists.
  if (batcher_ != nullptr) batcher_->Stop();
  // NextBatch returns std::nullopt only once the queue is empty, and a
  // thread asks again only after completing its batch: joining every thread
  // therefore waits for all admitted work.
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  // Every computed batch has been handed over by now; run what is left.
  if (completions_ != nullptr) completions_->Shutdown();
}

absl::Status ModelInstance::CheckFiniteScores(const QueuedRequest& q) {
  int64_t bad = 0;
  for (float score : q.scores) bad += std::isfinite(score) ? 0 : 1;
  if (bad == 0) return absl::OkStatus();
  size_t first = 0;
  while (std::isfinite(q.scores[first])) ++first;
  observer_->OnNonFiniteScores(ref(), bad);
  return absl::InternalError(absl::StrCat(
      "score of candidate ", first, " is ", q.scores[first], " (", bad, " of ",
      q.scores.size(), " scores are not finite): model \"", model_->name, "\" version ",
      model_->version, " overflowed float32 on these inputs; no scores are returned"));
}

void ModelInstance::CompleteRequests(absl::Span<QueuedRequest> requests,
                                     const BatchOutcome& outcome) {
  const ModelVersionRef model = ref();
  for (QueuedRequest& q : requests) {
    // Never an OK answer with a NaN or Inf score, whichever backend
    // computed it (issue 17).
    const absl::Status status = outcome.status.ok() ? CheckFiniteScores(q) : outcome.status;
    RequestTiming timing;
    timing.enqueue_time = q.enqueue_time;
    timing.queue = outcome.cut_time - q.enqueue_time;
    timing.compute = outcome.end - outcome.start;
    timing.total = outcome.end - q.enqueue_time;
    timing.batch_requests = outcome.batch_requests;
    timing.batch_candidates = outcome.batch_candidates;
    observer_->OnRequestDone(
        model, RequestEvent{status.code(), q.request.num_candidates,
                            timing.queue, timing.compute, timing.total,
                            /*admitted=*/true});
    std::move(q.done)(status, timing);
  }
}

void ModelInstance::HandOff(std::vector<QueuedRequest> requests,
                            const BatchOutcome& outcome) {
  // A slice per completion thread, but not below kMinSlice requests.
  const size_t n = requests.size();
  const size_t max_slices = static_cast<size_t>(completions_->num_threads());
  const size_t slices = std::max<size_t>(1, std::min(max_slices, n / kMinSlice));
  if (slices == 1) {
    completions_->Run([this, outcome, requests = std::move(requests)]() mutable {
      CompleteRequests(absl::MakeSpan(requests), outcome);
    });
    return;
  }
  size_t begin = 0;
  for (size_t i = 0; i < slices; ++i) {
    const size_t end = begin + (n - begin) / (slices - i);
    std::vector<QueuedRequest> slice;
    slice.reserve(end - begin);
    for (size_t k = begin; k < end; ++k) slice.push_back(std::move(requests[k]));
    completions_->Run([this, outcome, slice = std::move(slice)]() mutable {
      CompleteRequests(absl::MakeSpan(slice), outcome);
    });
    begin = end;
  }
}

void ModelInstance::RunWorker(Worker* worker) {
  // Named so per-thread CPU (top -H, /proc/PID/task/*/comm, perf --sort comm;
  // bench/host_path.sh) tells worker time from gRPC and pool threads.
  pthread_setname_np(pthread_self(), "rankd-worker");
  // Best effort: a thread left at the default priority only answers
  // refusals more slowly under overload (thread_priority.h).
  kernels::LowerThisThreadPriority(options_.worker_nice);
  const ModelVersionRef model = ref();
  // Reused across batches: no allocation per batch in steady state.
  std::vector<const Request*> requests;
  std::vector<absl::Span<float>> scores;
  BatchStats stats;
  // Updates: the worker holds the gate itself while it enqueues a batch, or
  // this thread holds it around each whole batch.
  LiveTables* const live = options_.live_tables.get();
  LiveTables* const scope_live =
      live != nullptr && worker->AttachLiveTables(live) ? nullptr : live;
  while (std::optional<Batch> batch = batcher_->NextBatch()) {
    requests.clear();
    scores.clear();
    for (const QueuedRequest& q : batch->requests) {
      requests.push_back(&q.request);
      scores.push_back(q.scores);
    }
    stats.unresolved_ids_per_table.clear();
    stats.host_tables.clear();

    const absl::Time start = clock_->Now();
    absl::Status status;
    {
      LiveTables::BatchScope tables(scope_live);
      status = worker->Execute(requests, scores, &stats);
    }
    const absl::Time end = clock_->Now();

    const int32_t num_requests = static_cast<int32_t>(batch->requests.size());
    observer_->OnBatch(
        model, BatchEvent{worker->name(), num_requests, batch->num_candidates,
                          end - start, status.code()});
    if (status.ok()) {
      const size_t tables = std::min(stats.unresolved_ids_per_table.size(),
                                     model_->tables.size());
      for (size_t t = 0; t < tables; ++t) {
        const int64_t count = stats.unresolved_ids_per_table[t];
        if (count > 0) {
          observer_->OnUnresolvedIds(model, model_->tables[t].name,
                                     model_->tables[t].dynamic, count);
        }
      }
      const size_t host = std::min(stats.host_tables.size(), model_->tables.size());
      for (size_t t = 0; t < host; ++t) {
        if (!stats.host_tables[t]) continue;  // in device memory
        const HostTableStats& h = *stats.host_tables[t];
        const int64_t unresolved =
            t < stats.unresolved_ids_per_table.size() ? stats.unresolved_ids_per_table[t] : 0;
        const int64_t hits = std::max<int64_t>(0, h.lookups - unresolved - h.host_reads);
        observer_->OnEmbeddingCache(model, model_->tables[t].name, hits, h.host_reads,
                                    h.host_rows_read * model_->tables[t].row_bytes(),
                                    h.cache_occupancy.value_or(-1.0));
      }
    }

    const BatchOutcome outcome{status, batch->cut_time, start, end, num_requests,
                               batch->num_candidates};
    const bool inline_completion =
        completions_ == nullptr ||
        (options_.complete_inline_when_idle && batch->requests.size() < kMinSlice &&
         batcher_->queued_requests() == 0);
    if (inline_completion) {
      CompleteRequests(absl::MakeSpan(batch->requests), outcome);
    } else {
      HandOff(std::move(batch->requests), outcome);
    }
  }
}

}  // namespace rankd::engine
