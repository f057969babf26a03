// rankd.v1.ModelControl (the admin API) over the gRPC synchronous API: every
// call maps onto the ModelManager, whose loads may take minutes, so it runs
// on the admin server's own threads and never on the public server's.
//
// Borrows the manager (outlives the admin gRPC server).
#ifndef RANKD_SERVER_MODEL_CONTROL_SERVICE_H_
#define RANKD_SERVER_MODEL_CONTROL_SERVICE_H_

#include "rankd/v1/model_control.grpc.pb.h"
#include "server/admin_auth.h"
#include "server/embedding_updates.h"
#include "server/lifecycle/model_manager.h"

namespace rankd::server {

class ModelControlService final : public rankd::v1::ModelControl::Service {
 public:
  // `update_listener` (may be null) observes applied embedding updates.
  // `auth` (may be null = every call allowed) checks each call first: a call
  // it refuses is answered UNAUTHENTICATED without touching any model.
  explicit ModelControlService(ModelManager* manager,
                               EmbeddingUpdateListener* update_listener = nullptr,
                               AdminAuth* auth = nullptr)
      : manager_(manager), update_listener_(update_listener), auth_(auth) {}

  grpc::Status ListModels(grpc::ServerContext* context, const rankd::v1::ListModelsRequest* request,
                          rankd::v1::ListModelsResponse* response) override;
  grpc::Status LoadModel(grpc::ServerContext* context, const rankd::v1::LoadModelRequest* request,
                         rankd::v1::LoadModelResponse* response) override;
  grpc::Status UnloadModel(grpc::ServerContext* context,
                           const rankd::v1::UnloadModelRequest* request,
                           rankd::v1::UnloadModelResponse* response) override;
  grpc::Status SetVersionLabel(grpc::ServerContext* context,
                               const rankd::v1::SetVersionLabelRequest* request,
                               rankd::v1::SetVersionLabelResponse* response) override;
  grpc::Status UpdateEmbeddings(grpc::ServerContext* context,
                                grpc::ServerReader<rankd::v1::EmbeddingUpdate>* reader,
                                rankd::v1::UpdateSummary* response) override;
  grpc::Status SaveSnapshot(grpc::ServerContext* context,
                            const rankd::v1::SaveSnapshotRequest* request,
                            rankd::v1::SaveSnapshotResponse* response) override;

 private:
  // OK when there is no AdminAuth or it admits the call.
  grpc::Status Authorize(const grpc::ServerContext& context) const;

  ModelManager* const manager_;
  EmbeddingUpdateListener* const update_listener_;
  AdminAuth* const auth_;  // may be null
};

}  // namespace rankd::server

#endif  // RANKD_SERVER_MODEL_CONTROL_SERVICE_H_
