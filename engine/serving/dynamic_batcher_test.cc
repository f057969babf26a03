#include "engine/serving/dynamic_batcher.h"

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/serving/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rankd::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Requests for batcher tests: only num_candidates, scores and the callback
// matter to the batcher. Each request's dense holds unique values
// (id * 1000 + candidate) so a fake "execution" can check it computes the
// right inputs into the right outputs.
struct TestRequest {
  int id = 0;
  std::vector<float> dense;
  std::vector<float> scores;
  std::optional<absl::Status> status;  // set when done runs
  int done_calls = 0;
  RequestTiming timing;
  std::atomic<bool> cancelled{false};
};

class BatcherTest : public ::testing::Test {
 protected:
  std::unique_ptr<DynamicBatcher> MakeBatcher(
      const DynamicBatcher::Options& o) {
    auto batcher = DynamicBatcher::Create(
        o, &clock_, [this](int64_t requests, int64_t candidates) {
          depth_reports_.push_back({requests, candidates});
        });
    EXPECT_TRUE(batcher.ok()) << batcher.status();
    return std::move(batcher).value();
  }

  TestRequest* NewRequest(int candidates) {
    auto r = std::make_unique<TestRequest>();
    r->id = static_cast<int>(requests_.size());
    for (int i = 0; i < candidates; ++i) r->dense.push_back(r->id * 1000 + i);
    r->scores.assign(candidates, -1.0f);
    requests_.push_back(std::move(r));
    return requests_.back().get();
  }

  QueuedRequest Item(TestRequest* r,
                     absl::Time deadline = absl::InfiniteFuture()) {
    QueuedRequest q;
    q.request.num_candidates = static_cast<int32_t>(r->scores.size());
    q.request.dense = r->dense;
    q.scores = absl::MakeSpan(r->scores);
    q.deadline = deadline;
    q.cancelled = [r] { return r->cancelled.load(); };
    q.done = [r](absl::Status s, const RequestTiming& t) {
      r->status = std::move(s);
      r->timing = t;
      ++r->done_calls;
    };
    return q;
  }

  // Enqueues a new request of `candidates`; expects OK.
  TestRequest* Add(DynamicBatcher& b, int candidates,
                   absl::Time deadline = absl::InfiniteFuture()) {
    TestRequest* r = NewRequest(candidates);
    EXPECT_TRUE(b.Enqueue(Item(r, deadline)).ok());
    return r;
  }

  // What a worker does: scores = f(dense) through one contiguous batch
  // buffer (gather, compute, scatter), then completes every request.
  static void Execute(Batch& batch) {
    std::vector<float> packed;
    for (const QueuedRequest& q : batch.requests) {
      packed.insert(packed.end(), q.request.dense.begin(),
                    q.request.dense.end());
    }
    ASSERT_EQ(static_cast<int64_t>(packed.size()), batch.num_candidates);
    for (float& v : packed) v = v * 0.5f + 1.0f;
    size_t offset = 0;
    for (QueuedRequest& q : batch.requests) {
      for (float& s : q.scores) s = packed[offset++];
      std::move(q.done)(absl::OkStatus(), RequestTiming{});
    }
  }

  static std::vector<int> Ids(const Batch& batch) {
    std::vector<int> ids;
    for (const QueuedRequest& q : batch.requests) {
      ids.push_back(static_cast<int>(q.request.dense[0]) / 1000);
    }
    return ids;
  }

  absl::Time t0_ = absl::FromUnixSeconds(1'700'000'000);
  FakeClock clock_{t0_};
  std::vector<std::unique_ptr<TestRequest>> requests_;
  std::vector<std::pair<int64_t, int64_t>> depth_reports_;
};

DynamicBatcher::Options Opts(int max, int preferred, int64_t delay_us) {
  DynamicBatcher::Options o;
  o.max_batch_candidates = max;
  o.preferred_batch_candidates = preferred;
  o.max_queue_delay_us = delay_us;
  return o;
}

TEST_F(BatcherTest, DefaultsAreDocumentedValues) {
  DynamicBatcher::Options o;
  EXPECT_EQ(o.max_batch_candidates, 4096);
  EXPECT_EQ(o.max_queue_delay_us, 0);
  EXPECT_EQ(o.preferred_batch_candidates, 0);
  EXPECT_EQ(o.max_queue_requests, 1024);
  EXPECT_EQ(o.default_timeout_us, 10'000'000);
  EXPECT_EQ(o.idle_spin_us, 0);
  EXPECT_TRUE(o.admit_by_deadline);
  EXPECT_TRUE(DynamicBatcher::ValidateOptions(o).ok());
}

TEST_F(BatcherTest, CutsOnSize) {
  auto b = MakeBatcher(Opts(16, 10, 1000));
  Add(*b, 4);
  Add(*b, 4);
  auto cut = b->TryCutBatch(clock_.Now());
  EXPECT_FALSE(cut.batch.has_value());
  EXPECT_EQ(cut.wake_time, t0_ + absl::Microseconds(1000));
  Add(*b, 4);  // 12 >= preferred 10
  cut = b->TryCutBatch(clock_.Now());
  ASSERT_TRUE(cut.batch.has_value());
  EXPECT_THAT(Ids(*cut.batch), ElementsAre(0, 1, 2));
  EXPECT_EQ(cut.batch->num_candidates, 12);
  EXPECT_EQ(cut.batch->cut_time, t0_);
  EXPECT_EQ(b->queued_requests(), 0);
  EXPECT_EQ(b->queued_candidates(), 0);
}

TEST_F(BatcherTest, CutsOnDelay) {
  auto b = MakeBatcher(Opts(16, 10, 1000));
  Add(*b, 3);
  clock_.Advance(absl::Microseconds(400));
  Add(*b, 2);
  // The oldest request sets the wake-up, not the newest.
  auto cut = b->TryCutBatch(clock_.Now());
  EXPECT_FALSE(cut.batch.has_value());
  EXPECT_EQ(cut.wake_time, t0_ + absl::Microseconds(1000));
  cut = b->TryCutBatch(t0_ + absl::Microseconds(999));
  EXPECT_FALSE(cut.batch.has_value());
  cut = b->TryCutBatch(t0_ + absl::Microseconds(1000));
  ASSERT_TRUE(cut.batch.has_value());
  EXPECT_THAT(Ids(*cut.batch), ElementsAre(0, 1));
  EXPECT_EQ(cut.batch->num_candidates, 5);
}

TEST_F(BatcherTest, ZeroDelayCutsAtOnce) {
  auto b = MakeBatcher(Opts(16, 10, 0));
  Add(*b, 1);
  auto cut = b->TryCutBatch(clock_.Now());
  ASSERT_TRUE(cut.batch.has_value());
  EXPECT_EQ(cut.batch->num_candidates, 1);
}

TEST_F(BatcherTest, PreferredTriggersButMaxBounds) {
  auto b = MakeBatcher(Opts(20, 8, 1000));
  for (int i = 0; i < 4; ++i) Add(*b, 6);  // 24 queued
  auto cut = b->TryCutBatch(clock_.Now());
  ASSERT_TRUE(cut.batch.has_value());
  // Takes past preferred (8) up to max (20): 6 + 6 + 6 = 18; a fourth would
  // make 24.
  EXPECT_THAT(Ids(*cut.batch), ElementsAre(0, 1, 2));
  EXPECT_EQ(cut.batch->num_candidates, 18);
  // 6 left, under preferred: waits for the delay.
  cut = b->TryCutBatch(clock_.Now());
  EXPECT_FALSE(cut.batch.has_value());
  clock_.Advance(absl::Microseconds(1000));
  cut = b->TryCutBatch(clock_.Now());
  ASSERT_TRUE(cut.batch.has_value());
  EXPECT_THAT(Ids(*cut.batch), ElementsAre(3));
}

TEST_F(BatcherTest, PreferredZeroMeansMax) {
  auto b = MakeBatcher(Opts(10, 0, 1000));
  Add(*b, 9);
  EXPECT_FALSE(b->TryCutBatch(clock_.Now()).batch.has_value());
  Add(*b, 1);
  auto cut = b->TryCutBatch(clock_.Now());
  ASSERT_TRUE(cut.batch.has_value());
  EXPECT_EQ(cut.batch->num_candidates, 10);
}

TEST_F(BatcherTest, OversizeRequestGoesAlone) {
  auto b = MakeBatcher(Opts(10, 10, 1000));
  Add(*b, 3);
  Add(*b, 25);
  Add(*b, 4);
  auto cut = b->TryCutBatch(clock_.Now());
  ASSERT_TRUE(cut.batch.has_value());
  EXPECT_THAT(Ids(*cut.batch), ElementsAre(0));  // 3 + 25 > 10
  cut = b->TryCutBatch(clock_.Now());
  ASSERT_TRUE(cut.batch.has_value());
  EXPECT_THAT(Ids(*cut.batch), ElementsAre(1));
  EXPECT_EQ(cut.batch->num_candidates, 25);
  cut = b->TryCutBatch(clock_.Now());  // 4 < preferred
  EXPECT_FALSE(cut.batch.has_value());
  cut = b->TryCutBatch(clock_.Now() + absl::Microseconds(1000));
  ASSERT_TRUE(cut.batch.has_value());
  EXPECT_THAT(Ids(*cut.batch), ElementsAre(2));
}

TEST_F(BatcherTest, DeadlineExpiresWithoutCompute) {
  auto b = MakeBatcher(Opts(100, 100, 1000));
  TestRequest* a = Add(*b, 2);
  TestRequest* late = Add(*b, 3, t0_ + absl::Microseconds(200));
  TestRequest* c = Add(*b, 4);
  // The short deadline is the earliest wake-up.
  auto cut = b->TryCutBatch(clock_.Now());
  EXPECT_FALSE(cut.batch.has_value());
  EXPECT_EQ(cut.wake_time, t0_ + absl::Microseconds(200));
  clock_.Advance(absl::Microseconds(200));
  cut = b->TryCutBatch(clock_.Now());
  EXPECT_FALSE(cut.batch.has_value());
  ASSERT_TRUE(late->status.has_value());
  EXPECT_EQ(late->status->code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(late->done_calls, 1);
  EXPECT_EQ(late->timing.queue, absl::Microseconds(200));
  EXPECT_EQ(late->timing.compute, absl::ZeroDuration());
  EXPECT_EQ(late->timing.batch_requests, 0);
  EXPECT_EQ(b->queued_requests(), 2);
  EXPECT_EQ(b->queued_candidates(), 6);
  clock_.Advance(absl::Microseconds(800));
  cut = b->TryCutBatch(clock_.Now());
  ASSERT_TRUE(cut.batch.has_value());
  EXPECT_THAT(Ids(*cut.batch), ElementsAre(a->id, c->id));
  Execute(*cut.batch);
  EXPECT_EQ(late->done_calls, 1);
  EXPECT_THAT(late->scores, ElementsAre(-1, -1, -1));  // never computed
}

TEST_F(BatcherTest, DefaultTimeoutAppliesWithoutDeadline) {
  DynamicBatcher::Options o = Opts(100, 100, 60'000'000);
  o.default_timeout_us = 1'000'000;
  auto b = MakeBatcher(o);
  TestRequest* r = Add(*b, 1);
  auto cut = b->TryCutBatch(clock_.Now());
  EXPECT_EQ(cut.wake_time, t0_ + absl::Seconds(1));
  cut = b->TryCutBatch(t0_ + absl::Seconds(1) - absl::Microseconds(1));
  EXPECT_FALSE(r->status.has_value());
  cut = b->TryCutBatch(t0_ + absl::Seconds(1));
  EXPECT_FALSE(cut.batch.has_value());
  ASSERT_TRUE(r->status.has_value());
  EXPECT_EQ(r->status->code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_F(BatcherTest, PastDeadlineRejectedAtEnqueue) {
  auto b = MakeBatcher(Opts(100, 100, 1000));
  TestRequest* r = NewRequest(1);
  absl::Status s = b->Enqueue(Item(r, t0_));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(r->done_calls, 0);
  EXPECT_EQ(b->queued_requests(), 0);
}

TEST_F(BatcherTest, CancelledRequestIsNotComputed) {
  auto b = MakeBatcher(Opts(100, 5, 1000));
  TestRequest* a = Add(*b, 2);
  TestRequest* gone = Add(*b, 2);
  gone->cancelled = true;
  TestRequest* c = Add(*b, 2);  // 6 queued, but only 4 once `gone` is out
  auto cut = b->TryCutBatch(clock_.Now());
  EXPECT_FALSE(cut.batch.has_value());
  ASSERT_TRUE(gone->status.has_value());
  EXPECT_EQ(gone->status->code(), absl::StatusCode::kCancelled);
  Add(*b, 1);
  cut = b->TryCutBatch(clock_.Now());
  ASSERT_TRUE(cut.batch.has_value());
  EXPECT_THAT(Ids(*cut.batch), ElementsAre(a->id, c->id, 3));
  Execute(*cut.batch);
  EXPECT_EQ(gone->done_calls, 1);
  EXPECT_THAT(gone->scores, ElementsAre(-1, -1));
}

TEST_F(BatcherTest, QueueFullAnswersAtOnce) {
  DynamicBatcher::Options o = Opts(100, 100, 1000);
  o.max_queue_requests = 2;
  auto b = MakeBatcher(o);
  Add(*b, 1);
  Add(*b, 1);
  TestRequest* r = NewRequest(1);
  absl::Status s = b->Enqueue(Item(r));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("max_queue_requests"));
  EXPECT_EQ(r->done_calls, 0);  // the caller answers; done never runs
  EXPECT_EQ(b->queued_requests(), 2);
  // Room again once a batch is cut.
  ASSERT_TRUE(b->TryCutBatch(clock_.Now() + absl::Milliseconds(1)).batch);
  EXPECT_TRUE(b->Enqueue(Item(NewRequest(1))).ok());
}

TEST_F(BatcherTest, DeadlineAdmissionMeasuresTheDrainRateOnlyWhenBacklogged) {
  auto b = MakeBatcher(Opts(10, 10, 0));
  // Cuts of an empty-after-cut queue (a worker waiting for work) say nothing
  // about how fast the queue drains.
  for (int i = 0; i < 20; ++i) {
    Add(*b, 10);
    clock_.Advance(absl::Milliseconds(5));
    ASSERT_TRUE(b->TryCutBatch(clock_.Now()).batch);
  }
  EXPECT_EQ(b->drain_rate(), 0);
  // Backlogged: 30 requests queued, one batch of 10 candidates every 5 ms.
  for (int i = 0; i < 30; ++i) Add(*b, 10);
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE(b->TryCutBatch(clock_.Now()).batch);
    clock_.Advance(absl::Milliseconds(5));
  }
  EXPECT_NEAR(b->drain_rate(), 2000, 1);
}

TEST_F(BatcherTest, DeadlineAdmissionRefusesWhatWouldExpireInTheQueue) {
  auto b = MakeBatcher(Opts(10, 10, 0));
  for (int i = 0; i < 30; ++i) Add(*b, 10);
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE(b->TryCutBatch(clock_.Now()).batch);
    clock_.Advance(absl::Milliseconds(5));
  }
  ASSERT_NEAR(b->drain_rate(), 2000, 1);
  ASSERT_EQ(b->queued_candidates(), 180);
  // 180 candidates ahead + 10 of its own at 2000/s: 95 ms in the queue,
  // which must be at most half the time left.
  TestRequest* late = NewRequest(10);
  const absl::Status s = b->Enqueue(Item(late, clock_.Now() + absl::Milliseconds(189)));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), HasSubstr("95ms in the queue"));
  EXPECT_THAT(s.message(), HasSubstr("180 candidates ahead"));
  EXPECT_THAT(s.message(), HasSubstr("more than half of the 189ms left before its deadline"));
  EXPECT_EQ(late->done_calls, 0);  // the caller answers; done never runs
  EXPECT_EQ(b->queued_requests(), 18);
  // With time enough it is admitted.
  EXPECT_TRUE(b->Enqueue(Item(NewRequest(10), clock_.Now() + absl::Milliseconds(190))).ok());
  // An empty queue admits whatever the rate: the request goes next.
  while (b->queued_requests() > 0) ASSERT_TRUE(b->TryCutBatch(clock_.Now()).batch);
  EXPECT_TRUE(b->Enqueue(Item(NewRequest(10), clock_.Now() + absl::Microseconds(1))).ok());
}

TEST_F(BatcherTest, DeadlineAdmissionCanBeTurnedOff) {
  DynamicBatcher::Options o = Opts(10, 10, 0);
  o.admit_by_deadline = false;
  auto b = MakeBatcher(o);
  for (int i = 0; i < 30; ++i) Add(*b, 10);
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE(b->TryCutBatch(clock_.Now()).batch);
    clock_.Advance(absl::Milliseconds(5));
  }
  // Queued, to expire there.
  TestRequest* r = Add(*b, 10, clock_.Now() + absl::Milliseconds(1));
  clock_.Advance(absl::Milliseconds(2));
  b->TryCutBatch(clock_.Now());
  ASSERT_TRUE(r->status.has_value());
  EXPECT_EQ(r->status->code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_F(BatcherTest, RejectsMalformedItems) {
  auto b = MakeBatcher(Opts(100, 100, 1000));
  TestRequest* r = NewRequest(2);
  QueuedRequest q = Item(r);
  q.scores = q.scores.subspan(0, 1);
  EXPECT_EQ(b->Enqueue(std::move(q)).code(),
            absl::StatusCode::kInvalidArgument);
  q = Item(r);
  q.done = nullptr;
  EXPECT_EQ(b->Enqueue(std::move(q)).code(),
            absl::StatusCode::kInvalidArgument);
  q = Item(r);
  q.request.num_candidates = 0;
  q.scores = {};
  EXPECT_EQ(b->Enqueue(std::move(q)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r->done_calls, 0);
}

TEST_F(BatcherTest, StopDrainsEverythingThenEnds) {
  auto b = MakeBatcher(Opts(10, 10, 60'000'000));
  for (int i = 0; i < 7; ++i) Add(*b, 3);  // 21 candidates
  b->Stop();
  EXPECT_TRUE(b->stopped());
  TestRequest* after = NewRequest(1);
  EXPECT_EQ(b->Enqueue(Item(after)).code(),
            absl::StatusCode::kFailedPrecondition);
  // The clock never moves: Stop makes everything due, so NextBatch never
  // waits, and ends once the queue is empty.
  std::vector<std::vector<int>> batches;
  while (std::optional<Batch> batch = b->NextBatch()) {
    EXPECT_LE(batch->num_candidates, 10);
    batches.push_back(Ids(*batch));
    Execute(*batch);
  }
  EXPECT_THAT(batches, ElementsAre(ElementsAre(0, 1, 2), ElementsAre(3, 4, 5),
                                   ElementsAre(6)));
  for (int i = 0; i < 7; ++i) {
    ASSERT_TRUE(requests_[i]->status.has_value());
    EXPECT_TRUE(requests_[i]->status->ok());
  }
  EXPECT_EQ(after->done_calls, 0);
  EXPECT_FALSE(b->NextBatch().has_value());
}

TEST_F(BatcherTest, NextBatchReturnsDueBatchWithoutWaiting) {
  auto b = MakeBatcher(Opts(10, 4, 60'000'000));
  Add(*b, 2);
  Add(*b, 2);
  std::optional<Batch> batch = b->NextBatch();
  ASSERT_TRUE(batch.has_value());
  EXPECT_THAT(Ids(*batch), ElementsAre(0, 1));
}

TEST_F(BatcherTest, NextBatchCompletesExpiredAndEndsAfterStop) {
  auto b = MakeBatcher(Opts(10, 10, 60'000'000));
  TestRequest* r = Add(*b, 1, t0_ + absl::Seconds(1));
  clock_.Advance(absl::Seconds(2));
  b->Stop();
  EXPECT_FALSE(b->NextBatch().has_value());
  ASSERT_TRUE(r->status.has_value());
  EXPECT_EQ(r->status->code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_F(BatcherTest, DestructorCompletesLeftovers) {
  TestRequest* r;
  {
    auto b = MakeBatcher(Opts(10, 10, 1000));
    r = Add(*b, 1);
  }
  ASSERT_TRUE(r->status.has_value());
  EXPECT_EQ(r->status->code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(r->done_calls, 1);
}

TEST_F(BatcherTest, ReportsQueueDepth) {
  auto b = MakeBatcher(Opts(10, 5, 1000));
  Add(*b, 2);
  Add(*b, 1);
  TestRequest* gone = Add(*b, 1);
  gone->cancelled = true;
  b->TryCutBatch(clock_.Now());  // drops `gone`; 3 < 5, no batch
  Add(*b, 3);
  b->TryCutBatch(clock_.Now());  // cuts all
  EXPECT_THAT(depth_reports_, ElementsAre(std::pair<int64_t, int64_t>{1, 2},
                                          std::pair<int64_t, int64_t>{2, 3},
                                          std::pair<int64_t, int64_t>{3, 4},
                                          std::pair<int64_t, int64_t>{2, 3},
                                          std::pair<int64_t, int64_t>{3, 6},
                                          std::pair<int64_t, int64_t>{0, 0}));
}

TEST_F(BatcherTest, TimingCarriesEnqueueTime) {
  auto b = MakeBatcher(Opts(10, 10, 1000));
  clock_.Advance(absl::Microseconds(5));
  TestRequest* r = Add(*b, 1, t0_ + absl::Microseconds(50));
  b->TryCutBatch(t0_ + absl::Microseconds(60));
  EXPECT_EQ(r->timing.enqueue_time, t0_ + absl::Microseconds(5));
  EXPECT_EQ(r->timing.total, absl::Microseconds(55));
}

// Property: across many random requests, random options, random clock steps
// and random deadlines / cancellations, every candidate of every request is
// scored exactly once with its own reference value (or the request fails as
// expired / cancelled and is never computed), batches are FIFO, whole and
// within max unless a single oversize request, and every done runs once.
TEST_F(BatcherTest, PropertyNoSplitDropDuplicateOrReorder) {
  std::mt19937_64 rng(12345);
  for (int round = 0; round < 20; ++round) {
    requests_.clear();
    const int max = 1 + static_cast<int>(rng() % 64);
    const int preferred = static_cast<int>(rng() % (max + 1));
    const int64_t delay_us = static_cast<int64_t>(rng() % 300);
    DynamicBatcher::Options o = Opts(max, preferred, delay_us);
    o.max_queue_requests = 32;
    auto b = MakeBatcher(o);
    std::map<int, int> computed;  // request id -> times it was in a batch
    int last_id = -1;
    int rejected = 0;
    auto check_batch = [&](Batch& batch) {
      ASSERT_FALSE(batch.requests.empty());
      int64_t sum = 0;
      for (const QueuedRequest& q : batch.requests) {
        sum += q.request.num_candidates;
        const int id = static_cast<int>(q.request.dense[0]) / 1000;
        EXPECT_GT(id, last_id) << "FIFO order broken";
        last_id = id;
        ++computed[id];
      }
      EXPECT_EQ(sum, batch.num_candidates);
      if (batch.requests.size() > 1) {
        EXPECT_LE(batch.num_candidates, max);
      }
      Execute(batch);
    };
    for (int step = 0; step < 400; ++step) {
      const int action = static_cast<int>(rng() % 10);
      if (action < 5) {
        const int n = 1 + static_cast<int>(rng() % (max + max / 2 + 1));
        TestRequest* r = NewRequest(n);
        absl::Time deadline = absl::InfiniteFuture();
        if (rng() % 5 == 0) {
          deadline = clock_.Now() + absl::Microseconds(1 + rng() % 500);
        }
        if (rng() % 10 == 0) r->cancelled = true;
        absl::Status s = b->Enqueue(Item(r, deadline));
        if (!s.ok()) {
          EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
          r->status = s;  // answered by the caller
          ++rejected;
        }
      } else if (action < 8) {
        auto cut = b->TryCutBatch(clock_.Now());
        if (cut.batch.has_value()) check_batch(*cut.batch);
      } else {
        clock_.Advance(absl::Microseconds(rng() % 200));
      }
    }
    b->Stop();
    while (std::optional<Batch> batch = b->NextBatch()) check_batch(*batch);
    EXPECT_EQ(b->queued_requests(), 0);

    for (const auto& r : requests_) {
      ASSERT_TRUE(r->status.has_value()) << "request " << r->id << " lost";
      const bool rejected_at_enqueue =
          r->done_calls == 0 &&
          r->status->code() == absl::StatusCode::kResourceExhausted;
      if (rejected_at_enqueue) {
        EXPECT_EQ(computed.count(r->id), 0u);
        continue;
      }
      EXPECT_EQ(r->done_calls, 1) << "request " << r->id;
      if (r->status->ok()) {
        EXPECT_EQ(computed[r->id], 1) << "request " << r->id;
        for (size_t i = 0; i < r->scores.size(); ++i) {
          EXPECT_EQ(r->scores[i], r->dense[i] * 0.5f + 1.0f)
              << "request " << r->id << " candidate " << i;
        }
      } else {
        EXPECT_TRUE(r->status->code() == absl::StatusCode::kDeadlineExceeded ||
                    r->status->code() == absl::StatusCode::kCancelled)
            << r->status.value();
        EXPECT_EQ(computed.count(r->id), 0u);
        for (float s : r->scores) EXPECT_EQ(s, -1.0f);
      }
    }
  }
}

struct BadOption {
  const char* field;
  void (*mutate)(DynamicBatcher::Options*);
};

// A worker spinning on an empty queue (idle_spin_us) takes a request that
// arrives during the spin, one that arrives after it has gone to sleep, and
// ends when stopped while spinning.
TEST_F(BatcherTest, IdleSpinTakesRequestsAndStops) {
  for (int64_t spin_us : {10000, 200}) {
    SCOPED_TRACE(spin_us);
    DynamicBatcher::Options o = Opts(10, 10, 0);
    o.idle_spin_us = spin_us;
    auto b = MakeBatcher(o);
    for (int round = 0; round < 3; ++round) {
      std::optional<Batch> got;
      std::thread worker([&] { got = b->NextBatch(); });
      // Lands during a 10 ms spin, or after a 200 us one (the worker sleeps).
      absl::SleepFor(absl::Milliseconds(2));
      Add(*b, 1);
      worker.join();
      ASSERT_TRUE(got.has_value());
      EXPECT_EQ(got->requests.size(), 1u);
      Execute(*got);
    }
  }
  DynamicBatcher::Options o = Opts(10, 10, 0);
  o.idle_spin_us = 10000;
  auto b = MakeBatcher(o);
  std::optional<Batch> got = Batch{};
  std::thread worker([&] { got = b->NextBatch(); });
  absl::SleepFor(absl::Milliseconds(1));
  b->Stop();
  worker.join();
  EXPECT_FALSE(got.has_value());
}

// Idle workers of one batcher spin one at a time: with three workers on an
// empty queue and a long spin, never more than one spins, one does, and a
// request is still taken by some worker (the spinner, unsignalled) while the
// others sleep; each later request wakes a worker too.
TEST_F(BatcherTest, OneIdleWorkerSpinsAtATime) {
  DynamicBatcher::Options o = Opts(10, 10, 0);
  o.idle_spin_us = 10000;
  auto b = MakeBatcher(o);
  std::atomic<int> batches{0};
  std::vector<std::thread> workers;
  for (int i = 0; i < 3; ++i) {
    workers.emplace_back([&] {
      while (auto got = b->NextBatch()) {
        Execute(*got);
        batches.fetch_add(1);
      }
    });
  }
  int most = 0;
  for (int i = 0; i < 200; ++i) {
    most = std::max(most, b->spinning_workers());
    absl::SleepFor(absl::Microseconds(20));
  }
  EXPECT_LE(most, 1) << "idle workers spinning at once";
  for (int r = 1; r <= 4; ++r) {
    Add(*b, 1);
    absl::Time until = absl::Now() + absl::Seconds(10);
    while (batches.load() < r && absl::Now() < until) absl::SleepFor(absl::Microseconds(50));
    ASSERT_EQ(batches.load(), r) << "request " << r << " was not taken";
    // The worker that took it spins next (the others still sleep).
    bool spun = false;
    until = absl::Now() + absl::Seconds(10);
    while (!spun && absl::Now() < until) {
      const int n = b->spinning_workers();
      EXPECT_LE(n, 1) << "idle workers spinning at once";
      spun = n == 1;
    }
    EXPECT_TRUE(spun) << "no idle worker spun after request " << r;
    // After a spell longer than the spin, every idle worker sleeps.
    if (r == 2) absl::SleepFor(absl::Milliseconds(25));
  }
  b->Stop();
  for (auto& w : workers) w.join();
  EXPECT_EQ(b->spinning_workers(), 0);
}

TEST_F(BatcherTest, OptionsValidationNamesTheField) {
  const BadOption cases[] = {
      {"max_batch_candidates", [](auto* o) { o->max_batch_candidates = 0; }},
      {"max_queue_delay_us", [](auto* o) { o->max_queue_delay_us = -1; }},
      {"preferred_batch_candidates",
       [](auto* o) { o->preferred_batch_candidates = -1; }},
      {"preferred_batch_candidates",
       [](auto* o) { o->preferred_batch_candidates = 5000; }},
      {"max_queue_requests", [](auto* o) { o->max_queue_requests = 0; }},
      {"default_timeout_us", [](auto* o) { o->default_timeout_us = 0; }},
      {"idle_spin_us", [](auto* o) { o->idle_spin_us = -1; }},
      {"idle_spin_us", [](auto* o) { o->idle_spin_us = 10001; }},
  };
  for (const BadOption& c : cases) {
    DynamicBatcher::Options o;
    c.mutate(&o);
    auto b = DynamicBatcher::Create(o, &clock_);
    ASSERT_FALSE(b.ok()) << c.field;
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(b.status().message(), HasSubstr(c.field));
  }
}

}  // namespace
}  // namespace rankd::engine
