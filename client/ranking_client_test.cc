#include "client/ranking_client.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "client/testing/fake_ranking_service.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rankd::client {
namespace {

using ::grpc::health::v1::HealthCheckResponse;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class RankingClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto fake = testing::StartFakeServer();
    ASSERT_TRUE(fake.ok()) << fake.status();
    fake_ = new testing::FakeServer(std::move(*fake));
  }
  static void TearDownTestSuite() {
    fake_->server->Shutdown();
    delete fake_;
    fake_ = nullptr;
  }

  static RankingClient::Options OptionsFor(const std::string& target) {
    RankingClient::Options options;
    options.target = target;
    return options;
  }

  static std::unique_ptr<RankingClient> NewClient(RankingClient::Options options) {
    auto client = RankingClient::Create(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }
  static std::unique_ptr<RankingClient> NewClient() {
    return NewClient(OptionsFor(fake_->target()));
  }

  static rankd::v1::ScoreRequest Request(const std::string& model, int candidates,
                                         int64_t version = 0) {
    rankd::v1::ScoreRequest request;
    request.set_model(model);
    request.set_version(version);
    request.set_num_candidates(candidates);
    return request;
  }

  // A port nothing listens on: a server's, after it has shut down.
  static std::string DeadTarget() {
    auto fake = testing::StartFakeServer();
    EXPECT_TRUE(fake.ok()) << fake.status();
    const std::string target = fake->target();
    fake->server->Shutdown();
    return target;
  }

  static testing::FakeServer* fake_;
};

testing::FakeServer* RankingClientTest::fake_ = nullptr;

TEST_F(RankingClientTest, CreateRejectsBadOptionsNamingTheField) {
  struct Case {
    void (*mutate)(RankingClient::Options*);
    const char* field;
  };
  const Case cases[] = {
      {[](RankingClient::Options* o) { o->target = ""; }, "target"},
      {[](RankingClient::Options* o) { o->deadline_ms = 0; }, "deadline_ms"},
      {[](RankingClient::Options* o) { o->max_message_bytes = 0; }, "max_message_bytes"},
      {[](RankingClient::Options* o) { o->max_message_bytes = int64_t{1} << 31; },
       "max_message_bytes"},
      {[](RankingClient::Options* o) { o->connect_timeout_ms = -1; }, "connect_timeout_ms"},
      {[](RankingClient::Options* o) { o->keepalive_time_ms = -1; }, "keepalive_time_ms"},
      {[](RankingClient::Options* o) { o->keepalive_timeout_ms = 0; }, "keepalive_timeout_ms"},
      {[](RankingClient::Options* o) { o->async_threads = -1; }, "async_threads"},
      {[](RankingClient::Options* o) { o->async_threads = 65; }, "async_threads"},
  };
  for (const Case& c : cases) {
    RankingClient::Options options = OptionsFor(fake_->target());
    c.mutate(&options);
    auto client = RankingClient::Create(options);
    ASSERT_FALSE(client.ok()) << c.field;
    EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(client.status().message(), HasSubstr(c.field));
  }
}

TEST_F(RankingClientTest, ScoreReturnsOneScorePerCandidate) {
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  auto response = client->Score(Request("mini", 3));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_THAT(response->scores(), ElementsAre(1.0f / 1024, 2.0f / 1024, 3.0f / 1024));
  EXPECT_EQ(response->model(), "mini");
  EXPECT_EQ(response->version(), 1);
}

TEST_F(RankingClientTest, ScoreSendsCallMetadata) {
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  RankingClient::CallOptions call;
  call.metadata.emplace_back("x-trace-id", "abc123");
  ASSERT_TRUE(client->Score(Request("mini", 1), call).ok());
  EXPECT_EQ(fake_->service->last_trace_id(), "abc123");
}

TEST_F(RankingClientTest, ServerErrorsKeepCodeAndMessage) {
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  auto invalid = client->Score(Request("error", 2));
  EXPECT_EQ(invalid.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(invalid.status().message(), testing::FakeRankingService::kErrorMessage);

  auto busy = client->Score(Request("busy", 2));
  EXPECT_EQ(busy.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(busy.status().message(), "queue full");

  auto missing = client->Score(Request("nope", 2));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "model \"nope\" is not served");
}

TEST_F(RankingClientTest, CallDeadlineOverridesTheDefault) {
  auto client = NewClient();  // default deadline 1000 ms: longer than "slow"
  ASSERT_NE(client, nullptr);
  RankingClient::CallOptions call;
  call.deadline = absl::Milliseconds(50);
  const absl::Time start = absl::Now();
  auto response = client->Score(Request("slow", 1), call);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(400));
}

TEST_F(RankingClientTest, OptionsDeadlineApplies) {
  RankingClient::Options options = OptionsFor(fake_->target());
  options.deadline_ms = 50;
  auto client = NewClient(options);
  ASSERT_NE(client, nullptr);
  const absl::Time start = absl::Now();
  auto response = client->Score(Request("slow", 1));
  EXPECT_EQ(response.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(400));
  // A longer per-call deadline lets the same call finish.
  RankingClient::CallOptions call;
  call.deadline = absl::Seconds(5);
  EXPECT_TRUE(client->Score(Request("slow", 1), call).ok());
}

TEST_F(RankingClientTest, ResponseOverMaxMessageBytesFails) {
  RankingClient::Options options = OptionsFor(fake_->target());
  options.max_message_bytes = 1024;
  auto client = NewClient(options);
  ASSERT_NE(client, nullptr);
  EXPECT_TRUE(client->Score(Request("mini", 10)).ok());
  // 1000 scores are ~4 KB on the wire.
  auto response = client->Score(Request("mini", 1000));
  EXPECT_EQ(response.status().code(), absl::StatusCode::kResourceExhausted)
      << response.status();
}

TEST_F(RankingClientTest, UnreachableTargetIsUnavailable) {
  auto client = NewClient(OptionsFor(DeadTarget()));
  ASSERT_NE(client, nullptr);
  auto response = client->Score(Request("mini", 1));
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnavailable) << response.status();
  auto health = client->Health();
  EXPECT_EQ(health.status().code(), absl::StatusCode::kUnavailable) << health.status();
}

TEST_F(RankingClientTest, ConnectTimeoutFailsCreateForUnreachableTarget) {
  RankingClient::Options options = OptionsFor(DeadTarget());
  options.connect_timeout_ms = 200;
  const absl::Time start = absl::Now();
  auto client = RankingClient::Create(options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(client.status().message(), HasSubstr(options.target));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

TEST_F(RankingClientTest, ConnectTimeoutConnectsToLiveServer) {
  RankingClient::Options options = OptionsFor(fake_->target());
  options.connect_timeout_ms = 5000;
  options.dedicated_connection = true;
  options.keepalive_time_ms = 60000;
  auto client = NewClient(options);
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->channel()->GetState(false), GRPC_CHANNEL_READY);
  EXPECT_TRUE(client->Score(Request("mini", 1)).ok());
}

TEST_F(RankingClientTest, GetModelInfo) {
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  auto info = client->GetModelInfo("mini");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->name(), "mini");
  EXPECT_EQ(info->version(), 2);
  EXPECT_THAT(info->versions(), ElementsAre(1, 2));
  ASSERT_EQ(info->features_size(), 1);
  EXPECT_EQ(info->features(0).name(), "user_id");

  auto v1 = client->GetModelInfo("mini", 1);
  ASSERT_TRUE(v1.ok()) << v1.status();
  EXPECT_EQ(v1->version(), 1);

  auto missing = client->GetModelInfo("nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "model \"nope\" is not served");
}

// The async calls, through gRPC's callback API (async_threads 0) and through
// the client's own completion-queue threads (2).
class RankingClientAsyncTest : public RankingClientTest,
                               public ::testing::WithParamInterface<int> {
 protected:
  static std::unique_ptr<RankingClient> NewAsyncClient() {
    RankingClient::Options options = OptionsFor(fake_->target());
    options.async_threads = GetParam();
    return NewClient(options);
  }
};

INSTANTIATE_TEST_SUITE_P(Apis, RankingClientAsyncTest, ::testing::Values(0, 2),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == 0 ? std::string("CallbackApi")
                                                  : absl::StrCat(info.param, "Queues");
                         });

TEST_P(RankingClientAsyncTest, GetModelInfoAsyncAnswersAsTheBlockingCall) {
  auto client = NewAsyncClient();
  ASSERT_NE(client, nullptr);
  struct Case {
    const char* model;
    int64_t version;
  };
  const Case cases[] = {{"mini", 0}, {"mini", 1}, {"nope", 0}};
  std::vector<absl::StatusOr<rankd::v1::ModelInfo>> results(3);
  absl::BlockingCounter done(3);
  for (int i = 0; i < 3; ++i) {
    auto request = std::make_shared<rankd::v1::GetModelInfoRequest>();
    request->set_model(cases[i].model);
    request->set_version(cases[i].version);
    client->GetModelInfoAsync(request, [&results, &done, i](absl::StatusOr<rankd::v1::ModelInfo> r) {
      results[i] = std::move(r);
      done.DecrementCount();
    });
  }
  done.Wait();
  ASSERT_TRUE(results[0].ok()) << results[0].status();
  EXPECT_EQ(results[0]->name(), "mini");
  EXPECT_EQ(results[0]->version(), 2);
  ASSERT_TRUE(results[1].ok()) << results[1].status();
  EXPECT_EQ(results[1]->version(), 1);
  EXPECT_EQ(results[2].status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(results[2].status().message(), "model \"nope\" is not served");
}

TEST_F(RankingClientTest, VersionLabels) {
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  rankd::v1::GetModelInfoRequest request;
  request.set_model("mini");
  request.set_version_label("stable");
  auto stable = client->GetModelInfo(request);
  ASSERT_TRUE(stable.ok()) << stable.status();
  EXPECT_EQ(stable->version(), 1);
  EXPECT_EQ(stable->labels().at("canary"), 2);

  request.set_version_label("nope");
  auto missing = client->GetModelInfo(request);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "model \"mini\" has no version label \"nope\" (labels: canary, stable)");

  rankd::v1::ScoreRequest score = Request("mini", 1);
  score.set_version_label("canary");
  auto response = client->Score(score);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->version(), 2);
}

TEST_F(RankingClientTest, HealthAgainstGrpcsOwnHealthService) {
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  auto overall = client->Health();
  ASSERT_TRUE(overall.ok()) << overall.status();
  EXPECT_EQ(*overall, HealthCheckResponse::SERVING);
  EXPECT_EQ(*client->Health("mini"), HealthCheckResponse::SERVING);
  EXPECT_EQ(*client->Health("draining"), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(*client->Health("nope"), HealthCheckResponse::SERVICE_UNKNOWN);
  EXPECT_EQ(ServingStatusName(HealthCheckResponse::NOT_SERVING), "NOT_SERVING");
}

TEST_P(RankingClientAsyncTest, ScoreAsyncCompletesEveryCall) {
  auto client = NewAsyncClient();
  ASSERT_NE(client, nullptr);
  constexpr int kCalls = 64;
  std::vector<absl::StatusOr<rankd::v1::ScoreResponse>> results(kCalls);
  absl::BlockingCounter done(kCalls);
  for (int i = 0; i < kCalls; ++i) {
    // Versions 1..: the fake sleeps a version-dependent time, so the calls
    // overlap and complete out of order; every 8th call fails.
    const std::string model = i % 8 == 7 ? "error" : "mini";
    client->ScoreAsync(Request(model, 1 + i % 5, /*version=*/i + 1),
                       [&results, &done, i](absl::StatusOr<rankd::v1::ScoreResponse> result) {
                         results[i] = std::move(result);
                         done.DecrementCount();
                       });
  }
  done.Wait();
  for (int i = 0; i < kCalls; ++i) {
    if (i % 8 == 7) {
      EXPECT_EQ(results[i].status().code(), absl::StatusCode::kInvalidArgument) << i;
      EXPECT_EQ(results[i].status().message(), testing::FakeRankingService::kErrorMessage);
      continue;
    }
    ASSERT_TRUE(results[i].ok()) << i << ": " << results[i].status();
    EXPECT_EQ(results[i]->version(), i + 1);
    EXPECT_EQ(results[i]->scores_size(), 1 + i % 5);
  }
}

TEST_P(RankingClientAsyncTest, CallbacksRunWhereTheOptionsSay) {
  auto client = NewAsyncClient();
  ASSERT_NE(client, nullptr);
  constexpr int kCalls = 8;
  std::vector<std::string> threads(kCalls);
  absl::BlockingCounter done(kCalls);
  for (int i = 0; i < kCalls; ++i) {
    client->ScoreAsync(Request("mini", 1), [&threads, &done, i](absl::StatusOr<rankd::v1::ScoreResponse>) {
      char name[16] = {};
      pthread_getname_np(pthread_self(), name, sizeof(name));
      threads[i] = name;
      done.DecrementCount();
    });
  }
  done.Wait();
  for (int i = 0; i < kCalls; ++i) {
    if (GetParam() == 0) {
      EXPECT_NE(threads[i], "rankd-client") << i;
    } else {
      EXPECT_EQ(threads[i], "rankd-client") << i;
    }
  }
}

TEST_P(RankingClientAsyncTest, ScoreAsyncSharedRequestAndDeadline) {
  auto client = NewAsyncClient();
  ASSERT_NE(client, nullptr);
  auto request = std::make_shared<const rankd::v1::ScoreRequest>(Request("slow", 1));
  RankingClient::CallOptions call;
  call.deadline = absl::Milliseconds(50);
  absl::Notification done;
  absl::Status status;
  client->ScoreAsync(
      request,
      [&](absl::StatusOr<rankd::v1::ScoreResponse> result) {
        status = result.status();
        done.Notify();
      },
      call);
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_P(RankingClientAsyncTest, SerializedScoreAsyncAnswersAsTheMessage) {
  auto client = NewAsyncClient();
  ASSERT_NE(client, nullptr);
  // Each prepared request is sent 4 times at once; versions make the fake
  // answer out of order, "error" fails, "slow" passes the call's deadline.
  const std::vector<rankd::v1::ScoreRequest> messages = {
      Request("mini", 3, 2), Request("mini", 7, 5), Request("error", 1, 1), Request("slow", 1)};
  constexpr int kRepeats = 4;
  RankingClient::CallOptions call;
  call.deadline = absl::Milliseconds(200);
  std::vector<absl::StatusOr<rankd::v1::ScoreResponse>> results(messages.size() * kRepeats);
  absl::BlockingCounter done(static_cast<int>(results.size()));
  for (size_t m = 0; m < messages.size(); ++m) {
    auto prepared = SerializedScoreRequest::From(messages[m]);
    ASSERT_TRUE(prepared.ok()) << prepared.status();
    auto shared = std::make_shared<const SerializedScoreRequest>(*std::move(prepared));
    for (int r = 0; r < kRepeats; ++r) {
      const size_t slot = m * kRepeats + r;
      client->ScoreAsync(
          shared,
          [&results, &done, slot](absl::StatusOr<rankd::v1::ScoreResponse> result) {
            results[slot] = std::move(result);
            done.DecrementCount();
          },
          call);
    }
  }
  done.Wait();
  for (size_t m = 0; m < messages.size(); ++m) {
    const absl::StatusOr<rankd::v1::ScoreResponse> expected = client->Score(messages[m], call);
    for (int r = 0; r < kRepeats; ++r) {
      const auto& got = results[m * kRepeats + r];
      SCOPED_TRACE(absl::StrCat(messages[m].model(), " #", r));
      ASSERT_EQ(got.status().code(), expected.status().code()) << got.status();
      EXPECT_EQ(got.status().message(), expected.status().message());
      if (!expected.ok()) continue;
      EXPECT_EQ(got->version(), expected->version());
      EXPECT_EQ(got->scores_size(), messages[m].num_candidates());
      EXPECT_EQ(got->SerializeAsString(), expected->SerializeAsString());
    }
  }
  EXPECT_EQ(results[2 * kRepeats].status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(results[3 * kRepeats].status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_P(RankingClientAsyncTest, SerializedInferAsyncAnswersAsTheMessage) {
  auto client = NewAsyncClient();
  ASSERT_NE(client, nullptr);
  std::vector<inference::ModelInferRequest> messages(2);
  messages[0].set_model_name("mini");
  messages[0].set_model_version("2");
  messages[0].set_id("call-7");
  inference::ModelInferRequest::InferInputTensor* input = messages[0].add_inputs();
  input->set_name("dense");
  input->add_shape(3);
  input->add_shape(13);
  messages[1].set_model_name("error");
  for (const inference::ModelInferRequest& message : messages) {
    SCOPED_TRACE(message.model_name());
    auto prepared = SerializedInferRequest::From(message);
    ASSERT_TRUE(prepared.ok()) << prepared.status();
    absl::StatusOr<inference::ModelInferResponse> from_bytes, from_message;
    absl::BlockingCounter done(2);
    client->InferAsync(std::make_shared<const SerializedInferRequest>(*std::move(prepared)),
                       [&](absl::StatusOr<inference::ModelInferResponse> r) {
                         from_bytes = std::move(r);
                         done.DecrementCount();
                       });
    client->InferAsync(std::make_shared<const inference::ModelInferRequest>(message),
                       [&](absl::StatusOr<inference::ModelInferResponse> r) {
                         from_message = std::move(r);
                         done.DecrementCount();
                       });
    done.Wait();
    ASSERT_EQ(from_bytes.status(), from_message.status());
    if (!from_message.ok()) {
      EXPECT_EQ(from_bytes.status().code(), absl::StatusCode::kInvalidArgument);
      continue;
    }
    EXPECT_EQ(from_bytes->SerializeAsString(), from_message->SerializeAsString());
    EXPECT_EQ(from_bytes->id(), "call-7");
    EXPECT_EQ(from_bytes->outputs(0).shape_size(), 2);
  }
}

TEST_P(RankingClientAsyncTest, NullRequestsAreRefusedAtOnce) {
  auto client = NewAsyncClient();
  ASSERT_NE(client, nullptr);
  std::vector<absl::Status> got;
  client->ScoreAsync(std::shared_ptr<const rankd::v1::ScoreRequest>(),
                     [&got](absl::StatusOr<rankd::v1::ScoreResponse> r) { got.push_back(r.status()); });
  client->ScoreAsync(std::shared_ptr<const SerializedScoreRequest>(),
                     [&got](absl::StatusOr<rankd::v1::ScoreResponse> r) { got.push_back(r.status()); });
  client->GetModelInfoAsync(nullptr, [&got](absl::StatusOr<rankd::v1::ModelInfo> r) {
    got.push_back(r.status());
  });
  client->InferAsync(std::shared_ptr<const inference::ModelInferRequest>(),
                     [&got](absl::StatusOr<inference::ModelInferResponse> r) {
                       got.push_back(r.status());
                     });
  client->InferAsync(std::shared_ptr<const SerializedInferRequest>(),
                     [&got](absl::StatusOr<inference::ModelInferResponse> r) {
                       got.push_back(r.status());
                     });
  ASSERT_EQ(got.size(), 5u);  // each callback ran before its call returned
  for (const absl::Status& status : got) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(status.message(), "request: null");
  }
  EXPECT_EQ(client->in_flight(), 0);
}

TEST_P(RankingClientAsyncTest, NoCallStateOutlivesTheDestructor) {
  // Each callback holds a reference to `sentinel`; once the destructor has
  // returned, every call, its callback and its context (which holds the
  // channel) must be gone, so that a tool exiting right after destroying its
  // client has no gRPC object left on a completion thread.
  constexpr int kRounds = 30;
  constexpr int kCalls = 16;
  for (int round = 0; round < kRounds; ++round) {
    auto client = NewAsyncClient();
    ASSERT_NE(client, nullptr);
    auto sentinel = std::make_shared<int>(round);
    for (int i = 0; i < kCalls; ++i) {
      client->ScoreAsync(Request("mini", 1), [sentinel](absl::StatusOr<rankd::v1::ScoreResponse>) {});
    }
    client.reset();
    ASSERT_EQ(sentinel.use_count(), 1) << "round " << round;
  }
}

TEST_P(RankingClientAsyncTest, DestructorCancelsAsyncCallsInFlight) {
  auto client = NewAsyncClient();
  ASSERT_NE(client, nullptr);
  RankingClient::CallOptions call;
  call.deadline = absl::InfiniteDuration();
  constexpr int kCalls = 4;
  std::atomic<int> cancelled{0};
  std::atomic<int> finished{0};
  for (int i = 0; i < kCalls; ++i) {
    client->ScoreAsync(
        Request("slow", 1),
        [&](absl::StatusOr<rankd::v1::ScoreResponse> result) {
          if (result.status().code() == absl::StatusCode::kCancelled) ++cancelled;
          ++finished;
        },
        call);
  }
  EXPECT_EQ(client->in_flight(), kCalls);
  const absl::Time start = absl::Now();
  client.reset();
  // Every callback has run by the time the destructor returns.
  EXPECT_EQ(finished.load(), kCalls);
  EXPECT_EQ(cancelled.load(), kCalls);
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(400));
}

}  // namespace
}  // namespace rankd::client
