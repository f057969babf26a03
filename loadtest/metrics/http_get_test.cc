#include "loadtest/metrics/http_get.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace rankd::loadtest {
namespace {

// Listens on a free loopback port and answers one connection with `reply`
// (after reading the request), or with nothing when `reply` is empty.
class OneShotServer {
 public:
  explicit OneShotServer(std::string reply) : reply_(std::move(reply)) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    listen(fd_, 1);
    thread_ = std::thread([this] {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      char buf[4096];
      std::string got;
      while (got.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = recv(c, buf, sizeof(buf), 0);
        if (n <= 0) break;
        got.append(buf, n);
      }
      request_ = got;
      if (reply_.empty()) {
        absl::SleepFor(absl::Milliseconds(800));  // never answers in time
      } else {
        send(c, reply_.data(), reply_.size(), MSG_NOSIGNAL);
      }
      close(c);
    });
  }
  ~OneShotServer() {
    shutdown(fd_, SHUT_RDWR);
    thread_.join();
    close(fd_);
  }
  std::string url(const std::string& path = "/metrics") const {
    return absl::StrCat("http://127.0.0.1:", port_, path);
  }
  const std::string& request() const { return request_; }

 private:
  std::string reply_;
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::string request_;
};

TEST(ParseHttpUrlTest, Forms) {
  auto u = ParseHttpUrl("http://localhost:8502/metrics");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "localhost");
  EXPECT_EQ(u->port, "8502");
  EXPECT_EQ(u->path, "/metrics");
  u = ParseHttpUrl("http://[::1]:9/x?y=1");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->path, "/x?y=1");
  u = ParseHttpUrl("http://h");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->port, "80");
  EXPECT_EQ(u->path, "/");
  for (const char* bad : {"https://h/", "h:80/metrics", "http://", "http://h:0/", "http://h:x/",
                          "http://[::1/"}) {
    EXPECT_FALSE(ParseHttpUrl(bad).ok()) << bad;
  }
}

TEST(HttpGetTest, ContentLength) {
  OneShotServer s("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello");
  auto body = HttpGet(s.url(), absl::Seconds(5));
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(*body, "hello");
  EXPECT_EQ(s.request().rfind("GET /metrics HTTP/1.1\r\n", 0), 0u) << s.request();
}

TEST(HttpGetTest, Chunked) {
  OneShotServer s(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
      "4\r\nrank\r\n3;ext=1\r\nd_r\r\nA\r\nequests 1\n\r\n0\r\n\r\n");
  auto body = HttpGet(s.url(), absl::Seconds(5));
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(*body, "rankd_requests 1\n");
}

TEST(HttpGetTest, ReadToClose) {
  OneShotServer s("HTTP/1.0 200 OK\r\n\r\nall of it");
  auto body = HttpGet(s.url(), absl::Seconds(5));
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(*body, "all of it");
}

TEST(HttpGetTest, NotFoundStatusIsAnError) {
  OneShotServer s("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
  auto body = HttpGet(s.url(), absl::Seconds(5));
  ASSERT_FALSE(body.ok());
  EXPECT_NE(body.status().message().find("404"), std::string::npos) << body.status();
}

TEST(HttpGetTest, TimesOut) {
  OneShotServer s("");
  const absl::Time start = absl::Now();
  auto body = HttpGet(s.url(), absl::Milliseconds(200));
  ASSERT_FALSE(body.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(body.status())) << body.status();
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(700));
}

TEST(HttpGetTest, RefusedIsUnavailable) {
  int port;
  {
    OneShotServer s("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    ASSERT_TRUE(HttpGet(s.url(), absl::Seconds(5)).ok());
    port = std::stoi(s.url().substr(std::string("http://127.0.0.1:").size()));
  }
  auto body = HttpGet(absl::StrCat("http://127.0.0.1:", port, "/metrics"), absl::Seconds(2));
  ASSERT_FALSE(body.ok());
  EXPECT_TRUE(absl::IsUnavailable(body.status())) << body.status();
}

}  // namespace
}  // namespace rankd::loadtest
