#include "client/testing/fake_model_control_service.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace rankd::client::testing {
namespace {

using rankd::v1::VersionStatus;

grpc::Status Error(grpc::StatusCode code, const std::string& message) {
  return grpc::Status(code, message);
}

std::string Quoted(const std::string& s) { return absl::StrCat("\"", s, "\""); }

// A version as a load leaves it: READY with made-up timings and sizes, or
// FAILED for the model "broken".
VersionStatus Loaded(const std::string& name, int64_t version) {
  VersionStatus v;
  v.set_version(version);
  v.set_directory(absl::StrCat("/models/", name, "/", version));
  v.set_state_since_unix_ms(absl::ToUnixMillis(absl::Now()));
  if (name == "broken") {
    v.set_state(rankd::v1::FAILED);
    v.set_reason(FakeModelControlService::kBrokenReason);
    return v;
  }
  v.set_state(rankd::v1::READY);
  v.set_load_seconds(0.25 * static_cast<double>(version));
  v.set_warmup_seconds(0.125);
  v.set_device_bytes(version * (int64_t{64} << 20));
  v.set_host_bytes(int64_t{3} << 20);
  return v;
}

void Unloaded(VersionStatus* v) {
  v->set_state(rankd::v1::UNLOADED);
  v->set_device_bytes(0);
  v->set_host_bytes(0);
  v->set_state_since_unix_ms(absl::ToUnixMillis(absl::Now()));
}

}  // namespace

FakeModelControlService::FakeModelControlService() {
  Model& mini = models_["mini"];
  mini.repository = {1, 2, 3};
  mini.versions[1] = Loaded("mini", 1);
  mini.versions[2] = Loaded("mini", 2);
  mini.labels = {{"stable", 1}, {"canary", 2}};
  Model& broken = models_["broken"];
  broken.repository = {1};
  broken.versions[1] = Loaded("broken", 1);
  models_["slow"].repository = {1};
}

grpc::Status FakeModelControlService::Find(const std::string& name, Model** model) {
  if (name.empty()) return Error(grpc::StatusCode::INVALID_ARGUMENT, "model: must not be empty");
  auto it = models_.find(name);
  if (it == models_.end()) {
    std::vector<std::string> names;
    for (const auto& entry : models_) names.push_back(entry.first);
    return Error(grpc::StatusCode::NOT_FOUND,
                 absl::StrCat("model ", Quoted(name), " is not in the repository (models: ",
                              absl::StrJoin(names, ", "), ")"));
  }
  *model = &it->second;
  return grpc::Status::OK;
}

grpc::Status FakeModelControlService::CheckVersions(
    const std::string& name, const Model& model,
    const google::protobuf::RepeatedField<int64_t>& versions) {
  for (int64_t version : versions) {
    if (std::find(model.repository.begin(), model.repository.end(), version) ==
        model.repository.end()) {
      return Error(grpc::StatusCode::NOT_FOUND,
                   absl::StrCat("model ", Quoted(name), " has no version ", version,
                                " in the repository (versions: ",
                                absl::StrJoin(model.repository, ", "), ")"));
    }
  }
  return grpc::Status::OK;
}

rankd::v1::ModelStatus FakeModelControlService::Status(const std::string& name,
                                                       const Model& model) {
  rankd::v1::ModelStatus status;
  status.set_name(name);
  status.set_policy("all");
  for (const auto& [number, version] : model.versions) {
    VersionStatus* v = status.add_versions();
    *v = version;
    for (const auto& [label, target] : model.labels) {
      if (target == number) v->add_labels(label);
    }
  }
  for (const auto& [label, target] : model.labels) (*status.mutable_labels())[label] = target;
  return status;
}

grpc::Status FakeModelControlService::ListModels(grpc::ServerContext* /*context*/,
                                                 const rankd::v1::ListModelsRequest* request,
                                                 rankd::v1::ListModelsResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!request->model().empty()) {
    Model* model = nullptr;
    if (grpc::Status s = Find(request->model(), &model); !s.ok()) return s;
    *response->add_models() = Status(request->model(), *model);
    return grpc::Status::OK;
  }
  for (const auto& [name, model] : models_) *response->add_models() = Status(name, model);
  return grpc::Status::OK;
}

grpc::Status FakeModelControlService::LoadModel(grpc::ServerContext* context,
                                                const rankd::v1::LoadModelRequest* request,
                                                rankd::v1::LoadModelResponse* response) {
  if (request->model() == "slow") {
    // In small steps, so a cancelled call (and server shutdown) is not held up.
    for (int i = 0; i < 50 && !context->IsCancelled(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  Model* model = nullptr;
  if (grpc::Status s = Find(request->model(), &model); !s.ok()) return s;
  if (grpc::Status s = CheckVersions(request->model(), *model, request->versions()); !s.ok()) {
    return s;
  }
  std::vector<int64_t> versions(request->versions().begin(), request->versions().end());
  if (versions.empty()) versions = model->repository;  // policy "all"
  for (int64_t version : versions) model->versions[version] = Loaded(request->model(), version);
  *response->mutable_model() = Status(request->model(), *model);
  return grpc::Status::OK;
}

grpc::Status FakeModelControlService::UnloadModel(grpc::ServerContext* /*context*/,
                                                  const rankd::v1::UnloadModelRequest* request,
                                                  rankd::v1::UnloadModelResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  Model* model = nullptr;
  if (grpc::Status s = Find(request->model(), &model); !s.ok()) return s;
  if (grpc::Status s = CheckVersions(request->model(), *model, request->versions()); !s.ok()) {
    return s;
  }
  for (auto& [number, version] : model->versions) {
    const auto& asked = request->versions();
    if (asked.empty() || std::find(asked.begin(), asked.end(), number) != asked.end()) {
      Unloaded(&version);
    }
  }
  *response->mutable_model() = Status(request->model(), *model);
  return grpc::Status::OK;
}

grpc::Status FakeModelControlService::SetVersionLabel(
    grpc::ServerContext* /*context*/, const rankd::v1::SetVersionLabelRequest* request,
    rankd::v1::SetVersionLabelResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  Model* model = nullptr;
  if (grpc::Status s = Find(request->model(), &model); !s.ok()) return s;
  if (request->label().empty()) {
    return Error(grpc::StatusCode::INVALID_ARGUMENT, "label: must not be empty");
  }
  if (request->version() < 0) {
    return Error(grpc::StatusCode::INVALID_ARGUMENT,
                 absl::StrCat("version: must be >= 0, got ", request->version()));
  }
  if (request->version() == 0) {
    model->labels.erase(request->label());
  } else {
    auto it = model->versions.find(request->version());
    if (it == model->versions.end() || it->second.state() != rankd::v1::READY) {
      std::vector<int64_t> ready;
      for (const auto& [number, version] : model->versions) {
        if (version.state() == rankd::v1::READY) ready.push_back(number);
      }
      const std::string state =
          it == model->versions.end()
              ? "not loaded"
              : absl::StrCat(rankd::v1::VersionState_Name(it->second.state()), ", not READY");
      return Error(grpc::StatusCode::FAILED_PRECONDITION,
                   absl::StrCat("model ", Quoted(request->model()), " version ", request->version(),
                                " is ", state, " (ready: ",
                                ready.empty() ? "none" : absl::StrJoin(ready, ", "), ")"));
    }
    model->labels[request->label()] = request->version();
  }
  *response->mutable_model() = Status(request->model(), *model);
  return grpc::Status::OK;
}

absl::StatusOr<FakeAdminServer> StartFakeAdminServer(int port) {
  FakeAdminServer fake;
  fake.service = std::make_unique<FakeModelControlService>();
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(),
                           &fake.port);
  builder.RegisterService(fake.service.get());
  fake.server = builder.BuildAndStart();
  if (fake.server == nullptr || fake.port == 0) {
    return absl::UnavailableError("cannot start the fake admin server on 127.0.0.1:" +
                                  std::to_string(port));
  }
  return fake;
}

}  // namespace rankd::client::testing
