// rankd.v1.Ranking over the gRPC callback API. Score validates the request
// against the model (nothing bad reaches the engine), queues it in the model
// version's batcher and answers from the worker thread that computed it; no
// gRPC thread ever waits for a batch.
//
// Each request holds the version it was routed to (a ModelManager::Find
// result) until it is answered, so a version being swapped out finishes every
// request it admitted before it is released.
//
// Borrows the manager and metrics (both outlive the gRPC server).
#ifndef RANKD_SERVER_RANKING_SERVICE_H_
#define RANKD_SERVER_RANKING_SERVICE_H_

#include <string>

#include "engine/request_validation.h"
#include "rankd/v1/ranking.grpc.pb.h"
#include "server/metrics.h"
#include "server/lifecycle/model_manager.h"

namespace rankd::server {

class RankingService final : public rankd::v1::Ranking::CallbackService {
 public:
  RankingService(const ModelManager* models, Metrics* metrics,
                 const engine::RequestLimits& limits, std::string backend)
      : models_(models), metrics_(metrics), limits_(limits), backend_(std::move(backend)) {}

  grpc::ServerUnaryReactor* Score(grpc::CallbackServerContext* context,
                                  const rankd::v1::ScoreRequest* request,
                                  rankd::v1::ScoreResponse* response) override;

  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const rankd::v1::GetModelInfoRequest* request,
                                         rankd::v1::ModelInfo* response) override;

 private:
  const ModelManager* models_;
  Metrics* metrics_;
  const engine::RequestLimits limits_;
  const std::string backend_;
};

}  // namespace rankd::server

#endif  // RANKD_SERVER_RANKING_SERVICE_H_
