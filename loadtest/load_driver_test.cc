// The load driver against the in-process fake server of client/testing
// (scripted answers by model name: "mini" OK, "error" INVALID_ARGUMENT,
// "slow" 500 ms). Short runs with generous margins: these check counting,
// rates and error accounting, not performance.
#include "loadtest/load_driver.h"

#include <memory>
#include <string>
#include <vector>

#include "client/testing/fake_ranking_service.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rankd::loadtest {
namespace {

class LoadDriverTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto fake = client::testing::StartFakeServer();
    ASSERT_TRUE(fake.ok()) << fake.status();
    fake_ = new client::testing::FakeServer(std::move(*fake));
  }
  static void TearDownTestSuite() {
    fake_->server->Shutdown();
    delete fake_;
  }

  void Connect(const std::string& target, int n = 2) {
    for (int i = 0; i < n; ++i) {
      client::RankingClient::Options o;
      o.target = target;
      o.dedicated_connection = true;
      auto c = client::RankingClient::Create(o);
      ASSERT_TRUE(c.ok()) << c.status();
      clients_.push_back(std::move(*c));
    }
  }

  std::unique_ptr<LoadDriver> Driver(const std::string& model, double deadline_ms = 5000,
                                     int64_t spin_us = 200) {
    auto r = std::make_shared<rankd::v1::ScoreRequest>();
    r->set_model(model);
    r->set_num_candidates(3);
    pool_ = {r};
    LoadDriver::Options o;
    for (auto& c : clients_) o.clients.push_back(c.get());
    o.pool = &pool_;
    o.deadline_ms = deadline_ms;
    o.spin_us = spin_us;
    o.interval_s = 0.25;
    o.on_interval = [this](const IntervalStats& i) { intervals_seen_ += 1; };
    auto d = LoadDriver::Create(o);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? std::move(*d) : nullptr;
  }

  static client::testing::FakeServer* fake_;
  std::vector<std::unique_ptr<client::RankingClient>> clients_;
  RequestPool pool_;
  int intervals_seen_ = 0;
};

client::testing::FakeServer* LoadDriverTest::fake_ = nullptr;

TEST_F(LoadDriverTest, OpenLoopSendsOnSchedule) {
  Connect(fake_->target());
  auto driver = Driver("mini");
  StepSpec spec;
  spec.rate_rps = 400;
  spec.warmup_s = 0.25;
  spec.duration_s = 1;
  auto r = driver->Run(spec);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->mode, "open");
  EXPECT_EQ(r->sent, 400);  // constant schedule: exactly rate x duration
  EXPECT_EQ(r->completed, 400);
  EXPECT_EQ(r->ok, 400);
  EXPECT_EQ(r->errors, 0);
  EXPECT_NEAR(r->achieved_rps, 400, 40);
  EXPECT_NEAR(r->candidates_per_s, 1200, 1e-9);
  EXPECT_EQ(r->mean_candidates, 3);
  EXPECT_EQ(r->total_by_code.at("OK"), 500);  // warm-up included
  EXPECT_EQ(r->latency.count, 400);
  EXPECT_GE(r->latency.p99_us, r->latency.p50_us);
  EXPECT_GE(r->latency.p50_us, r->service.p50_us * 0.99);  // from the schedule >= from the send
  EXPECT_GE(r->intervals.size(), 5u);
  EXPECT_TRUE(r->intervals[0].warmup);
  EXPECT_FALSE(r->intervals.back().warmup);
  EXPECT_EQ(intervals_seen_, static_cast<int>(r->intervals.size()));
  int64_t in_intervals = 0;
  for (const auto& i : r->intervals) in_intervals += i.completed;
  EXPECT_EQ(in_intervals, 500);
  EXPECT_FALSE(r->server_window.available);  // no scrape function
}

// The schedule holds whether senders only sleep (spin_us 0) or only spin
// (spin_us longer than the gap between sends).
TEST_F(LoadDriverTest, OpenLoopScheduleWithAndWithoutSpinning) {
  Connect(fake_->target());
  for (int64_t spin_us : {0, 100000}) {
    SCOPED_TRACE(spin_us);
    auto driver = Driver("mini", 5000, spin_us);
    StepSpec spec;
    spec.rate_rps = 200;
    spec.warmup_s = 0.1;
    spec.duration_s = 0.5;
    auto r = driver->Run(spec);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->sent, 100);
    EXPECT_EQ(r->ok, 100);
  }
}

TEST_F(LoadDriverTest, ClosedLoopCountsErrorsByCode) {
  Connect(fake_->target());
  auto driver = Driver("error");
  StepSpec spec;
  spec.mode = StepSpec::Mode::kClosed;
  spec.concurrency = 2;
  spec.warmup_s = 0;
  spec.duration_s = 0.5;
  auto r = driver->Run(spec);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->mode, "closed");
  EXPECT_GT(r->completed, 10);
  EXPECT_EQ(r->ok, 0);
  EXPECT_EQ(r->errors, r->completed);
  EXPECT_EQ(r->errors_by_code.at("INVALID_ARGUMENT"), r->completed);
  EXPECT_EQ(r->errors_by_code.size(), 1u);
  EXPECT_EQ(r->candidates_per_s, 0);
}

TEST_F(LoadDriverTest, DeadlinesAreCounted) {
  Connect(fake_->target());
  auto driver = Driver("slow", /*deadline_ms=*/50);
  StepSpec spec;
  spec.rate_rps = 40;
  spec.warmup_s = 0;
  spec.duration_s = 0.25;
  auto r = driver->Run(spec);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->sent, 10);
  EXPECT_EQ(r->errors_by_code.at("DEADLINE_EXCEEDED"), 10);
  EXPECT_GE(r->latency.p50_us, 45000);
}

// A server that is not there fails every call at once (possibly inline in
// the send): the closed loop must neither recurse nor hang.
TEST_F(LoadDriverTest, ClosedLoopAgainstNoServerEnds) {
  Connect("127.0.0.1:1", 1);
  auto driver = Driver("mini");
  StepSpec spec;
  spec.mode = StepSpec::Mode::kClosed;
  spec.concurrency = 4;
  spec.warmup_s = 0;
  spec.duration_s = 0.3;
  auto r = driver->Run(spec);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->completed, 0);
  EXPECT_EQ(r->ok, 0);
  EXPECT_GT(r->errors_by_code.at("UNAVAILABLE"), 0);
}

TEST_F(LoadDriverTest, RejectsBadOptionsAndSpecs) {
  LoadDriver::Options o;
  EXPECT_FALSE(LoadDriver::Create(o).ok());  // no clients
  Connect(fake_->target(), 1);
  o.clients = {clients_[0].get()};
  EXPECT_FALSE(LoadDriver::Create(o).ok());  // no pool
  pool_ = {std::make_shared<rankd::v1::ScoreRequest>()};
  o.pool = &pool_;
  o.spin_us = -1;
  auto bad_spin = LoadDriver::Create(o);
  EXPECT_FALSE(bad_spin.ok());
  EXPECT_THAT(std::string(bad_spin.status().message()), ::testing::HasSubstr("spin_us"));
  auto driver = Driver("mini");
  StepSpec spec;
  spec.rate_rps = 0;
  EXPECT_FALSE(driver->Run(spec).ok());
  spec.rate_rps = 10;
  spec.duration_s = 0;
  EXPECT_FALSE(driver->Run(spec).ok());
  spec.duration_s = 1;
  spec.mode = StepSpec::Mode::kClosed;
  spec.concurrency = 0;
  EXPECT_FALSE(driver->Run(spec).ok());
}

}  // namespace
}  // namespace rankd::loadtest
