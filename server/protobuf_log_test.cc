#include "server/protobuf_log.h"

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "rankd/v1/ranking.pb.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"

namespace rankd::server {
namespace {

TEST(LogRateLimiter, OneLinePerLocationPerInterval) {
  LogRateLimiter limiter(absl::Seconds(10));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  int64_t skipped = -1;
  EXPECT_TRUE(limiter.Allow("a.cc:1", t0, &skipped));
  EXPECT_EQ(skipped, 0);
  EXPECT_FALSE(limiter.Allow("a.cc:1", t0 + absl::Seconds(1), &skipped));
  EXPECT_FALSE(limiter.Allow("a.cc:1", t0 + absl::Seconds(9), &skipped));
  EXPECT_TRUE(limiter.Allow("b.cc:2", t0 + absl::Seconds(9), &skipped));  // its own limit
  EXPECT_EQ(skipped, 0);
  EXPECT_TRUE(limiter.Allow("a.cc:1", t0 + absl::Seconds(10), &skipped));
  EXPECT_EQ(skipped, 2);
  EXPECT_FALSE(limiter.Allow("a.cc:1", t0 + absl::Seconds(11), &skipped));
}

// The line a client can trigger at will: a string field that is not UTF-8.
TEST(RouteProtobufLogsToSpdlog, InvalidUtf8RequestsLogOnce) {
  std::ostringstream captured;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(captured);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", sink));
  RouteProtobufLogsToSpdlog(absl::Seconds(3600));

  rankd::v1::ScoreRequest request;
  request.set_model("kaggle");
  std::string wire = request.SerializeAsString();
  const size_t at = wire.find("kaggle");
  ASSERT_NE(at, std::string::npos);
  wire[at] = '\xff';  // invalid UTF-8 in a proto3 string
  for (int i = 0; i < 100; ++i) {
    rankd::v1::ScoreRequest parsed;
    EXPECT_FALSE(parsed.ParseFromString(wire));
  }
  spdlog::set_default_logger(previous);

  const std::string text = captured.str();
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  EXPECT_EQ(lines, 1u) << text;
  EXPECT_NE(text.find("UTF-8"), std::string::npos) << text;
}

}  // namespace
}  // namespace rankd::server
