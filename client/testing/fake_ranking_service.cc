#include "client/testing/fake_ranking_service.h"

#include <chrono>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace rankd::client::testing {
namespace {

// The version a request names: `version`, else that of `label` (see the
// header), else 0 (newest). NOT_FOUND for an unknown label.
grpc::Status ResolveVersion(const std::string& model, int64_t version, const std::string& label,
                            int64_t* resolved) {
  *resolved = version;
  if (version != 0 || label.empty()) return grpc::Status::OK;
  if (label == "stable") {
    *resolved = 1;
  } else if (label == "canary") {
    *resolved = 2;
  } else {
    return grpc::Status(
        grpc::StatusCode::NOT_FOUND,
        "model \"" + model + "\" has no version label \"" + label + "\" (labels: canary, stable)");
  }
  return grpc::Status::OK;
}

}  // namespace

grpc::Status FakeRankingService::Score(grpc::ServerContext* context,
                                       const rankd::v1::ScoreRequest* request,
                                       rankd::v1::ScoreResponse* response) {
  ++score_calls_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = context->client_metadata().find("x-trace-id");
    last_trace_id_ = it == context->client_metadata().end()
                         ? ""
                         : std::string(it->second.data(), it->second.size());
  }
  const std::string& model = request->model();
  if (model == "error") return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, kErrorMessage);
  if (model == "busy") return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "queue full");
  if (model == "slow") {
    // In small steps, so a cancelled call (and server shutdown) is not held up.
    for (int i = 0; i < 50 && !context->IsCancelled(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  } else if (model != "mini") {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "model \"" + model + "\" is not served");
  }
  int64_t version = 0;
  if (grpc::Status s =
          ResolveVersion(model, request->version(), request->version_label(), &version);
      !s.ok()) {
    return s;
  }
  if (version > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(version * 7 % 13));
  }
  for (int i = 0; i < request->num_candidates(); ++i) {
    response->add_scores(static_cast<float>(i + 1) / 1024.0f);
  }
  response->set_model(model);
  response->set_version(version > 0 ? version : 1);
  return grpc::Status::OK;
}

grpc::Status FakeRankingService::GetModelInfo(grpc::ServerContext* /*context*/,
                                              const rankd::v1::GetModelInfoRequest* request,
                                              rankd::v1::ModelInfo* response) {
  if (request->model() != "mini") {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        "model \"" + request->model() + "\" is not served");
  }
  int64_t version = 0;
  if (grpc::Status s =
          ResolveVersion("mini", request->version(), request->version_label(), &version);
      !s.ok()) {
    return s;
  }
  if (version != 0 && version != 1 && version != 2) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        "model \"mini\" has no ready version " + std::to_string(version));
  }
  response->set_name("mini");
  response->set_version(version == 0 ? 2 : version);
  (*response->mutable_labels())["stable"] = 1;
  (*response->mutable_labels())["canary"] = 2;
  response->add_versions(1);
  response->add_versions(2);
  response->set_num_dense(13);
  auto* feature = response->add_features();
  feature->set_name("user_id");
  feature->set_table("t_user");
  feature->set_request_level(true);
  feature->set_dim(16);
  feature->set_num_rows(1000);
  feature->set_table_kind("STATIC");
  feature->set_pooling("SUM");
  feature->set_dtype("FP32");
  response->set_interaction("DOT");
  response->add_bottom_mlp(64);
  response->add_bottom_mlp(16);
  response->add_top_mlp(32);
  response->add_top_mlp(1);
  response->set_backend("cpu");
  return grpc::Status::OK;
}

std::string FakeRankingService::last_trace_id() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_trace_id_;
}

grpc::Status FakeInferenceService::ModelInfer(grpc::ServerContext* /*context*/,
                                              const inference::ModelInferRequest* request,
                                              inference::ModelInferResponse* response) {
  if (request->model_name() == "error") {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, FakeRankingService::kErrorMessage);
  }
  response->set_model_name(request->model_name());
  response->set_model_version(request->model_version());
  response->set_id(request->id());
  inference::ModelInferResponse::InferOutputTensor* out = response->add_outputs();
  out->set_name("scores");
  out->set_datatype("FP32");
  if (request->inputs_size() > 0) *out->mutable_shape() = request->inputs(0).shape();
  return grpc::Status::OK;
}

absl::StatusOr<FakeServer> StartFakeServer(int port) {
  // Process-wide switch, read by ServerBuilder::BuildAndStart.
  grpc::EnableDefaultHealthCheckService(true);
  FakeServer fake;
  fake.service = std::make_unique<FakeRankingService>();
  fake.inference = std::make_unique<FakeInferenceService>();
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(),
                           &fake.port);
  builder.RegisterService(fake.service.get());
  builder.RegisterService(fake.inference.get());
  fake.server = builder.BuildAndStart();
  if (fake.server == nullptr || fake.port == 0) {
    return absl::UnavailableError("cannot start the fake server on 127.0.0.1:" +
                                  std::to_string(port));
  }
  grpc::HealthCheckServiceInterface* health = fake.server->GetHealthCheckService();
  if (health == nullptr) return absl::InternalError("gRPC's default health service is off");
  health->SetServingStatus("", true);
  health->SetServingStatus("mini", true);
  health->SetServingStatus("draining", false);
  return fake;
}

}  // namespace rankd::client::testing
