// HttpScoreSender against an in-process cpp-httplib server scripted by model
// name: "mini" answers one score per candidate (version 7), "bad" 400,
// "busy" 429, "short" a 200 with too few scores, "slow" after 600 ms.
#include "loadtest/driver/http_score_sender.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "httplib.h"

namespace rankd::loadtest {
namespace {

class HttpScoreSenderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Post(R"(/v1/models/([^/:]+):score)", [this](const httplib::Request& req,
                                                         httplib::Response& res) {
      const std::string model = req.matches[1];
      {
        absl::MutexLock lock(&mu_);
        timeout_header_ = req.get_header_value("Request-Timeout-Ms");
        content_type_ = req.get_header_value("Content-Type");
      }
      rankd::v1::ScoreRequest r;
      if (!google::protobuf::util::JsonStringToMessage(req.body, &r).ok()) {
        res.status = 400;
        return;
      }
      if (model == "bad") {
        res.status = 400;
        res.set_content(R"({"error":"bad"})", "application/json");
        return;
      }
      if (model == "busy") {
        res.status = 429;
        return;
      }
      if (model == "slow") std::this_thread::sleep_for(std::chrono::milliseconds(600));
      rankd::v1::ScoreResponse out;
      out.set_model(r.model());
      out.set_version(7);
      const int n = model == "short" ? r.num_candidates() - 1 : r.num_candidates();
      for (int i = 0; i < n; ++i) out.add_scores(0.5f);
      std::string json;
      (void)google::protobuf::util::MessageToJsonString(out, &json);
      served_.fetch_add(1);
      res.set_content(json, "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void TearDown() override {
    server_.stop();
    thread_.join();
  }

  std::unique_ptr<HttpScoreSender> Sender(std::vector<std::string> models, int connections = 2,
                                          int port = 0) {
    pool_.clear();
    for (const auto& m : models) {
      auto r = std::make_shared<rankd::v1::ScoreRequest>();
      r->set_model(m);
      r->set_num_candidates(3);
      r->add_dense(1);
      r->add_dense(2);
      r->add_dense(3);
      pool_.push_back(r);
    }
    HttpScoreSender::Options o;
    o.target = absl::StrCat("127.0.0.1:", port == 0 ? port_ : port);
    o.connections = connections;
    auto s = HttpScoreSender::Create(o, &pool_);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }

  // Sends pool entry `index` and waits for its result.
  static SendResult SendAndWait(ScoreSender* sender, size_t index,
                                absl::Duration deadline = absl::Seconds(5)) {
    absl::Notification done;
    SendResult out;
    sender->Send(index, deadline, [&](const SendResult& r) {
      out = r;
      done.Notify();
    });
    done.WaitForNotification();
    return out;
  }

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  RequestPool pool_;
  std::atomic<int> served_{0};
  absl::Mutex mu_;
  std::string timeout_header_ ABSL_GUARDED_BY(mu_);
  std::string content_type_ ABSL_GUARDED_BY(mu_);
};

TEST_F(HttpScoreSenderTest, ScoresWithTheDeadlineInAHeader) {
  auto sender = Sender({"mini"});
  const SendResult r = SendAndWait(sender.get(), 0, absl::Milliseconds(3000));
  EXPECT_EQ(r.code, absl::StatusCode::kOk);
  EXPECT_EQ(r.version, 7);
  absl::MutexLock lock(&mu_);
  int64_t ms = 0;
  ASSERT_TRUE(absl::SimpleAtoi(timeout_header_, &ms)) << timeout_header_;
  EXPECT_GT(ms, 2000);
  EXPECT_LE(ms, 3000);
  EXPECT_EQ(content_type_, "application/json");
}

TEST_F(HttpScoreSenderTest, MapsStatusesAndBadAnswersToCodes) {
  auto sender = Sender({"bad", "busy", "short", "nosuch/model"});
  EXPECT_EQ(SendAndWait(sender.get(), 0).code, absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SendAndWait(sender.get(), 1).code, absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(SendAndWait(sender.get(), 2).code, absl::StatusCode::kInternal);
  // The slash is escaped, so no route matches: httplib's 404.
  EXPECT_EQ(SendAndWait(sender.get(), 3).code, absl::StatusCode::kNotFound);
}

TEST_F(HttpScoreSenderTest, HttpStatusesMapBackToGrpcCodes) {
  EXPECT_EQ(HttpStatusToCode(200), absl::StatusCode::kOk);
  EXPECT_EQ(HttpStatusToCode(413), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(HttpStatusToCode(415), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HttpStatusToCode(503), absl::StatusCode::kUnavailable);
  EXPECT_EQ(HttpStatusToCode(504), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(HttpStatusToCode(302), absl::StatusCode::kUnknown);
}

TEST_F(HttpScoreSenderTest, DeadlinePassedIsDeadlineExceeded) {
  auto sender = Sender({"slow"});
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(SendAndWait(sender.get(), 0, absl::Milliseconds(150)).code,
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(550));
}

TEST_F(HttpScoreSenderTest, NoServerIsUnavailable) {
  // A port that was just free: bind one (no listen), note it, close it.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ::close(fd);
  const int port = ntohs(addr.sin_port);
  auto sender = Sender({"mini"}, 1, port);
  EXPECT_EQ(SendAndWait(sender.get(), 0).code, absl::StatusCode::kUnavailable);
}

// More sends than connections: they queue, and every one is answered once
// over the two keep-alive connections.
TEST_F(HttpScoreSenderTest, QueuedSendsAllComplete) {
  auto sender = Sender({"mini", "mini"}, 2);
  constexpr int kCalls = 200;
  std::atomic<int> ok{0}, finished{0};
  absl::Notification all;
  for (int i = 0; i < kCalls; ++i) {
    sender->Send(i % 2, absl::Seconds(10), [&](const SendResult& r) {
      if (r.code == absl::StatusCode::kOk) ok.fetch_add(1);
      if (finished.fetch_add(1) + 1 == kCalls) all.Notify();
    });
  }
  all.WaitForNotification();
  EXPECT_EQ(ok.load(), kCalls);
  EXPECT_EQ(served_.load(), kCalls);
}

// Destroying the sender with calls queued behind a slow one: each still runs
// its callback once (CANCELLED unsent), and nothing hangs.
TEST_F(HttpScoreSenderTest, DestructionFinishesQueuedCalls) {
  auto sender = Sender({"slow"}, 1);
  std::atomic<int> finished{0}, cancelled{0};
  for (int i = 0; i < 5; ++i) {
    sender->Send(0, absl::Seconds(5), [&](const SendResult& r) {
      if (r.code == absl::StatusCode::kCancelled) cancelled.fetch_add(1);
      finished.fetch_add(1);
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the first is on the wire
  sender.reset();
  EXPECT_EQ(finished.load(), 5);
  EXPECT_GE(cancelled.load(), 3);
}

TEST_F(HttpScoreSenderTest, RejectsBadOptions) {
  pool_ = {std::make_shared<rankd::v1::ScoreRequest>()};
  HttpScoreSender::Options o;
  o.connections = 0;
  EXPECT_FALSE(HttpScoreSender::Create(o, &pool_).ok());
  o.connections = 1;
  o.target = "no-port-here/x";
  EXPECT_FALSE(HttpScoreSender::Create(o, &pool_).ok());
  o.target = "localhost:8501";
  o.tls_cert_file = "c.pem";
  EXPECT_FALSE(HttpScoreSender::Create(o, &pool_).ok());  // no CA, no key
  o.tls_cert_file.clear();
  EXPECT_FALSE(HttpScoreSender::Create(o, nullptr).ok());
}

}  // namespace
}  // namespace rankd::loadtest
