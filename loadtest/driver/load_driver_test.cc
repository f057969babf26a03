// The load driver against the in-process fake server of client/testing
// (scripted answers by model name: "mini" OK, "error" INVALID_ARGUMENT,
// "slow" 500 ms). Short runs with generous margins: these check counting,
// rates and error accounting, not performance.
#include "loadtest/driver/load_driver.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/testing/fake_ranking_service.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loadtest/driver/response_log.h"
#include "loadtest/report/report_csv.h"

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
                                     int64_t spin_us = 200, ResponseLog* log = nullptr,
                                     RequestPool pool = {}) {
    if (pool.empty()) {
      auto r = std::make_shared<rankd::v1::ScoreRequest>();
      r->set_model(model);
      r->set_num_candidates(3);
      pool = {r};
    }
    pool_ = std::move(pool);
    LoadDriver::Options o;
    o.response_log = log;
    std::vector<client::RankingClient*> clients;
    for (auto& c : clients_) clients.push_back(c.get());
    auto sender = MakeRankdSender(clients, &pool_);
    EXPECT_TRUE(sender.ok()) << sender.status();
    if (!sender.ok()) return nullptr;
    sender_ = std::move(*sender);
    o.sender = sender_.get();
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
  std::unique_ptr<ScoreSender> sender_;  // over clients_ and pool_
  int intervals_seen_ = 0;
};

client::testing::FakeServer* LoadDriverTest::fake_ = nullptr;

int64_t UnixUsNow() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::unique_ptr<ResponseLog> OpenLog(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  ResponseLog::Options o;
  o.path = absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
  auto log = ResponseLog::Create(o);
  EXPECT_TRUE(log.ok()) << log.status();
  return log.ok() ? std::move(*log) : nullptr;
}

// A closed log's rows, with the integer columns parsed.
struct LogRow {
  int64_t scheduled = 0, sent = 0, done = 0, version = -1, step = -1;
  double latency_us = -1;
  std::string code;
};
std::vector<LogRow> ReadLog(const ResponseLog& log) {
  std::ifstream in(log.path());
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.rfind(absl::StrCat(ResponseLog::kHeader, "\n"), 0), 0u) << text.substr(0, 200);
  auto rows = ParseCsv(text);
  EXPECT_TRUE(rows.ok()) << rows.status();
  std::vector<LogRow> out;
  if (!rows.ok()) return out;
  for (const auto& m : *rows) {
    LogRow r;
    EXPECT_TRUE(absl::SimpleAtoi(m.at("scheduled_unix_us"), &r.scheduled));
    EXPECT_TRUE(absl::SimpleAtoi(m.at("sent_unix_us"), &r.sent));
    EXPECT_TRUE(absl::SimpleAtoi(m.at("done_unix_us"), &r.done));
    EXPECT_TRUE(absl::SimpleAtod(m.at("latency_us"), &r.latency_us));
    EXPECT_TRUE(absl::SimpleAtoi(m.at("version"), &r.version));
    EXPECT_TRUE(absl::SimpleAtoi(m.at("step"), &r.step));
    r.code = m.at("code");
    out.push_back(r);
  }
  return out;
}

int64_t TotalCalls(const StepResult& r) {
  int64_t n = 0;
  for (const auto& [code, count] : r.total_by_code) n += count;
  return n;
}

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
  // The client (with the fake server, in this process) kept calling for 0.5 s.
  EXPECT_GT(r->client_cpu_cores, 0);
  EXPECT_LE(r->client_cpu_cores, std::thread::hardware_concurrency() + 0.5);
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

// Open loop with the response log: one row per call (warm-up included) with
// its schedule, send and answer on the wall clock, the version that answered
// (the fake answers version v > 0 as v, 0 as 1) and the step index.
TEST_F(LoadDriverTest, OpenLoopLogsEveryCallOnce) {
  Connect(fake_->target());
  auto log = OpenLog("open.csv");
  ASSERT_NE(log, nullptr);
  RequestPool pool;
  for (int64_t v : {0, 2, 3}) {
    auto r = std::make_shared<rankd::v1::ScoreRequest>();
    r->set_model("mini");
    r->set_version(v);
    r->set_num_candidates(1);
    pool.push_back(r);
  }
  auto driver = Driver("mini", 5000, 200, log.get(), pool);
  StepSpec spec;
  spec.rate_rps = 400;
  spec.warmup_s = 0.25;
  spec.duration_s = 1;
  spec.index = 4;
  const int64_t before_us = UnixUsNow();
  auto r = driver->Run(spec);
  const int64_t after_us = UnixUsNow();
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(log->Close().ok());
  EXPECT_EQ(log->rows_written(), 500);

  const std::vector<LogRow> rows = ReadLog(*log);
  ASSERT_EQ(rows.size(), 500u);
  EXPECT_EQ(TotalCalls(*r), 500);
  std::vector<int64_t> scheduled;
  std::map<int64_t, int> by_version;
  for (const LogRow& row : rows) {
    EXPECT_EQ(row.code, "OK");
    EXPECT_EQ(row.step, 4);
    // Within the run on the wall clock (2 ms for a clock slewed meanwhile).
    EXPECT_LE(before_us - 2000, row.scheduled);
    EXPECT_LE(row.scheduled, row.sent);
    EXPECT_LE(row.sent, row.done);
    EXPECT_LE(row.done, after_us + 2000);
    EXPECT_NEAR(row.latency_us, row.done - row.scheduled, 1.0);  // whole vs fractional us
    scheduled.push_back(row.scheduled);
    ++by_version[row.version];
  }
  // Round-robin over the pool: 167 / 167 / 166 of the 500 calls.
  EXPECT_EQ(by_version, (std::map<int64_t, int>{{1, 167}, {2, 167}, {3, 166}}));
  // Every scheduled time once, 2.5 ms apart (constant arrivals at 400/s).
  std::sort(scheduled.begin(), scheduled.end());
  for (size_t i = 1; i < scheduled.size(); ++i) {
    EXPECT_NEAR(scheduled[i] - scheduled[i - 1], 2500, 1) << i;
  }
}

// Failed calls are logged with their code and version 0: a closed loop of
// INVALID_ARGUMENT answers (scheduled = sent: a closed loop has no schedule),
// then an open-loop step of deadlines, both into one log.
TEST_F(LoadDriverTest, FailuresAreLoggedWithTheirCode) {
  Connect(fake_->target());
  auto log = OpenLog("failures.csv");
  ASSERT_NE(log, nullptr);
  auto errors = Driver("error", 5000, 200, log.get());
  StepSpec closed;
  closed.mode = StepSpec::Mode::kClosed;
  closed.concurrency = 2;
  closed.warmup_s = 0;
  closed.duration_s = 0.3;
  closed.index = 0;
  auto r0 = errors->Run(closed);
  ASSERT_TRUE(r0.ok()) << r0.status();
  auto slow = Driver("slow", /*deadline_ms=*/50, 200, log.get());
  StepSpec open;
  open.rate_rps = 40;
  open.warmup_s = 0;
  open.duration_s = 0.25;
  open.index = 1;
  auto r1 = slow->Run(open);
  ASSERT_TRUE(r1.ok()) << r1.status();
  ASSERT_TRUE(log->Close().ok());

  const std::vector<LogRow> rows = ReadLog(*log);
  ASSERT_EQ(static_cast<int64_t>(rows.size()), TotalCalls(*r0) + TotalCalls(*r1));
  int64_t step0 = 0, step1 = 0;
  for (const LogRow& row : rows) {
    EXPECT_EQ(row.version, 0);
    if (row.step == 0) {
      ++step0;
      EXPECT_EQ(row.code, "INVALID_ARGUMENT");
      EXPECT_EQ(row.scheduled, row.sent);
    } else {
      ++step1;
      EXPECT_EQ(row.step, 1);
      EXPECT_EQ(row.code, "DEADLINE_EXCEEDED");
      EXPECT_GE(row.latency_us, 45000);
    }
  }
  EXPECT_EQ(step0, TotalCalls(*r0));
  EXPECT_GT(step0, 10);
  EXPECT_EQ(step1, 10);
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
  EXPECT_FALSE(LoadDriver::Create(o).ok());  // no sender
  Connect(fake_->target(), 1);
  pool_ = {std::make_shared<rankd::v1::ScoreRequest>()};
  auto sender = MakeRankdSender({clients_[0].get()}, &pool_);
  ASSERT_TRUE(sender.ok()) << sender.status();
  o.sender = sender->get();
  EXPECT_FALSE(LoadDriver::Create(o).ok());  // no pool
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
