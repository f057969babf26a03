// inference.GRPCInferenceService (KServe v2 / Open Inference Protocol) on
// the public port, beside rankd.v1.Ranking: ServerLive, ServerReady,
// ModelReady, ServerMetadata, ModelMetadata and ModelInfer. How a ranking
// model maps to tensors: server/kserve_conversion.h.
//
// ModelInfer takes the same path as Ranking.Score (server/ranking_service.h):
// admission by wire size, then by the parsed message's memory, against the
// budget shared with the Ranking service (one --max_inflight_request_bytes
// and one drain for both); the same limits and validation; the model
// version's batcher; the same metrics (rankd_requests_total and friends);
// answered from the worker thread that scored it. Every method parses its
// own request (raw methods), so bytes that are not the message get
// INVALID_ARGUMENT naming the type, like the Ranking service's.
//
// Readiness: live while the process serves; ready while it admits requests
// (not draining) and serves at least one model; a model (version) is ready
// when Ranking would route to it.
//
// Borrows the manager, metrics and budget (they outlive the gRPC server).
// Thread-safe; each ModelInfer's state lives in its reactor.
#ifndef RANKD_SERVER_KSERVE_SERVICE_H_
#define RANKD_SERVER_KSERVE_SERVICE_H_

#include <string>

#include "engine/request_validation.h"
#include "inference/grpc_predict_v2.grpc.pb.h"
#include "server/lifecycle/model_manager.h"
#include "server/metrics.h"
#include "server/request_budget.h"

namespace rankd::server {

namespace kserve_internal {
using inference::GRPCInferenceService;
// Every method raw (parsed by the service itself).
using RawBase = GRPCInferenceService::WithRawCallbackMethod_ServerLive<
    GRPCInferenceService::WithRawCallbackMethod_ServerReady<
        GRPCInferenceService::WithRawCallbackMethod_ModelReady<
            GRPCInferenceService::WithRawCallbackMethod_ServerMetadata<
                GRPCInferenceService::WithRawCallbackMethod_ModelMetadata<
                    GRPCInferenceService::WithRawCallbackMethod_ModelInfer<
                        GRPCInferenceService::Service>>>>>>;
}  // namespace kserve_internal

class KServeService final : public kserve_internal::RawBase {
 public:
  struct Options {
    // Server limits on top of the model's (--max_candidates, ...): the same
    // as the Ranking service's.
    engine::RequestLimits limits;
    // ModelMetadata's platform ("rankd_cpu" or "rankd_cuda").
    std::string platform = "rankd_cpu";
  };

  KServeService(const ModelManager* models, Metrics* metrics, RequestBudget* budget,
                Options options);

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;

 private:
  class InferCall;

  const ModelManager* models_;
  Metrics* metrics_;
  RequestBudget* budget_;
  const engine::RequestLimits limits_;
  const std::string platform_;
};

}  // namespace rankd::server

#endif  // RANKD_SERVER_KSERVE_SERVICE_H_
