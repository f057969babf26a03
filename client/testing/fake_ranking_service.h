// An in-process stand-in for rankd's gRPC surface, for client tests: the
// Ranking service with scripted behaviour per model name, a KServe ModelInfer
// that echoes, and gRPC's built-in health service. Never used in production
// code.
#ifndef RANKD_CLIENT_TESTING_FAKE_RANKING_SERVICE_H_
#define RANKD_CLIENT_TESTING_FAKE_RANKING_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/server.h"
#include "inference/grpc_predict_v2.grpc.pb.h"
#include "rankd/v1/ranking.grpc.pb.h"

namespace rankd::client::testing {

// Behaviour by ScoreRequest.model:
//   "mini"  scores[i] = (i + 1) / 1024 for i < num_candidates (exact in
//           float), echoes model, version = request version or 1. A request
//           version > 0 first sleeps (version * 7) % 13 ms, so calls complete
//           out of order.
//   "error" INVALID_ARGUMENT "dense: NaN at index 3"
//   "busy"  RESOURCE_EXHAUSTED "queue full"
//   "slow"  sleeps 500 ms (returns early if the call is cancelled), then as mini
//   other   NOT_FOUND "model \"<name>\" is not served"
// Version labels (version 0 and a version_label): "stable" = 1, "canary" = 2;
// another label is NOT_FOUND 'model "mini" has no version label "x" (labels:
// canary, stable)'. They are fixed: the fake admin service's SetVersionLabel
// (fake_model_control_service.h) does not change them.
// GetModelInfo knows "mini" only (versions 1 and 2, 13 dense features, the
// labels above).
class FakeRankingService final : public rankd::v1::Ranking::Service {
 public:
  static constexpr char kErrorMessage[] = "dense: NaN at index 3";

  grpc::Status Score(grpc::ServerContext* context, const rankd::v1::ScoreRequest* request,
                     rankd::v1::ScoreResponse* response) override;
  grpc::Status GetModelInfo(grpc::ServerContext* context,
                            const rankd::v1::GetModelInfoRequest* request,
                            rankd::v1::ModelInfo* response) override;

  int64_t score_calls() const { return score_calls_.load(); }
  // Metadata value "x-trace-id" of the last Score call.
  std::string last_trace_id() const;

 private:
  std::atomic<int64_t> score_calls_{0};
  mutable std::mutex mu_;
  std::string last_trace_id_;
};

// KServe v2 ModelInfer by model_name: "error" INVALID_ARGUMENT (the Score
// error's message); any other echoes model_name, model_version and id, with
// one FP32 output "scores" of the first input's shape, raw contents empty.
class FakeInferenceService final : public inference::GRPCInferenceService::Service {
 public:
  grpc::Status ModelInfer(grpc::ServerContext* context, const inference::ModelInferRequest* request,
                          inference::ModelInferResponse* response) override;
};

// A started server with the fake Ranking and KServe services and gRPC's
// health service (SERVING for "" and "mini", NOT_SERVING for "draining").
struct FakeServer {
  std::unique_ptr<FakeRankingService> service;
  std::unique_ptr<FakeInferenceService> inference;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::string target() const { return "127.0.0.1:" + std::to_string(port); }
};

// Listens on 127.0.0.1:`port` (0 = a free port chosen by the OS).
absl::StatusOr<FakeServer> StartFakeServer(int port = 0);

}  // namespace rankd::client::testing

#endif  // RANKD_CLIENT_TESTING_FAKE_RANKING_SERVICE_H_
