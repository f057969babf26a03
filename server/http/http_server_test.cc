#include "server/http/http_server.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rankd::server {
namespace {

// Only the listener: no request reaches the (absent) models in these tests.
absl::StatusOr<std::unique_ptr<HttpServer>> StartOn(int port) {
  HttpServer::Options options;
  options.host = "127.0.0.1";
  options.port = port;
  return HttpServer::Start(options, nullptr, nullptr, nullptr);
}

TEST(HttpServerTest, StopRightAfterStartReturns) {
  for (int i = 0; i < 20; ++i) {
    auto server = StartOn(0);
    ASSERT_TRUE(server.ok()) << server.status();
    EXPECT_GT((*server)->port(), 0);
    (*server)->Stop();
  }
}

TEST(HttpServerTest, ASecondServerCannotTakeTheSamePort) {
  auto first = StartOn(0);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = StartOn((*first)->port());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), ::testing::HasSubstr("--http_port: cannot listen on"));
}

TEST(HttpServerTest, BadOptionsNameTheFlag) {
  HttpServer::Options options;
  options.port = 0;
  options.max_threads = 0;
  auto s = HttpServer::Start(options, nullptr, nullptr, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), ::testing::HasSubstr("--http_max_connections"));
  options.max_threads = 4;
  options.port = 70000;
  s = HttpServer::Start(options, nullptr, nullptr, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), ::testing::HasSubstr("--http_port"));
}

}  // namespace
}  // namespace rankd::server
