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
// Thread-safe; each ModelInfer's state lives in its InferCall, deleted by its
// transport once the answer is written. ModelInfer's handler (AdmitInfer,
// NewInferCall, RunInfer) also serves the completion-queue front
// (server/ranking_cq_front.h), which takes ModelInfer off the callback API.
#ifndef RANKD_SERVER_KSERVE_SERVICE_H_
#define RANKD_SERVER_KSERVE_SERVICE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/request_validation.h"
#include "inference/grpc_predict_v2.grpc.pb.h"
#include "server/admitted_call.h"
#include "server/kserve_conversion.h"
#include "server/lifecycle/model_manager.h"
#include "server/message_pool.h"
#include "server/metrics.h"
#include "server/raw_messages.h"
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
    // Parsed ModelInfer requests kept to be parsed into again
    // (message_pool.h), as the Ranking service keeps its Score requests.
    MessagePool<inference::ModelInferRequest>::Options request_pool;
  };

  // One admitted ModelInfer call (admitted_call.h): the parsed request (the
  // engine request views it) and the response the workers write the scores
  // into. The request comes from the service's pool of parsed requests
  // (message_pool.h: parsed into again, its tensors' arrays and strings keep
  // their capacity) and goes back to it with the call. The response lives on
  // the call's arena: its parts (a message, a shape and a string per output)
  // are not each a heap allocation made on one thread and freed on another,
  // which contends in malloc as threads multiply. Transports derive from it
  // and implement Send.
  class InferCall : public AdmittedCall {
   public:
    using AdmittedCall::AdmittedCall;
    ~InferCall() override;

    inference::ModelInferRequest& request() { return *request_; }

    CallArena arena;
    inference::ModelInferResponse& response = *arena.Create<inference::ModelInferResponse>();
    KServeRequest view;

   private:
    friend class KServeService;
    // Set by NewInferCall; shared so that a call outliving the service still
    // has somewhere to give its request back.
    std::shared_ptr<MessagePool<inference::ModelInferRequest>> pool_;
    std::unique_ptr<inference::ModelInferRequest> request_;
    // The parsed request's memory (SpaceUsedLong), set once it is parsed;
    // -1 (a request that did not parse) is not kept.
    int64_t request_bytes_ = -1;
  };

  KServeService(const ModelManager* models, Metrics* metrics, RequestBudget* budget,
                Options options);

  // ModelInfer's handler, for any transport; the same life as
  // RankingService's Score: AdmitInfer (a refusal is counted; answer it with
  // its status), NewInferCall, then RunInfer, which answers exactly once.
  absl::StatusOr<RequestBudget::Hold> AdmitInfer(int64_t wire_bytes, absl::Time arrival);
  template <typename Call, typename... Extra>
  Call* NewInferCall(RequestBudget::Hold hold, grpc::ByteBuffer* response_wire,
                     absl::Time arrival, Extra&&... extra) {
    Call* call = new Call(std::move(hold), budget_->max_bytes(), response_wire, metrics_,
                          Metrics::Protocol::kKServe, arrival, std::forward<Extra>(extra)...);
    call->pool_ = request_pool_;
    call->request_ = request_pool_->Take();
    return call;
  }
  // Parses `request_wire` (emptying it), checks, routes and submits.
  void RunInfer(InferCall* call, grpc::ByteBuffer* request_wire, absl::Time deadline);

  // The callback API's methods.

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
  const ModelManager* models_;
  Metrics* metrics_;
  RequestBudget* budget_;
  const engine::RequestLimits limits_;
  const std::string platform_;
  const std::shared_ptr<MessagePool<inference::ModelInferRequest>> request_pool_;
};

}  // namespace rankd::server

#endif  // RANKD_SERVER_KSERVE_SERVICE_H_
