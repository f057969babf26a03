#include "loadtest/driver/server_drain.h"

#include <vector>

#include "gtest/gtest.h"

namespace rankd::loadtest {
namespace {

// A probe that replays `loads` (the last one repeats) and a sleep that only
// adds up the time.
struct Fake {
  std::vector<ServerLoad> loads;
  size_t next = 0;
  absl::Duration slept;
  std::function<absl::StatusOr<ServerLoad>()> probe() {
    return [this]() -> absl::StatusOr<ServerLoad> {
      const ServerLoad l = loads[std::min(next, loads.size() - 1)];
      ++next;
      return l;
    };
  }
  std::function<void(absl::Duration)> sleep() {
    return [this](absl::Duration d) { slept += d; };
  }
};

TEST(WaitForIdleTest, WaitsUntilTheCountStopsAndTheQueueIsEmpty) {
  // A backlog finishing: 100 -> 400 -> 700 (queue 5) -> 700 (queue 0) -> 700.
  Fake f{{{100, 50}, {400, 20}, {700, 5}, {700, 0}, {700, 0}}};
  DrainOptions o;
  o.poll = absl::Milliseconds(250);
  DrainResult r = WaitForIdle(f.probe(), nullptr, o, f.sleep());
  EXPECT_TRUE(r.idle);
  // Reads at 0, 250, 500, 750 ms: the fourth equals the third and is empty.
  EXPECT_EQ(r.waited, absl::Milliseconds(750));
  EXPECT_EQ(f.slept, absl::Milliseconds(750));
  EXPECT_EQ(r.finished_while_waiting, 600);
}

TEST(WaitForIdleTest, AnIdleServerCostsOnePoll) {
  Fake f{{{42, 0}}};
  DrainResult r = WaitForIdle(f.probe(), nullptr, DrainOptions{}, f.sleep());
  EXPECT_TRUE(r.idle);
  EXPECT_EQ(r.waited, DrainOptions{}.poll);
  EXPECT_EQ(r.finished_while_waiting, 0);
}

TEST(WaitForIdleTest, GivesUpAfterMaxWait) {
  // Always busy: the count keeps growing.
  Fake f;
  for (int i = 0; i < 100; ++i) f.loads.push_back({100.0 * i, 1});
  DrainOptions o;
  o.max_wait = absl::Milliseconds(1100);
  o.poll = absl::Milliseconds(500);
  DrainResult r = WaitForIdle(f.probe(), nullptr, o, f.sleep());
  EXPECT_FALSE(r.idle);
  EXPECT_TRUE(r.probe_status.ok());
  EXPECT_EQ(r.waited, absl::Milliseconds(1100));  // 500 + 500 + 100: never past the limit
}

TEST(WaitForIdleTest, AQueueKeepsItWaitingEvenWhenTheCountIsStill) {
  // Nothing finishes for a while (a stalled batch), but requests are queued.
  Fake f{{{10, 3}, {10, 3}, {10, 3}, {13, 0}, {13, 0}}};
  DrainResult r = WaitForIdle(f.probe(), nullptr, DrainOptions{}, f.sleep());
  EXPECT_TRUE(r.idle);
  EXPECT_EQ(f.next, 5u);
}

TEST(WaitForIdleTest, AProbeErrorEndsTheWait) {
  int calls = 0;
  auto probe = [&]() -> absl::StatusOr<ServerLoad> {
    if (++calls == 2) return absl::UnavailableError("connection refused");
    return ServerLoad{1, 1};
  };
  absl::Duration slept;
  DrainResult r = WaitForIdle(probe, nullptr, DrainOptions{}, [&](absl::Duration d) { slept += d; });
  EXPECT_FALSE(r.idle);
  EXPECT_TRUE(absl::IsUnavailable(r.probe_status));
}

// Idle counters are not enough: the connections must answer too.
TEST(WaitForIdleTest, WaitsForTheTransportAfterTheCounters) {
  Fake f{{{5, 0}}};  // counters idle from the start
  int pings = 0;
  auto ping = [&]() -> absl::Status {
    // The first three checks time out (a backlog on the connections).
    return ++pings <= 3 ? absl::DeadlineExceededError("health check") : absl::OkStatus();
  };
  DrainResult r = WaitForIdle(f.probe(), ping, DrainOptions{}, f.sleep());
  EXPECT_TRUE(r.idle);
  EXPECT_EQ(pings, 4);
  EXPECT_EQ(r.waited, 4 * DrainOptions{}.poll);
  EXPECT_TRUE(r.last_ping.ok());
}

TEST(WaitForIdleTest, PingAloneWithoutCounters) {
  int pings = 0;
  auto ping = [&]() -> absl::Status {
    return ++pings == 1 ? absl::UnavailableError("busy") : absl::OkStatus();
  };
  absl::Duration slept;
  DrainResult r = WaitForIdle(nullptr, ping, DrainOptions{}, [&](absl::Duration d) { slept += d; });
  EXPECT_TRUE(r.idle);
  EXPECT_EQ(pings, 2);
  EXPECT_EQ(slept, 2 * DrainOptions{}.poll);
}

TEST(WaitForIdleTest, APingThatNeverAnswersGivesUp) {
  Fake f{{{5, 0}}};
  DrainOptions o;
  o.max_wait = absl::Seconds(1);
  DrainResult r = WaitForIdle(f.probe(), [] { return absl::DeadlineExceededError("x"); }, o,
                              f.sleep());
  EXPECT_FALSE(r.idle);
  EXPECT_EQ(r.waited, absl::Seconds(1));
  EXPECT_TRUE(absl::IsDeadlineExceeded(r.last_ping));
}

TEST(LoadFromMetricsTest, SumsEveryModelAndCode) {
  auto m = PromSnapshot::Parse(
      "rankd_requests_total{code=\"OK\",model=\"a\"} 10\n"
      "rankd_requests_total{code=\"DEADLINE_EXCEEDED\",model=\"a\"} 5\n"
      "rankd_requests_total{code=\"OK\",model=\"b\"} 1\n"
      "rankd_queue_requests{model=\"a\"} 2\n"
      "rankd_queue_requests{model=\"b\"} 0\n");
  ASSERT_TRUE(m.ok()) << m.status();
  const ServerLoad l = LoadFromMetrics(*m);
  EXPECT_EQ(l.finished, 16);
  EXPECT_EQ(l.queued, 2);
}

}  // namespace
}  // namespace rankd::loadtest
