#include "server/connection_options.h"

#include <map>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace rankd::server {
namespace {

std::map<std::string, int> Args(const ConnectionOptions& o) {
  std::map<std::string, int> out;
  for (const auto& [k, v] : ConnectionChannelArgs(o)) out[k] = v;
  return out;
}

TEST(ConnectionOptions, DefaultsAreValidAndRecycleConnections) {
  ConnectionOptions o;
  EXPECT_TRUE(ValidateConnectionOptions(o).ok());
  auto args = Args(o);
  EXPECT_EQ(args.at("grpc.max_connection_age_ms"), 300000);
  EXPECT_EQ(args.at("grpc.max_connection_age_grace_ms"), 30000);
  EXPECT_EQ(args.at("grpc.keepalive_time_ms"), 60000);
  EXPECT_EQ(args.at("grpc.keepalive_timeout_ms"), 20000);
  EXPECT_EQ(args.at("grpc.http2.min_ping_interval_without_data_ms"), 10000);
  EXPECT_EQ(args.at("grpc.keepalive_permit_without_calls"), 1);
  EXPECT_EQ(args.at("grpc.http2.max_ping_strikes"), 2);
  EXPECT_EQ(args.at("grpc.http2.max_pings_without_data"), 0);
  EXPECT_EQ(args.count("grpc.max_concurrent_streams"), 0u);  // no limit by default
}

TEST(ConnectionOptions, ConcurrentStreamsLimit) {
  ConnectionOptions o;
  o.max_concurrent_streams = 16;
  ASSERT_TRUE(ValidateConnectionOptions(o).ok());
  EXPECT_EQ(Args(o).at("grpc.max_concurrent_streams"), 16);
  o.max_concurrent_streams = -1;
  absl::Status s = ValidateConnectionOptions(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "--max_concurrent_streams")) << s;
}

TEST(ConnectionOptions, ZeroTurnsAgeAndServerPingsOff) {
  ConnectionOptions o;
  o.max_connection_age_s = 0;
  o.keepalive_time_s = 0;
  ASSERT_TRUE(ValidateConnectionOptions(o).ok());
  auto args = Args(o);
  EXPECT_EQ(args.count("grpc.max_connection_age_ms"), 0u);
  EXPECT_EQ(args.count("grpc.max_connection_age_grace_ms"), 0u);
  EXPECT_EQ(args.count("grpc.keepalive_time_ms"), 0u);
  // Enforcement of client pings stays.
  EXPECT_EQ(args.at("grpc.http2.min_ping_interval_without_data_ms"), 10000);
}

TEST(ConnectionOptions, FractionalSecondsBecomeMilliseconds) {
  ConnectionOptions o;
  o.max_connection_age_s = 1.5;
  o.max_connection_age_grace_s = 0.25;
  auto args = Args(o);
  EXPECT_EQ(args.at("grpc.max_connection_age_ms"), 1500);
  EXPECT_EQ(args.at("grpc.max_connection_age_grace_ms"), 250);
}

TEST(ConnectionOptions, OutOfRangeValuesNameTheFlag) {
  ConnectionOptions o;
  o.max_connection_age_s = -1;
  absl::Status s = ValidateConnectionOptions(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "--max_connection_age_s")) << s;

  o = ConnectionOptions();
  o.keepalive_timeout_s = 0;
  s = ValidateConnectionOptions(o);
  EXPECT_TRUE(absl::StrContains(s.message(), "--keepalive_timeout_s")) << s;

  o = ConnectionOptions();
  o.max_connection_age_grace_s = 1e9;  // would overflow int milliseconds
  s = ValidateConnectionOptions(o);
  EXPECT_TRUE(absl::StrContains(s.message(), "--max_connection_age_grace_s")) << s;
}

}  // namespace
}  // namespace rankd::server
