#include "server/ranking_cq_front.h"

#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "rankd/v1/ranking.grpc.pb.h"
#include "server/lifecycle/model_manager.h"
#include "inference/grpc_predict_v2.grpc.pb.h"
#include "server/kserve_service.h"
#include "server/metrics.h"
#include "server/ranking_service.h"

namespace rankd::server {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

// No version is ever loaded (the root is empty): every call is answered by
// the front and the handlers without an engine.
class NeverLoads final : public VersionLoader {
 public:
  absl::StatusOr<LoadedVersion> Load(const std::string&, int64_t, const std::string&,
                                     bool) override {
    return absl::InternalError("no version should load");
  }
};

// A server whose rankd.v1.Ranking and KServe v2 are on a RankingCqFront,
// with an empty model root.
class Served {
 public:
  explicit Served(RankingCqFront::Options front, int64_t max_inflight_request_bytes = 0)
      : root_(fs::path(::testing::TempDir()) / absl::StrCat("cq_front_", ++counter_)),
        metrics_("test", "cpu") {
    fs::create_directories(root_);
    ModelManager::Options mo;
    mo.model_root = root_.string();
    manager_ = *ModelManager::Create(mo, &loader_, &listener_, nullptr);
    EXPECT_TRUE(manager_->Start().ok());
    RankingService::Options so;
    so.max_inflight_request_bytes = max_inflight_request_bytes;
    service_ = std::make_unique<RankingService>(manager_.get(), &metrics_, so);
    kserve_ = std::make_unique<KServeService>(manager_.get(), &metrics_, service_->budget(),
                                              KServeService::Options{});
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    front_ = *RankingCqFront::Create(service_.get(), kserve_.get(), front, &builder);
    server_ = builder.BuildAndStart();
    front_->Start();
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                   grpc::InsecureChannelCredentials());
  }
  ~Served() {
    server_->Shutdown();  // waits for every call to be answered
    front_.reset();       // then the queues are shut down and drained
    fs::remove_all(root_);
  }

  std::shared_ptr<grpc::Channel> channel() { return channel_; }

 private:
  static inline int counter_ = 0;
  fs::path root_;
  NeverLoads loader_;
  ModelManager::Listener listener_;
  Metrics metrics_;
  std::unique_ptr<ModelManager> manager_;
  std::unique_ptr<RankingService> service_;
  std::unique_ptr<KServeService> kserve_;
  std::unique_ptr<RankingCqFront> front_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

// Score with bytes that are not a ScoreRequest, through a generic stub.
grpc::Status ScoreRawBytes(grpc::Channel* channel, const std::string& bytes) {
  grpc::GenericStub stub(channel->shared_from_this());
  grpc::ClientContext context;
  grpc::CompletionQueue cq;
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1);
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
      stub.PrepareUnaryCall(&context, "/rankd.v1.Ranking/Score", request, &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, &cq);
  void* tag = nullptr;
  bool ok = false;
  EXPECT_TRUE(cq.Next(&tag, &ok));
  return status;
}

TEST(RankingCqFrontTest, CreateRefusesBadOptionsNamingTheField) {
  grpc::ServerBuilder builder;
  struct Case {
    RankingCqFront::Options options;
    const char* field;
  };
  std::vector<Case> cases(3);
  cases[0].options.threads = 0;
  cases[0].field = "threads";
  cases[1].options.calls_ahead = 0;
  cases[1].field = "calls_ahead";
  cases[2].options.inline_bytes = -1;
  cases[2].field = "inline_bytes";
  for (const Case& c : cases) {
    absl::StatusOr<std::unique_ptr<RankingCqFront>> made =
        RankingCqFront::Create(nullptr, nullptr, c.options, &builder);
    ASSERT_FALSE(made.ok()) << c.field;
    EXPECT_EQ(made.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(made.status().message(), HasSubstr(c.field));
  }
}

TEST(RankingCqFrontTest, CreatedButNeverStartedShutsDown) {
  grpc::ServerBuilder builder;
  RankingCqFront::Options options;
  options.threads = 3;
  auto front = RankingCqFront::Create(nullptr, nullptr, options, &builder);
  ASSERT_TRUE(front.ok());
  front->reset();  // no server was built: the queues drain at once
}

// Many clients at once on few queues with few calls requested ahead (Score,
// GetModelInfo and ModelInfer on the queues; ServerLive on the callback
// API beside them), so
// calls keep arriving while their queue's thread handles others and each
// queue keeps requesting. inline_bytes 0 sends every Score through the parse
// threads; 1 MiB keeps them on the queue threads.
TEST(RankingCqFrontTest, AnswersEveryCallFromManyClients) {
  for (int64_t inline_bytes : {int64_t{0}, int64_t{1} << 20}) {
    SCOPED_TRACE(inline_bytes);
    RankingCqFront::Options options;
    options.threads = 2;
    options.calls_ahead = 2;
    options.inline_bytes = inline_bytes;
    Served served(options);
    constexpr int kClients = 6;
    constexpr int kCalls = 40;
    std::vector<std::thread> clients;
    std::vector<int> wrong(kClients, 0);
    for (int c = 0; c < kClients; ++c) {
      clients.emplace_back([&, c] {
        auto stub = rankd::v1::Ranking::NewStub(served.channel());
        auto kserve = inference::GRPCInferenceService::NewStub(served.channel());
        for (int i = 0; i < kCalls; ++i) {
          grpc::ClientContext score_context;
          rankd::v1::ScoreRequest request;
          request.set_model("absent");
          request.set_num_candidates(1);
          rankd::v1::ScoreResponse response;
          grpc::Status s = stub->Score(&score_context, request, &response);
          if (s.error_code() != grpc::StatusCode::NOT_FOUND) ++wrong[c];

          grpc::ClientContext info_context;
          rankd::v1::GetModelInfoRequest info_request;
          info_request.set_model("absent");
          rankd::v1::ModelInfo info;
          s = stub->GetModelInfo(&info_context, info_request, &info);
          if (s.error_code() != grpc::StatusCode::NOT_FOUND) ++wrong[c];

          grpc::ClientContext infer_context;
          inference::ModelInferRequest infer;
          infer.set_model_name("absent");
          inference::ModelInferResponse inferred;
          s = kserve->ModelInfer(&infer_context, infer, &inferred);
          if (s.error_code() != grpc::StatusCode::NOT_FOUND) ++wrong[c];

          grpc::ClientContext live_context;
          inference::ServerLiveResponse live;
          s = kserve->ServerLive(&live_context, inference::ServerLiveRequest(), &live);
          if (!s.ok() || !live.live()) ++wrong[c];

          s = ScoreRawBytes(served.channel().get(), std::string("\xff\xff\xff", 3));
          if (s.error_code() != grpc::StatusCode::INVALID_ARGUMENT ||
              s.error_message().find("not a valid rankd.v1.ScoreRequest") ==
                  std::string::npos) {
            ++wrong[c];
          }
        }
      });
    }
    for (std::thread& t : clients) t.join();
    for (int c = 0; c < kClients; ++c) EXPECT_EQ(wrong[c], 0) << "client " << c;
  }
}

TEST(RankingCqFrontTest, RefusesOverTheByteBudgetBeforeParsing) {
  RankingCqFront::Options options;
  options.threads = 1;
  Served served(options, /*max_inflight_request_bytes=*/16);
  auto stub = rankd::v1::Ranking::NewStub(served.channel());
  grpc::ClientContext context;
  rankd::v1::ScoreRequest request;
  request.set_model(std::string(64, 'm'));
  rankd::v1::ScoreResponse response;
  grpc::Status s = stub->Score(&context, request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("--max_inflight_request_bytes"));
}

}  // namespace
}  // namespace rankd::server
