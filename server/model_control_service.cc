#include "server/model_control_service.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "engine/model/error_text.h"
#include "server/status_mapping.h"
#include "spdlog/spdlog.h"

namespace rankd::server {
namespace {

// Longer names cannot be directories of the repository (NAME_MAX), and are
// not echoed back in errors.
constexpr size_t kMaxModelNameBytes = 255;

// The model name and versions every mutating call needs, checked alike.
absl::Status CheckTarget(const std::string& model, const google::protobuf::RepeatedField<int64_t>& versions) {
  if (model.empty()) return absl::InvalidArgumentError("model: required");
  if (model.size() > kMaxModelNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("model: a name of ", model.size(),
                                                   " bytes; model names are at most ",
                                                   kMaxModelNameBytes));
  }
  for (int i = 0; i < versions.size(); ++i) {
    if (versions[i] <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("versions[", i, "]: must be > 0, got ", versions[i]));
    }
  }
  return absl::OkStatus();
}

// The answer of a call that changed a model: its status after the change
// in `response`'s model field, or the error.
template <typename Response>
grpc::Status AnswerModel(absl::StatusOr<rankd::v1::ModelStatus> model, Response* response) {
  if (!model.ok()) return ToGrpcStatus(model.status());
  *response->mutable_model() = *std::move(model);
  return grpc::Status::OK;
}

// ModelManager::Load or Unload.
using VersionChange = absl::StatusOr<rankd::v1::ModelStatus> (ModelManager::*)(
    const std::string& model, const std::vector<int64_t>& versions);

// LoadModel and UnloadModel (`rpc`, for the log): checks and logs the
// request, then applies `change` to its model and versions.
template <typename Request, typename Response>
grpc::Status ChangeVersions(ModelManager* manager, VersionChange change, const char* rpc,
                            const Request& request, Response* response) {
  if (absl::Status s = CheckTarget(request.model(), request.versions()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  spdlog::info("admin: {} {} versions [{}]", rpc, engine::TruncateForError(request.model()),
               absl::StrJoin(request.versions(), ","));
  std::vector<int64_t> versions(request.versions().begin(), request.versions().end());
  return AnswerModel((manager->*change)(request.model(), versions), response);
}

}  // namespace

grpc::Status ModelControlService::Authorize(const grpc::ServerContext& context) const {
  return auth_ == nullptr ? grpc::Status::OK : auth_->Check(context);
}

grpc::Status ModelControlService::ListModels(grpc::ServerContext* context,
                                             const rankd::v1::ListModelsRequest* request,
                                             rankd::v1::ListModelsResponse* response) {
  if (grpc::Status auth = Authorize(*context); !auth.ok()) return auth;
  auto list = manager_->List(request->model());
  if (!list.ok()) return ToGrpcStatus(list.status());
  *response = *std::move(list);
  return grpc::Status::OK;
}

grpc::Status ModelControlService::LoadModel(grpc::ServerContext* context,
                                            const rankd::v1::LoadModelRequest* request,
                                            rankd::v1::LoadModelResponse* response) {
  if (grpc::Status auth = Authorize(*context); !auth.ok()) return auth;
  return ChangeVersions(manager_, &ModelManager::Load, "LoadModel", *request, response);
}

grpc::Status ModelControlService::UnloadModel(grpc::ServerContext* context,
                                              const rankd::v1::UnloadModelRequest* request,
                                              rankd::v1::UnloadModelResponse* response) {
  if (grpc::Status auth = Authorize(*context); !auth.ok()) return auth;
  return ChangeVersions(manager_, &ModelManager::Unload, "UnloadModel", *request, response);
}

grpc::Status ModelControlService::SetVersionLabel(grpc::ServerContext* context,
                                                  const rankd::v1::SetVersionLabelRequest* request,
                                                  rankd::v1::SetVersionLabelResponse* response) {
  if (grpc::Status auth = Authorize(*context); !auth.ok()) return auth;
  if (request->model().empty()) return ToGrpcStatus(absl::InvalidArgumentError("model: required"));
  spdlog::info("admin: SetVersionLabel {} {} -> {}", engine::TruncateForError(request->model()),
               engine::TruncateForError(request->label()), request->version());
  return AnswerModel(manager_->SetLabel(request->model(), request->label(), request->version()),
                     response);
}

grpc::Status ModelControlService::UpdateEmbeddings(
    grpc::ServerContext* context, grpc::ServerReader<rankd::v1::EmbeddingUpdate>* reader,
    rankd::v1::UpdateSummary* response) {
  if (grpc::Status auth = Authorize(*context); !auth.ok()) return auth;
  EmbeddingUpdateStream stream(manager_, update_listener_);
  rankd::v1::EmbeddingUpdate message;
  int64_t applied = 0;
  const absl::Time start = absl::Now();
  while (reader->Read(&message)) {
    if (context->IsCancelled()) break;
    absl::Status s = stream.Apply(std::move(message));
    message.Clear();
    if (!s.ok()) {
      spdlog::warn("admin: UpdateEmbeddings from {} stopped after {} messages: {}",
                   context->peer(), applied, s.ToString());
      return ToGrpcStatus(absl::Status(
          s.code(), absl::StrCat(s.message(), " (", applied,
                                 " earlier messages of this stream were applied and stay)")));
    }
    ++applied;
  }
  *response = stream.Summary();
  if (applied > 0) {
    spdlog::info("admin: UpdateEmbeddings from {}: {} messages in {:.3f} s", context->peer(),
                 applied, absl::ToDoubleSeconds(absl::Now() - start));
  }
  return grpc::Status::OK;
}

grpc::Status ModelControlService::SaveSnapshot(grpc::ServerContext* context,
                                               const rankd::v1::SaveSnapshotRequest* request,
                                               rankd::v1::SaveSnapshotResponse* response) {
  if (grpc::Status auth = Authorize(*context); !auth.ok()) return auth;
  if (absl::Status s = CheckTarget(request->model(), google::protobuf::RepeatedField<int64_t>());
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  spdlog::info("admin: SaveSnapshot {} version {} -> {}", engine::TruncateForError(request->model()), request->version(),
               request->new_version());
  auto out = manager_->SaveSnapshotAndReconcile(request->model(), request->version(),
                                                request->new_version());
  if (!out.ok()) return ToGrpcStatus(out.status());
  *response = *std::move(out);
  return grpc::Status::OK;
}

}  // namespace rankd::server
