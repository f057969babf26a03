// rankd.v1.ModelControl (the admin API) over the gRPC synchronous API: every
// call maps onto the ModelManager, whose loads may take minutes, so it runs
// on the admin server's own threads and never on the public server's.
//
// Borrows the manager (outlives the admin gRPC server).
#ifndef RANKD_SERVER_MODEL_CONTROL_SERVICE_H_
#define RANKD_SERVER_MODEL_CONTROL_SERVICE_H_

#include "rankd/v1/model_control.grpc.pb.h"
#include "server/lifecycle/model_manager.h"

namespace rankd::server {

class ModelControlService final : public rankd::v1::ModelControl::Service {
 public:
  explicit ModelControlService(ModelManager* manager) : manager_(manager) {}

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

 private:
  ModelManager* const manager_;
};

}  // namespace rankd::server

#endif  // RANKD_SERVER_MODEL_CONTROL_SERVICE_H_
