#include "server/request_budget.h"

#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace rankd::server {
namespace {

// The hold, or nullopt when refused (any reason).
std::optional<RequestBudget::Hold> Take(RequestBudget& budget, int64_t bytes) {
  auto hold = budget.TryAcquire(bytes);
  if (!hold.ok()) return std::nullopt;
  return std::move(*hold);
}

TEST(RequestBudget, AdmitsUpToTheCapAndRefusesBeyond) {
  RequestBudget budget({/*max_bytes=*/100});
  auto a = Take(budget, 60);
  ASSERT_TRUE(a.has_value());
  auto b = Take(budget, 40);  // exactly at the cap: admitted
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(budget.bytes_in_flight(), 100);
  EXPECT_EQ(budget.requests_in_flight(), 2);
  EXPECT_FALSE(Take(budget, 1).has_value());
  // A refusal charges nothing.
  EXPECT_EQ(budget.bytes_in_flight(), 100);
  EXPECT_EQ(budget.requests_in_flight(), 2);
  a.reset();  // its bytes come back
  EXPECT_EQ(budget.bytes_in_flight(), 40);
  EXPECT_TRUE(Take(budget, 60).has_value());
  EXPECT_EQ(budget.bytes_in_flight(), 40);  // that hold was a temporary
}

TEST(RequestBudget, RequestLargerThanTheCapIsRefused) {
  RequestBudget budget({/*max_bytes=*/100});
  absl::StatusOr<RequestBudget::Hold> refused = budget.TryAcquire(101);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "--max_inflight_request_bytes"))
      << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "101 bytes")) << refused.status();
  EXPECT_EQ(budget.requests_in_flight(), 0);
}

TEST(RequestBudget, ClosedRefusesNewRequestsButKeepsHolds) {
  int64_t last_seen = -1;
  RequestBudget budget({/*max_bytes=*/100, [&](int64_t b) { last_seen = b; }});
  auto a = Take(budget, 10);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(last_seen, 10);
  budget.Close();
  absl::StatusOr<RequestBudget::Hold> refused = budget.TryAcquire(1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(a->Grow(20));  // admitted requests still complete
  EXPECT_EQ(budget.requests_in_flight(), 1);
  a.reset();
  EXPECT_EQ(last_seen, 0);
  EXPECT_TRUE(budget.WaitUntilIdle(absl::Now()));
}

TEST(RequestBudget, ZeroMeansNoLimitButStillCounts) {
  RequestBudget budget({/*max_bytes=*/0});
  auto a = Take(budget, int64_t{1} << 40);
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(a->Grow(int64_t{1} << 41));
  EXPECT_EQ(budget.bytes_in_flight(), int64_t{1} << 41);
  EXPECT_EQ(budget.requests_in_flight(), 1);
}

TEST(RequestBudget, GrowChargesTheDifferenceOrNothing) {
  RequestBudget budget({/*max_bytes=*/100});
  auto a = Take(budget, 30);
  auto b = Take(budget, 30);
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(a->Grow(50));  // +20
  EXPECT_EQ(budget.bytes_in_flight(), 80);
  EXPECT_TRUE(a->Grow(10));  // never lowers
  EXPECT_EQ(a->bytes(), 50);
  EXPECT_FALSE(b->Grow(51));  // +21 would make 101
  EXPECT_EQ(b->bytes(), 30);
  EXPECT_EQ(budget.bytes_in_flight(), 80);
  b.reset();
  a.reset();
  EXPECT_EQ(budget.bytes_in_flight(), 0);
  EXPECT_EQ(budget.requests_in_flight(), 0);
}

TEST(RequestBudget, MovedHoldReleasesOnce) {
  RequestBudget budget({/*max_bytes=*/100});
  {
    auto a = Take(budget, 70);
    ASSERT_TRUE(a.has_value());
    RequestBudget::Hold moved = std::move(*a);
    a.reset();  // the moved-from hold gives back nothing
    EXPECT_EQ(budget.bytes_in_flight(), 70);
    auto c = Take(budget, 30);
    ASSERT_TRUE(c.has_value());
    moved = std::move(*c);  // releases the 70 it held, takes c's 30
    EXPECT_EQ(budget.bytes_in_flight(), 30);
    EXPECT_EQ(budget.requests_in_flight(), 1);
  }
  EXPECT_EQ(budget.bytes_in_flight(), 0);
  EXPECT_EQ(budget.requests_in_flight(), 0);
}

// Many threads admitting and releasing: the total never passes the cap and
// returns to zero.
TEST(RequestBudget, ConcurrentAccountingStaysWithinTheCap) {
  RequestBudget budget({/*max_bytes=*/1000});
  std::atomic<int64_t> admitted{0}, refused{0}, over_cap{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        auto h = Take(budget, 100 + (i + t) % 200);
        if (!h) {
          ++refused;
          continue;
        }
        ++admitted;
        h->Grow(h->bytes() + 50);
        if (budget.bytes_in_flight() > 1000) ++over_cap;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(over_cap.load(), 0);
  EXPECT_GT(admitted.load(), 0);
  EXPECT_EQ(admitted.load() + refused.load(), 8 * 2000);
  EXPECT_EQ(budget.bytes_in_flight(), 0);
  EXPECT_EQ(budget.requests_in_flight(), 0);
}

TEST(RequestBudget, WaitUntilIdleWaitsForTheLastHold) {
  RequestBudget budget({/*max_bytes=*/0});
  EXPECT_TRUE(budget.WaitUntilIdle(absl::Now()));  // nothing in flight
  auto h = Take(budget, 10);
  ASSERT_TRUE(h.has_value());
  EXPECT_FALSE(budget.WaitUntilIdle(absl::Now() + absl::Milliseconds(20)));
  absl::Notification waiting;
  std::thread releaser([&] {
    waiting.WaitForNotification();
    h.reset();
  });
  waiting.Notify();
  EXPECT_TRUE(budget.WaitUntilIdle(absl::InfiniteFuture()));
  releaser.join();
}

}  // namespace
}  // namespace rankd::server
