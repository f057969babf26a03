#include "loadtest/driver/response_log.h"

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loadtest/report/report_csv.h"

namespace rankd::loadtest {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::unique_ptr<ResponseLog> Open(const std::string& path, int64_t flush_interval_ms = 100) {
  ResponseLog::Options o;
  o.path = path;
  o.flush_interval_ms = flush_interval_ms;
  auto log = ResponseLog::Create(o);
  EXPECT_TRUE(log.ok()) << log.status();
  return log.ok() ? std::move(*log) : nullptr;
}

TEST(ResponseLogTest, HeaderAndRowFormat) {
  const std::string path = TempPath("format.csv");
  auto log = Open(path);
  ASSERT_NE(log, nullptr);
  ResponseRow ok;
  ok.scheduled_unix_ns = 1763950000123456789;
  ok.sent_unix_ns = 1763950000123470001;
  ok.done_unix_ns = 1763950000123790901;  // 334112 ns after the schedule
  ok.version = 2;
  log->Append(ok);
  ResponseRow failed;
  failed.scheduled_unix_ns = 1763950001000000000;
  failed.sent_unix_ns = 1763950001000000999;
  failed.done_unix_ns = 1763950001050000007;
  failed.code = absl::StatusCode::kDeadlineExceeded;
  failed.version = 0;
  failed.step = 3;
  log->Append(failed);
  ASSERT_TRUE(log->Close().ok());
  EXPECT_EQ(log->rows_written(), 2);
  // One thread appended both, so they share a shard and keep their order.
  EXPECT_EQ(ReadFile(path),
            "scheduled_unix_us,sent_unix_us,done_unix_us,latency_us,code,version,step\n"
            "1763950000123456,1763950000123470,1763950000123790,334.112,OK,2,0\n"
            "1763950001000000,1763950001000000,1763950001050000,50000.007,DEADLINE_EXCEEDED,0,3\n");
}

TEST(ResponseLogTest, LatencyDecimalsAndCodeNames) {
  const auto line = [](int64_t latency_ns, absl::StatusCode code) {
    ResponseRow r;
    r.scheduled_unix_ns = 2000;
    r.sent_unix_ns = 2000;
    r.done_unix_ns = 2000 + latency_ns;
    r.code = code;
    std::string out;
    ResponseLog::AppendLine(r, &out);
    return out;
  };
  EXPECT_EQ(line(1005, absl::StatusCode::kOk), "2,2,3,1.005,OK,0,0\n");
  EXPECT_EQ(line(50, absl::StatusCode::kUnavailable), "2,2,2,0.050,UNAVAILABLE,0,0\n");
  EXPECT_EQ(line(0, absl::StatusCode::kResourceExhausted), "2,2,2,0.000,RESOURCE_EXHAUSTED,0,0\n");
  EXPECT_EQ(line(7, static_cast<absl::StatusCode>(42)), "2,2,2,0.007,UNKNOWN,0,0\n");
  EXPECT_EQ(line(-1500, absl::StatusCode::kOk), "2,2,0,-1.500,OK,0,0\n");
}

// Rows from many threads, appended while the writer drains the buffers
// (1 ms passes): each one in the file exactly once, with its own fields.
TEST(ResponseLogTest, EveryRowExactlyOnceFromManyThreads) {
  const std::string path = TempPath("threads.csv");
  auto log = Open(path, /*flush_interval_ms=*/1);
  ASSERT_NE(log, nullptr);
  constexpr int kThreads = 8, kRows = 5000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&log, t] {
      for (int i = 0; i < kRows; ++i) {
        ResponseRow r;
        const int64_t id = t * 1000000 + i;
        r.scheduled_unix_ns = id * 1000;
        r.sent_unix_ns = id * 1000;
        r.done_unix_ns = id * 1000 + 250000;
        const bool failed = i % 7 == 0;
        r.code = failed ? absl::StatusCode::kUnavailable : absl::StatusCode::kOk;
        r.version = failed ? 0 : t + 1;
        r.step = t;
        log->Append(r);
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE(log->Close().ok());
  EXPECT_EQ(log->rows_written(), kThreads * kRows);

  auto rows = ParseCsv(ReadFile(path));
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), static_cast<size_t>(kThreads * kRows));
  std::set<int64_t> ids;
  int failures = 0;
  for (const auto& row : *rows) {
    int64_t id = 0, version = -1, step = -1;
    ASSERT_TRUE(absl::SimpleAtoi(row.at("sent_unix_us"), &id));
    ASSERT_TRUE(absl::SimpleAtoi(row.at("version"), &version));
    ASSERT_TRUE(absl::SimpleAtoi(row.at("step"), &step));
    EXPECT_TRUE(ids.insert(id).second) << "twice: " << id;
    const int t = static_cast<int>(id / 1000000), i = static_cast<int>(id % 1000000);
    EXPECT_EQ(step, t);
    EXPECT_EQ(row.at("scheduled_unix_us"), row.at("sent_unix_us"));
    EXPECT_EQ(row.at("latency_us"), "250.000");
    if (i % 7 == 0) {
      ++failures;
      EXPECT_EQ(row.at("code"), "UNAVAILABLE");
      EXPECT_EQ(version, 0);
    } else {
      EXPECT_EQ(row.at("code"), "OK");
      EXPECT_EQ(version, t + 1);
    }
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(kThreads * kRows));
  EXPECT_EQ(failures, kThreads * ((kRows + 6) / 7));
}

TEST(ResponseLogTest, EmptyLogIsTheHeaderAndCloseTwiceIsFine) {
  const std::string path = TempPath("empty.csv");
  auto log = Open(path);
  ASSERT_NE(log, nullptr);
  EXPECT_TRUE(log->Close().ok());
  EXPECT_TRUE(log->Close().ok());
  EXPECT_EQ(ReadFile(path), absl::StrCat(ResponseLog::kHeader, "\n"));
}

TEST(ResponseLogTest, DestructorWritesTheRest) {
  const std::string path = TempPath("destructor.csv");
  {
    auto log = Open(path, /*flush_interval_ms=*/60000);
    ASSERT_NE(log, nullptr);
    ResponseRow r;
    r.version = 5;
    log->Append(r);
  }
  auto rows = ParseCsv(ReadFile(path));
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ(rows->at(0).at("version"), "5");
}

TEST(ResponseLogTest, BadOptionsAndUnopenableFiles) {
  ResponseLog::Options o;
  auto no_path = ResponseLog::Create(o);
  ASSERT_FALSE(no_path.ok());
  EXPECT_THAT(std::string(no_path.status().message()), HasSubstr("path"));
  o.path = TempPath("bad.csv");
  o.flush_interval_ms = 0;
  auto bad_interval = ResponseLog::Create(o);
  ASSERT_FALSE(bad_interval.ok());
  EXPECT_THAT(std::string(bad_interval.status().message()), HasSubstr("flush_interval_ms"));
  o.flush_interval_ms = 100;
  o.path = TempPath("no/such/dir/log.csv");
  auto missing_dir = ResponseLog::Create(o);
  ASSERT_FALSE(missing_dir.ok());
  EXPECT_EQ(missing_dir.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(missing_dir.status().message()),
              HasSubstr(absl::StrCat("cannot open ", o.path, ": ")));
}

}  // namespace
}  // namespace rankd::loadtest
