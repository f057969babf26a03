// rankd.v1.ModelControl (the admin API) over the gRPC synchronous API: every
// call maps onto the ModelManager, whose loads may take minutes, so it runs
// on the admin server's own threads and never on the public server's.
//
// Borrows the manager (outlives the admin gRPC server).
#ifndef RANKD_SERVER_MODEL_CONTROL_SERVICE_H_
#define RANKD_SERVER_MODEL_CONTROL_SERVICE_H_

#include "rankd/v1/model_control.grpc.pb.h"
#include "server/embedding_updates.h"
#include "server/lifecycle/model_manager.h"

namespace rankd::server {

class ModelControlService final : public rankd::v1::ModelControl::Service {
 public:
  // `update_listener` (may be null) observes applied embedding updates.
  explicit ModelControlService(ModelManager* manager,
                               EmbeddingUpdateListener* update_listener = nullptr)
      : manager_(manager), update_listener_(update_listener) {}

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
  ModelManager* const manager_;
  EmbeddingUpdateListener* const update_listener_;
};

}  // namespace rankd::server

#endif  // RANKD_SERVER_MODEL_CONTROL_SERVICE_H_
