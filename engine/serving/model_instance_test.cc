#include "engine/serving/model_instance.h"

#include <pthread.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/model/model_config_defaults.h"
#include "engine/serving/clock.h"
#include "engine/serving/cpu_worker.h"
#include "engine/serving/observer.h"
#include "engine/serving/worker.h"
#include "engine/testing/test_models.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/thread_limit.h"
#include "kernels/cpu/thread_priority.h"

namespace rankd::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::MakeRandomModel;
using testing::MakeRandomRequest;
using testing::OwnedRequest;
using testing::RandomModelSpec;
using testing::RandomRequestSpec;

// Holds a worker's first Execute until released, so requests pile up in the
// queue deterministically (no sleeps, no timing).
struct Gate {
  absl::Notification release;
  absl::Mutex mu;
  int entered ABSL_GUARDED_BY(mu) = 0;

  void Enter() {
    {
      absl::MutexLock lock(&mu);
      ++entered;
    }
    release.WaitForNotification();
  }
  void AwaitEntered(int n) {
    absl::MutexLock lock(&mu);
    auto ready = [this, n]()
                     ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return entered >= n; };
    mu.Await(absl::Condition(&ready));
  }
};

// Wraps a worker: its first Execute waits on the gate.
class GatedWorker final : public Worker {
 public:
  GatedWorker(std::unique_ptr<Worker> inner, Gate* gate)
      : inner_(std::move(inner)), gate_(gate) {}
  absl::string_view name() const override { return inner_->name(); }
  absl::Status Execute(absl::Span<const Request* const> requests,
                       absl::Span<const absl::Span<float>> scores,
                       BatchStats* stats) override {
    if (gate_ != nullptr) {
      Gate* gate = gate_;
      gate_ = nullptr;
      gate->Enter();
    }
    return inner_->Execute(requests, scores, stats);
  }

 private:
  std::unique_ptr<Worker> inner_;
  Gate* gate_;
};

// Scores = dense[c * num_dense] * 0.5 + 1 and records each batch as the list
// of its requests' first dense value (a request id in these tests).
class RecordingWorker final : public Worker {
 public:
  struct Log {
    absl::Mutex mu;
    std::vector<std::vector<int>> batches ABSL_GUARDED_BY(mu);
    std::vector<std::vector<int>> Batches() {
      absl::MutexLock lock(&mu);
      return batches;
    }
  };
  RecordingWorker(Log* log, int num_dense,
                  absl::Status result = absl::OkStatus(),
                  FakeClock* clock = nullptr, absl::Duration compute = {})
      : log_(log),
        num_dense_(num_dense),
        result_(result),
        clock_(clock),
        compute_(compute) {}
  absl::string_view name() const override { return "recording"; }
  absl::Status Execute(absl::Span<const Request* const> requests,
                       absl::Span<const absl::Span<float>> scores,
                       BatchStats* stats) override {
    std::vector<int> ids;
    for (size_t r = 0; r < requests.size(); ++r) {
      ids.push_back(static_cast<int>(requests[r]->dense[0]));
      for (int c = 0; c < requests[r]->num_candidates; ++c) {
        scores[r][c] = requests[r]->dense[c * num_dense_] * 0.5f + 1.0f;
      }
    }
    {
      absl::MutexLock lock(&log_->mu);
      log_->batches.push_back(ids);
    }
    if (clock_ != nullptr) clock_->Advance(compute_);
    return result_;
  }

 private:
  Log* log_;
  int num_dense_;
  absl::Status result_;
  FakeClock* clock_;
  absl::Duration compute_;
};

// One submitted request: its memory, scores and outcome.
struct Call {
  OwnedRequest owned;
  Request request;
  std::vector<float> scores;
  absl::Notification done;
  absl::Status status;
  RequestTiming timing;
  std::atomic<int> done_calls{0};
  std::atomic<bool> cancelled{false};

  QueuedRequest Item(absl::Time deadline = absl::InfiniteFuture()) {
    request = owned.view();
    scores.assign(owned.num_candidates, -1.0f);
    QueuedRequest q;
    q.request = request;
    q.scores = absl::MakeSpan(scores);
    q.deadline = deadline;
    q.cancelled = [this] { return cancelled.load(); };
    q.done = [this](absl::Status s, const RequestTiming& t) {
      status = std::move(s);
      timing = t;
      done_calls.fetch_add(1);
      done.Notify();
    };
    return q;
  }
};

// A request with num_dense 1 whose dense values are `id` (for
// RecordingWorker), and `n` candidates.
std::unique_ptr<Call> IdCall(int id, int n) {
  auto call = std::make_unique<Call>();
  call->owned.num_candidates = n;
  call->owned.dense.assign(n, static_cast<float>(id));
  return call;
}

class RecordingObserver final : public ServingObserver {
 public:
  void OnRequestDone(const ModelVersionRef& model,
                     const RequestEvent& event) override {
    absl::MutexLock lock(&mu_);
    EXPECT_EQ(model.name, expected_name_);
    requests.push_back(event);
  }
  void OnBatch(const ModelVersionRef&, const BatchEvent& event) override {
    absl::MutexLock lock(&mu_);
    batches.push_back(event);
  }
  void OnQueueDepth(const ModelVersionRef&, int64_t queued_requests,
                    int64_t) override {
    absl::MutexLock lock(&mu_);
    max_depth = std::max(max_depth, queued_requests);
    last_depth = queued_requests;
  }
  void OnUnresolvedIds(const ModelVersionRef&, absl::string_view table,
                       bool dynamic_table, int64_t count) override {
    absl::MutexLock lock(&mu_);
    unresolved.push_back({std::string(table), dynamic_table, count});
  }

  void OnNonFiniteScores(const ModelVersionRef&, int64_t count) override {
    absl::MutexLock lock(&mu_);
    nonfinite.push_back(count);
  }
  void OnEmbeddingCache(const ModelVersionRef&, absl::string_view table, int64_t hits,
                        int64_t misses, int64_t bytes_read, double occupancy) override {
    absl::MutexLock lock(&mu_);
    caches.push_back({std::string(table), hits, misses, bytes_read, occupancy});
  }
  struct Cache {
    std::string table;
    int64_t hits, misses, bytes_read;
    double occupancy;
  };
  std::vector<Cache> caches;

  std::vector<int64_t> nonfinite;
  struct Unresolved {
    std::string table;
    bool dynamic;
    int64_t count;
  };
  std::string expected_name_;
  absl::Mutex mu_;
  std::vector<RequestEvent> requests;
  std::vector<BatchEvent> batches;
  std::vector<Unresolved> unresolved;
  int64_t max_depth = 0;
  int64_t last_depth = -1;
};

std::shared_ptr<Model> IdModel() {
  RandomModelSpec spec;
  spec.num_dense = 1;
  auto model = MakeRandomModel(spec);
  model->name = "ids";
  model->version = 3;
  return model;
}

ModelInstance::Options Batching(int max, int preferred, int64_t delay_us,
                                int max_queue = 1024) {
  ModelInstance::Options o;
  o.batching.max_batch_candidates = max;
  o.batching.preferred_batch_candidates = preferred;
  o.batching.max_queue_delay_us = delay_us;
  o.batching.max_queue_requests = max_queue;
  return o;
}

std::unique_ptr<ModelInstance> MakeInstance(
    std::shared_ptr<const Model> model, const ModelInstance::Options& options,
    std::vector<std::unique_ptr<Worker>> workers,
    ServingObserver* observer = nullptr, Clock* clock = nullptr) {
  auto instance = ModelInstance::Create(std::move(model), options,
                                        std::move(workers), observer, clock);
  EXPECT_TRUE(instance.ok()) << instance.status();
  return std::move(instance).value();
}

std::vector<std::unique_ptr<Worker>> One(std::unique_ptr<Worker> w) {
  std::vector<std::unique_ptr<Worker>> v;
  v.push_back(std::move(w));
  return v;
}

TEST(ModelInstanceTest, BlockedWorkerFormsMultiRequestBatch) {
  FakeClock clock;
  Gate gate;
  RecordingWorker::Log log;
  RecordingObserver observer;
  observer.expected_name_ = "ids";
  // preferred 1: anything queued is due, so batching here comes only from
  // the worker being busy (never from the clock, which does not move).
  auto instance =
      MakeInstance(IdModel(), Batching(100, 1, 60'000'000),
                   One(std::make_unique<GatedWorker>(
                       std::make_unique<RecordingWorker>(&log, 1), &gate)),
                   &observer, &clock);
  std::vector<std::unique_ptr<Call>> calls;
  calls.push_back(IdCall(0, 1));
  ASSERT_TRUE(instance->Submit(calls[0]->Item()).ok());
  gate.AwaitEntered(1);  // the worker holds request 0
  for (int id = 1; id <= 3; ++id) {
    calls.push_back(IdCall(id, 2));
    ASSERT_TRUE(instance->Submit(calls.back()->Item()).ok());
  }
  EXPECT_EQ(instance->queued_requests(), 3);
  gate.release.Notify();
  for (auto& c : calls) c->done.WaitForNotification();
  instance->Shutdown();

  EXPECT_THAT(log.Batches(), ElementsAre(ElementsAre(0), ElementsAre(1, 2, 3)));
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_TRUE(calls[i]->status.ok()) << calls[i]->status;
    EXPECT_EQ(calls[i]->done_calls.load(), 1);
    for (float s : calls[i]->scores) EXPECT_EQ(s, i * 0.5f + 1.0f);
  }
  EXPECT_EQ(calls[3]->timing.batch_requests, 3);
  EXPECT_EQ(calls[3]->timing.batch_candidates, 6);
  absl::MutexLock lock(&observer.mu_);
  EXPECT_EQ(observer.requests.size(), 4u);
  ASSERT_EQ(observer.batches.size(), 2u);
  EXPECT_EQ(observer.batches[1].requests, 3);
  EXPECT_EQ(observer.batches[1].candidates, 6);
  EXPECT_EQ(observer.batches[1].worker, "recording");
  EXPECT_EQ(observer.max_depth, 3);
  EXPECT_EQ(observer.last_depth, 0);
}

// Records the nice value of the thread that executes its batches.
class NiceRecordingWorker final : public Worker {
 public:
  explicit NiceRecordingWorker(std::atomic<int>* nice) : nice_(nice) {}
  absl::string_view name() const override { return "nice"; }
  absl::Status Execute(absl::Span<const Request* const> requests,
                       absl::Span<const absl::Span<float>> scores,
                       BatchStats*) override {
    nice_->store(kernels::ThisThreadNice());
    for (size_t r = 0; r < requests.size(); ++r) {
      for (float& s : scores[r]) s = 1.0f;
    }
    return absl::OkStatus();
  }

 private:
  std::atomic<int>* nice_;
};

TEST(ModelInstanceTest, WorkerThreadsRunAtTheirNiceIncrement) {
  const int base = kernels::ThisThreadNice();
  for (int increment : {0, 3}) {
    std::atomic<int> seen{-100};
    ModelInstance::Options options = Batching(100, 1, 60'000'000);
    options.worker_nice = increment;
    auto instance = MakeInstance(
        IdModel(), options, One(std::make_unique<NiceRecordingWorker>(&seen)));
    std::unique_ptr<Call> call = IdCall(0, 1);
    ASSERT_TRUE(instance->Submit(call->Item()).ok());
    call->done.WaitForNotification();
    instance->Shutdown();
    EXPECT_TRUE(call->status.ok()) << call->status;
    EXPECT_EQ(seen.load(), std::min(kernels::kMaxNice, base + increment))
        << "increment " << increment;
  }
  EXPECT_EQ(kernels::ThisThreadNice(), base);  // the creating thread keeps its own
}

TEST(ModelInstanceTest, RejectsNiceOutsideItsRange) {
  for (int nice : {-1, kernels::kMaxNice + 1}) {
    ModelInstance::Options options;
    options.worker_nice = nice;
    std::atomic<int> seen{0};
    auto instance = ModelInstance::Create(
        IdModel(), options, One(std::make_unique<NiceRecordingWorker>(&seen)));
    ASSERT_FALSE(instance.ok());
    EXPECT_EQ(instance.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(instance.status().message().find("worker_nice"), std::string::npos)
        << instance.status();
  }
}

TEST(ModelInstanceTest, TimingSplitsQueueAndCompute) {
  FakeClock clock;
  Gate gate;
  RecordingWorker::Log log;
  auto instance = MakeInstance(
      IdModel(), Batching(100, 1, 60'000'000),
      One(std::make_unique<GatedWorker>(
          std::make_unique<RecordingWorker>(&log, 1, absl::OkStatus(), &clock,
                                            absl::Milliseconds(2)),
          &gate)),
      nullptr, &clock);
  auto first = IdCall(0, 1);
  ASSERT_TRUE(instance->Submit(first->Item()).ok());
  gate.AwaitEntered(1);
  auto second = IdCall(1, 1);
  ASSERT_TRUE(instance->Submit(second->Item()).ok());
  clock.Advance(absl::Milliseconds(5));  // `second` waits 5 ms + 2 ms compute
  gate.release.Notify();
  second->done.WaitForNotification();
  EXPECT_EQ(second->timing.queue, absl::Milliseconds(7));
  EXPECT_EQ(second->timing.compute, absl::Milliseconds(2));
  EXPECT_EQ(second->timing.total, absl::Milliseconds(9));
}

// A worker whose tables partly live in host memory: it reports per-table
// cache figures (typed, none for a table in device memory), which reach the
// observer once per host table with hits = lookups - unresolved - misses.
class HostStatsWorker final : public Worker {
 public:
  absl::string_view name() const override { return "host-stats"; }
  absl::Status Execute(absl::Span<const Request* const> requests,
                       absl::Span<const absl::Span<float>> scores, BatchStats* stats) override {
    for (size_t r = 0; r < requests.size(); ++r) {
      for (float& s : scores[r]) s = 0.5f;
    }
    stats->unresolved_ids_per_table = {0, 2, 1};
    stats->host_tables.assign(3, std::nullopt);
    stats->host_tables[1] = HostTableStats{10, 3, 2, 0.25};
    stats->host_tables[2] = HostTableStats{5, 5, 4, std::nullopt};  // no cache
    return absl::OkStatus();
  }
};

TEST(ModelInstanceTest, HostTableStatsReachTheObserverPerHostTable) {
  auto model = IdModel();
  RecordingObserver observer;
  observer.expected_name_ = "ids";
  auto instance = MakeInstance(model, Batching(100, 1, 0), One(std::make_unique<HostStatsWorker>()),
                               &observer);
  auto call = IdCall(1, 2);
  ASSERT_TRUE(instance->Submit(call->Item()).ok());
  call->done.WaitForNotification();
  instance->Shutdown();
  ASSERT_TRUE(call->status.ok()) << call->status;
  absl::MutexLock lock(&observer.mu_);
  ASSERT_EQ(observer.caches.size(), 2u);
  EXPECT_EQ(observer.caches[0].table, model->tables[1].name);
  EXPECT_EQ(observer.caches[0].hits, 10 - 2 - 3);
  EXPECT_EQ(observer.caches[0].misses, 3);
  EXPECT_EQ(observer.caches[0].bytes_read, 2 * model->tables[1].row_bytes());
  EXPECT_EQ(observer.caches[0].occupancy, 0.25);
  EXPECT_EQ(observer.caches[1].table, model->tables[2].name);
  EXPECT_EQ(observer.caches[1].hits, 0);  // never negative
  EXPECT_EQ(observer.caches[1].misses, 5);
  EXPECT_EQ(observer.caches[1].bytes_read, 4 * model->tables[2].row_bytes());
  EXPECT_EQ(observer.caches[1].occupancy, -1.0);  // the observer's "no cache"
}

TEST(ModelInstanceTest, ExecuteErrorFailsEveryRequestOfTheBatch) {
  FakeClock clock;
  Gate gate;
  RecordingWorker::Log log;
  RecordingObserver observer;
  observer.expected_name_ = "ids";
  auto instance =
      MakeInstance(IdModel(), Batching(100, 1, 60'000'000),
                   One(std::make_unique<GatedWorker>(
                       std::make_unique<RecordingWorker>(
                           &log, 1, absl::InternalError("device lost")),
                       &gate)),
                   &observer, &clock);
  std::vector<std::unique_ptr<Call>> calls;
  for (int id = 0; id < 4; ++id) {
    calls.push_back(IdCall(id, 1 + id));
    ASSERT_TRUE(instance->Submit(calls.back()->Item()).ok());
    if (id == 0) gate.AwaitEntered(1);
  }
  gate.release.Notify();
  instance->Shutdown();
  EXPECT_THAT(log.Batches(), ElementsAre(ElementsAre(0), ElementsAre(1, 2, 3)));
  for (auto& c : calls) {
    EXPECT_EQ(c->status.code(), absl::StatusCode::kInternal);
    EXPECT_THAT(c->status.message(), HasSubstr("device lost"));
    EXPECT_EQ(c->done_calls.load(), 1);
  }
  absl::MutexLock lock(&observer.mu_);
  ASSERT_EQ(observer.batches.size(), 2u);
  EXPECT_EQ(observer.batches[1].code, absl::StatusCode::kInternal);
  for (const RequestEvent& e : observer.requests) {
    EXPECT_EQ(e.code, absl::StatusCode::kInternal);
  }
}

// Issue 17, defect 3: a NaN or Inf score is never answered OK. Only the
// request that holds one fails (INTERNAL, naming the candidate); the others
// of its batch are answered; the observer counts the scores. With and
// without completion threads (both paths complete through one function).
TEST(ModelInstanceTest, NonFiniteScoreFailsOnlyItsRequest) {
  for (int completion_threads : {0, 2}) {
    SCOPED_TRACE(completion_threads);
    FakeClock clock;
    Gate gate;
    RecordingWorker::Log log;
    RecordingObserver observer;
    observer.expected_name_ = "ids";
    ModelInstance::Options options = Batching(100, 1, 60'000'000);
    options.completion_threads = completion_threads;
    options.complete_inline_when_idle = false;
    auto instance = MakeInstance(IdModel(), options,
                                 One(std::make_unique<GatedWorker>(
                                     std::make_unique<RecordingWorker>(&log, 1), &gate)),
                                 &observer, &clock);
    std::vector<std::unique_ptr<Call>> calls;
    calls.push_back(IdCall(0, 1));
    ASSERT_TRUE(instance->Submit(calls[0]->Item()).ok());
    gate.AwaitEntered(1);
    // One batch of three: the middle request's scores are 2, NaN, Inf, 2
    // (RecordingWorker: dense * 0.5 + 1).
    calls.push_back(IdCall(1, 2));
    calls.push_back(IdCall(2, 4));
    calls.back()->owned.dense = {2.0f, NAN, INFINITY, 2.0f};
    calls.push_back(IdCall(3, 1));
    for (size_t i = 1; i < calls.size(); ++i) {
      ASSERT_TRUE(instance->Submit(calls[i]->Item()).ok());
    }
    gate.release.Notify();
    for (auto& c : calls) c->done.WaitForNotification();
    instance->Shutdown();
    EXPECT_THAT(log.Batches(), ElementsAre(ElementsAre(0), ElementsAre(1, 2, 3)));
    for (size_t i : {0, 1, 3}) EXPECT_TRUE(calls[i]->status.ok()) << calls[i]->status;
    EXPECT_EQ(calls[2]->status.code(), absl::StatusCode::kInternal);
    EXPECT_THAT(calls[2]->status.message(),
                HasSubstr("score of candidate 1 is nan (2 of 4 scores are not finite): "
                          "model \"ids\" version 3"));
    absl::MutexLock lock(&observer.mu_);
    EXPECT_THAT(observer.nonfinite, ElementsAre(2));
    int internal = 0;
    for (const RequestEvent& e : observer.requests) {
      internal += e.code == absl::StatusCode::kInternal;
    }
    EXPECT_EQ(internal, 1);
  }
}

TEST(ModelInstanceTest, ExpiredAndCancelledAreNotExecuted) {
  FakeClock clock;
  Gate gate;
  RecordingWorker::Log log;
  auto instance =
      MakeInstance(IdModel(), Batching(100, 1, 60'000'000),
                   One(std::make_unique<GatedWorker>(
                       std::make_unique<RecordingWorker>(&log, 1), &gate)),
                   nullptr, &clock);
  auto first = IdCall(0, 1);
  ASSERT_TRUE(instance->Submit(first->Item()).ok());
  gate.AwaitEntered(1);
  auto expiring = IdCall(1, 1);
  ASSERT_TRUE(
      instance->Submit(expiring->Item(clock.Now() + absl::Milliseconds(1)))
          .ok());
  auto cancelled = IdCall(2, 1);
  ASSERT_TRUE(instance->Submit(cancelled->Item()).ok());
  auto kept = IdCall(3, 1);
  ASSERT_TRUE(instance->Submit(kept->Item()).ok());
  cancelled->cancelled = true;
  clock.Advance(absl::Milliseconds(1));
  gate.release.Notify();
  instance->Shutdown();
  EXPECT_EQ(expiring->status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(cancelled->status.code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(kept->status.ok());
  EXPECT_THAT(log.Batches(), ElementsAre(ElementsAre(0), ElementsAre(3)));
  EXPECT_THAT(expiring->scores, ElementsAre(-1.0f));
  EXPECT_THAT(cancelled->scores, ElementsAre(-1.0f));
}

TEST(ModelInstanceTest, FullQueueAnswersAtOnceAndIsObserved) {
  FakeClock clock;
  Gate gate;
  RecordingWorker::Log log;
  RecordingObserver observer;
  observer.expected_name_ = "ids";
  auto instance =
      MakeInstance(IdModel(), Batching(100, 1, 60'000'000, /*max_queue=*/2),
                   One(std::make_unique<GatedWorker>(
                       std::make_unique<RecordingWorker>(&log, 1), &gate)),
                   &observer, &clock);
  std::vector<std::unique_ptr<Call>> calls;
  for (int id = 0; id < 4; ++id) calls.push_back(IdCall(id, 1));
  ASSERT_TRUE(instance->Submit(calls[0]->Item()).ok());
  gate.AwaitEntered(1);
  ASSERT_TRUE(instance->Submit(calls[1]->Item()).ok());
  ASSERT_TRUE(instance->Submit(calls[2]->Item()).ok());
  absl::Status full = instance->Submit(calls[3]->Item());
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(calls[3]->done_calls.load(), 0);
  {
    absl::MutexLock lock(&observer.mu_);
    ASSERT_EQ(observer.requests.size(), 1u);  // the rejection, at once
    EXPECT_EQ(observer.requests[0].code, absl::StatusCode::kResourceExhausted);
    EXPECT_FALSE(observer.requests[0].admitted);
  }
  gate.release.Notify();
  instance->Shutdown();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(calls[i]->status.ok());
  absl::MutexLock lock(&observer.mu_);
  ASSERT_EQ(observer.requests.size(), 4u);
  for (int i = 1; i < 4; ++i) EXPECT_TRUE(observer.requests[i].admitted);
}

TEST(ModelInstanceTest, ShutdownDrainsQueuedAndInFlightWork) {
  FakeClock clock;  // never advanced: only Stop can make the queue due
  Gate gate;
  RecordingWorker::Log log;
  auto instance =
      MakeInstance(IdModel(), Batching(4, 4, 60'000'000, /*max_queue=*/64),
                   One(std::make_unique<GatedWorker>(
                       std::make_unique<RecordingWorker>(&log, 1), &gate)),
                   nullptr, &clock);
  std::vector<std::unique_ptr<Call>> calls;
  calls.push_back(IdCall(0, 4));  // due at once (4 >= preferred)
  ASSERT_TRUE(instance->Submit(calls[0]->Item()).ok());
  gate.AwaitEntered(1);
  for (int id = 1; id <= 5; ++id) {  // 1 candidate each: never due by size
    calls.push_back(IdCall(id, 1));
    ASSERT_TRUE(instance->Submit(calls.back()->Item()).ok());
  }
  std::thread shutdown([&] { instance->Shutdown(); });
  // Shutdown has begun once Submit is refused; admitted work is still queued.
  int id = 6;
  for (;;) {
    auto probe = IdCall(id, 1);
    absl::Status s = instance->Submit(probe->Item());
    if (s.code() == absl::StatusCode::kFailedPrecondition) break;
    // The Shutdown thread may not have run yet; a full queue just means
    // "try again".
    if (s.ok()) {
      calls.push_back(std::move(probe));
      ++id;
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
    }
    std::this_thread::yield();
  }
  EXPECT_EQ(instance->queued_requests(),
            static_cast<int64_t>(calls.size()) - 1);
  gate.release.Notify();
  shutdown.join();
  for (auto& c : calls) {
    EXPECT_TRUE(c->status.ok()) << c->status;
    EXPECT_EQ(c->done_calls.load(), 1);
  }
  std::vector<std::vector<int>> batches = log.Batches();
  ASSERT_GE(batches.size(), 3u);
  EXPECT_THAT(batches[0], ElementsAre(0));
  EXPECT_THAT(batches[1], ElementsAre(1, 2, 3, 4));  // FIFO, max 4
  instance->Shutdown();                              // idempotent
}

// With completion threads: every admitted request completes exactly once,
// with its scores, reported to the observer once; batches are still computed
// whole and FIFO.
TEST(ModelInstanceTest, CompletionThreadsCompleteEveryRequestOnce) {
  for (int completion_threads : {1, 3}) {
    SCOPED_TRACE(completion_threads);
    FakeClock clock;  // never advanced: batches are cut by size or by Stop
    Gate gate;
    RecordingWorker::Log log;
    RecordingObserver observer;
    observer.expected_name_ = "ids";
    ModelInstance::Options options = Batching(64, 64, 60'000'000, /*max_queue=*/512);
    options.completion_threads = completion_threads;
    auto instance = MakeInstance(IdModel(), options,
                                 One(std::make_unique<GatedWorker>(
                                     std::make_unique<RecordingWorker>(&log, 1), &gate)),
                                 &observer, &clock);
    std::vector<std::unique_ptr<Call>> calls;
    calls.push_back(IdCall(0, 64));  // due at once; holds the worker
    ASSERT_TRUE(instance->Submit(calls[0]->Item()).ok());
    gate.AwaitEntered(1);
    for (int id = 1; id <= 300; ++id) {  // queue up: batches of 64 requests
      calls.push_back(IdCall(id, 1));
      ASSERT_TRUE(instance->Submit(calls.back()->Item()).ok());
    }
    gate.release.Notify();
    for (int i = 0; i <= 256; ++i) calls[i]->done.WaitForNotification();
    instance->Shutdown();  // the last 44 are cut by Stop and drained
    for (size_t i = 0; i < calls.size(); ++i) {
      Call& c = *calls[i];
      ASSERT_EQ(c.done_calls.load(), 1) << "request " << i;
      ASSERT_TRUE(c.status.ok()) << c.status;
      EXPECT_EQ(c.scores[0], static_cast<float>(i) * 0.5f + 1.0f);
      EXPECT_EQ(c.timing.batch_requests, i == 0 ? 1 : (i <= 256 ? 64 : 44));
    }
    std::vector<std::vector<int>> batches = log.Batches();
    ASSERT_EQ(batches.size(), 6u);
    int next = 0;
    for (const auto& b : batches) {
      for (int id : b) EXPECT_EQ(id, next++);  // FIFO across batches
    }
    absl::MutexLock lock(&observer.mu_);
    EXPECT_EQ(observer.requests.size(), calls.size());
  }
}

// Shutdown waits for done callbacks running on the completion threads: a
// callback held inside `done` still sees Shutdown unfinished when released.
TEST(ModelInstanceTest, ShutdownWaitsForCompletionThreads) {
  RecordingWorker::Log log;
  ModelInstance::Options options = Batching(1, 1, 0);
  options.completion_threads = 2;
  options.complete_inline_when_idle = false;  // every done on a completion thread
  auto instance = MakeInstance(IdModel(), options,
                               One(std::make_unique<RecordingWorker>(&log, 1)));
  absl::Notification in_done, release;
  std::atomic<bool> shutdown_returned{false};
  std::atomic<bool> returned_early{false};
  auto held = IdCall(0, 1);
  QueuedRequest item = held->Item();
  item.done = [&](absl::Status, const RequestTiming&) {
    in_done.Notify();
    release.WaitForNotification();
    if (shutdown_returned.load()) returned_early.store(true);
    held->done_calls.fetch_add(1);
  };
  ASSERT_TRUE(instance->Submit(std::move(item)).ok());
  std::vector<std::unique_ptr<Call>> others;
  for (int id = 1; id <= 20; ++id) {
    others.push_back(IdCall(id, 1));
    ASSERT_TRUE(instance->Submit(others.back()->Item()).ok());
  }
  in_done.WaitForNotification();
  std::thread shutdown([&] {
    instance->Shutdown();
    shutdown_returned.store(true);
  });
  release.Notify();
  shutdown.join();
  EXPECT_FALSE(returned_early.load());
  EXPECT_EQ(held->done_calls.load(), 1);
  for (auto& c : others) {
    EXPECT_EQ(c->done_calls.load(), 1);
    EXPECT_TRUE(c->status.ok()) << c->status;
  }
}

// A lone request on an idle instance completes on the worker thread (no
// hand-off at low load) unless complete_inline_when_idle is off.
TEST(ModelInstanceTest, IdleBatchCompletesOnTheWorkerThread) {
  for (bool inline_when_idle : {true, false}) {
    SCOPED_TRACE(inline_when_idle);
    RecordingWorker::Log log;
    ModelInstance::Options options = Batching(1, 1, 0);
    options.completion_threads = 2;
    options.complete_inline_when_idle = inline_when_idle;
    auto instance = MakeInstance(IdModel(), options,
                                 One(std::make_unique<RecordingWorker>(&log, 1)));
    for (int id = 0; id < 3; ++id) {
      auto call = IdCall(id, 1);
      std::string thread_name;
      QueuedRequest item = call->Item();
      item.done = [&](absl::Status status, const RequestTiming&) {
        char name[32] = {};
        pthread_getname_np(pthread_self(), name, sizeof(name));
        thread_name = name;
        call->status = status;
        call->done.Notify();
      };
      ASSERT_TRUE(instance->Submit(std::move(item)).ok());
      call->done.WaitForNotification();
      ASSERT_TRUE(call->status.ok()) << call->status;
      EXPECT_EQ(thread_name, inline_when_idle ? "rankd-worker" : "rankd-complete");
    }
    instance->Shutdown();
  }
}

// Worker threads the process cannot start (its task limit reached) fail
// Create with RESOURCE_EXHAUSTED naming the worker; the workers started are
// stopped and joined and the process goes on (before, std::thread's
// exception ended it).
TEST(ModelInstanceTest, WorkerThreadsThatCannotStartFailCreate) {
  if (kernels::testing::kUnderSanitizer)
    GTEST_SKIP() << "needs an unsanitized fork (thread_limit.h)";
  auto model = MakeRandomModel(RandomModelSpec{});
  EXPECT_EXIT(
      {
        kernels::testing::LimitAddressSpaceInThisChildOrExit(int64_t{32} << 20);
        // One compute thread each: no engine pool, so the workers' own
        // threads are the ones that cannot start.
        auto workers = CreateCpuWorkers(model, 16, 1, 8);
        if (!workers.ok()) std::_Exit(3);
        ModelInstance::Options options = Batching(100, 1, 10);
        options.completion_threads = 0;
        auto instance = ModelInstance::Create(model, options, std::move(workers).value());
        std::fprintf(stderr, "%s\n", instance.status().ToString().c_str());
        std::_Exit(absl::IsResourceExhausted(instance.status()) ? 0 : 1);
      },
      ::testing::ExitedWithCode(0),
      "RESOURCE_EXHAUSTED: cannot start the thread of worker cpu:[0-9]+: Resource temporarily "
      "unavailable");
}

TEST(ModelInstanceTest, CreateValidates) {
  auto model = IdModel();
  RecordingWorker::Log log;
  auto r = ModelInstance::Create(model, Batching(100, 1, 10), {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("workers"));

  std::vector<std::unique_ptr<Worker>> with_null;
  with_null.push_back(nullptr);
  r = ModelInstance::Create(model, Batching(100, 1, 10), std::move(with_null));
  EXPECT_THAT(r.status().message(), HasSubstr("workers[0]"));

  r = ModelInstance::Create(model, Batching(100, 200, 10),
                            One(std::make_unique<RecordingWorker>(&log, 1)));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("preferred_batch_candidates"));

  r = ModelInstance::Create(nullptr, Batching(100, 1, 10),
                            One(std::make_unique<RecordingWorker>(&log, 1)));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);

  ModelInstance::Options negative = Batching(100, 1, 10);
  negative.completion_threads = -1;
  r = ModelInstance::Create(model, negative, One(std::make_unique<RecordingWorker>(&log, 1)));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("completion_threads"));
}

TEST(ModelInstanceTest, OptionsFromConfig) {
  // The batcher's in-class defaults are the config's documented defaults.
  static_assert(DynamicBatcher::Options{}.max_batch_candidates ==
                kDefaultMaxBatchCandidates);
  static_assert(DynamicBatcher::Options{}.max_queue_delay_us ==
                kDefaultMaxQueueDelayUs);
  static_assert(DynamicBatcher::Options{}.max_queue_requests ==
                kDefaultMaxQueueRequests);
  static_assert(DynamicBatcher::Options{}.default_timeout_us ==
                kDefaultTimeoutUs);
  rankd::v1::ModelConfig config;
  ModelInstance::Options o = ModelInstance::OptionsFromConfig(config);
  EXPECT_EQ(o.batching.max_batch_candidates, kDefaultMaxBatchCandidates);
  EXPECT_EQ(o.batching.preferred_batch_candidates, 0);
  EXPECT_FALSE(o.validate_requests);

  rankd::v1::BatchingConfig* b = config.mutable_batching();
  b->set_max_batch_candidates(512);
  b->set_max_queue_delay_us(250);
  b->set_preferred_batch_candidates(128);
  b->set_max_queue_requests(64);
  b->set_default_timeout_us(1000);
  o = ModelInstance::OptionsFromConfig(config);
  EXPECT_EQ(o.batching.max_batch_candidates, 512);
  EXPECT_EQ(o.batching.max_queue_delay_us, 250);
  EXPECT_EQ(o.batching.preferred_batch_candidates, 128);
  EXPECT_EQ(o.batching.max_queue_requests, 64);
  EXPECT_EQ(o.batching.default_timeout_us, 1000);
}

TEST(ModelInstanceTest, ValidatesWhenAsked) {
  auto model = MakeRandomModel(RandomModelSpec{});
  RecordingWorker::Log log;
  RecordingObserver observer;
  observer.expected_name_ = model->name;
  ModelInstance::Options o = Batching(100, 1, 10);
  o.validate_requests = true;
  auto instance = MakeInstance(
      model, o, One(std::make_unique<RecordingWorker>(&log, 1)), &observer);
  Call call;
  RandomRequestSpec spec;
  call.owned = MakeRandomRequest(*model, spec);
  call.owned.dense.pop_back();
  absl::Status s = instance->Submit(call.Item());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("dense"));
  EXPECT_EQ(call.done_calls.load(), 0);
  instance->Shutdown();
  absl::MutexLock lock(&observer.mu_);
  ASSERT_EQ(observer.requests.size(), 1u);
  EXPECT_EQ(observer.requests[0].code, absl::StatusCode::kInvalidArgument);
}

// End to end on the CPU backend: scores through the instance equal
// CpuEngine::Score of each request alone (the CPU engine is deterministic per
// candidate, so equality is exact), with requests submitted from several
// threads, batches of several requests formed behind blocked workers, then
// concurrent traffic with the workers running.
TEST(ModelInstanceTest, CpuWorkersMatchCpuEngineUnderConcurrentSubmits) {
  RandomModelSpec spec;
  spec.table_rows = {7, 11, 13};
  spec.dynamic_tables = {1};
  spec.id_policy = rankd::v1::ZERO;
  spec.request_level_features = {2};
  std::shared_ptr<const Model> model = MakeRandomModel(spec);
  CpuEngine::Options engine_options;
  engine_options.num_threads = 1;
  auto reference = CpuEngine::Create(model, engine_options);
  ASSERT_TRUE(reference.ok()) << reference.status();

  Gate gate;
  RecordingObserver observer;
  observer.expected_name_ = model->name;
  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i < 2; ++i) {
    auto cpu =
        CpuWorker::Create(model, engine_options, "cpu:" + std::to_string(i));
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    workers.push_back(
        std::make_unique<GatedWorker>(std::move(cpu).value(), &gate));
  }
  // Real clock: timing decides batch shapes in phase 3, never correctness.
  auto instance = MakeInstance(model, Batching(256, 64, 200),
                               std::move(workers), &observer);

  constexpr int kThreads = 4;
  constexpr int kPerThread = 30;
  std::vector<std::unique_ptr<Call>> calls(kThreads * kPerThread * 2 + 2);
  auto make_call = [&](int index) {
    auto call = std::make_unique<Call>();
    RandomRequestSpec rs;
    rs.num_candidates = 1 + index % 17;
    rs.unresolved_fraction = 0.2;
    rs.weighted = index % 3 == 0;
    rs.seed = 1000 + index;
    call->owned = MakeRandomRequest(*model, rs);
    calls[index] = std::move(call);
  };
  auto submit_range = [&](int begin, int end) {
    for (int i = begin; i < end; ++i) {
      absl::Status s = instance->Submit(calls[i]->Item());
      EXPECT_TRUE(s.ok()) << s;
    }
  };
  for (size_t i = 0; i < calls.size(); ++i) make_call(static_cast<int>(i));

  // Phase 1: occupy both workers with one request each.
  submit_range(0, 1);
  gate.AwaitEntered(1);
  submit_range(1, 2);
  gate.AwaitEntered(2);
  // Phase 2: concurrent submits pile up behind the blocked workers.
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    const int begin = 2 + t * kPerThread;
    threads.emplace_back(submit_range, begin, begin + kPerThread);
  }
  for (std::thread& t : threads) t.join();
  threads.clear();
  EXPECT_EQ(instance->queued_requests(), kThreads * kPerThread);
  gate.release.Notify();
  // Phase 3: more concurrent submits while the workers run.
  for (int t = 0; t < kThreads; ++t) {
    const int begin = 2 + (kThreads + t) * kPerThread;
    threads.emplace_back(submit_range, begin, begin + kPerThread);
  }
  for (std::thread& t : threads) t.join();
  for (auto& c : calls) c->done.WaitForNotification();
  instance->Shutdown();

  std::vector<int64_t> expected_unresolved(model->tables.size(), 0);
  for (size_t i = 0; i < calls.size(); ++i) {
    Call& c = *calls[i];
    ASSERT_TRUE(c.status.ok()) << "request " << i << ": " << c.status;
    EXPECT_EQ(c.done_calls.load(), 1);
    auto want = (*reference)->Score(c.request);
    ASSERT_TRUE(want.ok()) << want.status();
    EXPECT_EQ(c.scores, *want) << "request " << i;
    BatchStats stats;
    const Request* one[] = {&c.request};
    std::vector<float> out(c.request.num_candidates);
    absl::Span<float> outs[] = {absl::MakeSpan(out)};
    ASSERT_TRUE((*reference)->ScoreBatch(one, outs, &stats).ok());
    for (size_t t = 0; t < expected_unresolved.size(); ++t) {
      expected_unresolved[t] += stats.unresolved_ids_per_table[t];
    }
  }

  absl::MutexLock lock(&observer.mu_);
  EXPECT_EQ(observer.requests.size(), calls.size());
  int max_requests = 0;
  int64_t candidates = 0;
  for (const BatchEvent& b : observer.batches) {
    max_requests = std::max(max_requests, b.requests);
    candidates += b.candidates;
    EXPECT_EQ(b.code, absl::StatusCode::kOk);
    EXPECT_LE(b.candidates, 256);
  }
  EXPECT_GT(max_requests, 1);  // phase 2 guarantees multi-request batches
  int64_t submitted = 0;
  for (auto& c : calls) submitted += c->owned.num_candidates;
  EXPECT_EQ(candidates, submitted);
  // Unresolved ids reach the observer per table, flagged dynamic or not.
  std::vector<int64_t> observed(model->tables.size(), 0);
  for (const auto& u : observer.unresolved) {
    for (size_t t = 0; t < model->tables.size(); ++t) {
      if (model->tables[t].name == u.table) {
        observed[t] += u.count;
        EXPECT_EQ(u.dynamic, model->tables[t].dynamic) << u.table;
      }
    }
  }
  EXPECT_EQ(observed, expected_unresolved);
  EXPECT_GT(expected_unresolved[1], 0);  // the dynamic table saw misses
}

TEST(CpuWorkersTest, ResolvesAutomaticCounts) {
  auto model = MakeRandomModel(RandomModelSpec{});
  auto workers = CreateCpuWorkers(model, 0, 0, /*num_cores=*/8);
  ASSERT_TRUE(workers.ok()) << workers.status();
  ASSERT_EQ(workers->size(), 2u);
  EXPECT_EQ((*workers)[1]->name(), "cpu:1");
  EXPECT_EQ(
      static_cast<CpuWorker*>((*workers)[0].get())->engine().num_threads(), 4);
  workers = CreateCpuWorkers(model, 3, 1, 8);
  ASSERT_TRUE(workers.ok());
  EXPECT_EQ(workers->size(), 3u);
  EXPECT_EQ(CreateCpuWorkers(model, -1, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Thread counts past the limits are refused before any thread starts (a
// count the process cannot start would abort it in std::thread), counted
// once automatic zeros are resolved.
TEST(CpuWorkersTest, RefusesThreadCountsPastTheLimits) {
  auto model = MakeRandomModel(RandomModelSpec{});
  EXPECT_THAT(CreateCpuWorkers(model, 1025, 1, 8).status().message(),
              HasSubstr("workers_per_device must be in [0, 1024] (0 = automatic), got 1025"));
  EXPECT_THAT(CreateCpuWorkers(model, 1, 100000, 8).status().message(),
              HasSubstr("cpu_threads_per_worker must be in [0, 1024] (0 = automatic), got 100000"));
  // 0 threads per worker resolves to cores / workers: 1000 on 8000 cores.
  absl::Status resolved = CreateCpuWorkers(model, 8, 0, /*num_cores=*/8000).status();
  EXPECT_EQ(resolved.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(resolved.message(),
              HasSubstr("workers_per_device (8) x cpu_threads_per_worker (1000), as resolved, "
                        "must be at most 4096 threads"));
}

}  // namespace
}  // namespace rankd::engine
