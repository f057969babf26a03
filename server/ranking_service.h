// rankd.v1.Ranking: the handlers, and their gRPC callback API methods (the
// completion-queue front, server/ranking_cq_front.h, serves the same
// handlers through its own threads). Score validates the request
// against the model (nothing bad reaches the engine), queues it in the model
// version's batcher and answers from the worker thread that computed it; no
// gRPC thread ever waits for a batch.
//
// Raw methods: both RPCs are registered as raw (grpc::ByteBuffer) callback
// methods and parse their request themselves (server/raw_messages.h). With
// the generated typed handler, bytes that do not parse are answered by gRPC
// itself (UNIMPLEMENTED, empty message) before any code of ours runs, so the
// client learns nothing and no metric counts them. Here they get
// INVALID_ARGUMENT "request is not a valid rankd.v1.ScoreRequest" and count
// in rankd_requests_total{model="", code="INVALID_ARGUMENT"} and
// rankd_requests_refused_total{reason="malformed"}. The wire contract is
// unchanged (same method names and message types; reflection still
// describes them). Raw parsing also lets Score admit a request by its wire
// size before parsing it, and free the wire bytes as soon as it is parsed.
//
// Admission (server/request_budget.h): a Score request is charged its wire
// size, then the memory its parsed message and response hold, against
// --max_inflight_request_bytes; past it the request is answered
// RESOURCE_EXHAUSTED at once. The charge is returned when the RPC is done
// (its answer written), so StopAdmitting + WaitForAdmitted is a complete
// drain: nothing admitted is still being answered when it returns.
//
// Each request holds the version it was routed to (a ModelManager::Find
// result) until it is answered, so a version being swapped out finishes every
// request it admitted before it is released.
//
// Text a client sent (model names, labels, feature names) is quoted in error
// messages cut to engine::kMaxQuotedBytes.
//
// Borrows the manager and metrics (both outlive the gRPC server).
// Thread-safe; each Score call's state lives in its ScoreCall, deleted by its
// transport once the answer is written (the reactor: when gRPC calls OnDone).
#ifndef RANKD_SERVER_RANKING_SERVICE_H_
#define RANKD_SERVER_RANKING_SERVICE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/request_validation.h"
#include "rankd/v1/ranking.grpc.pb.h"
#include "server/admitted_call.h"
#include "server/lifecycle/model_manager.h"
#include "server/message_pool.h"
#include "server/metrics.h"
#include "server/raw_messages.h"
#include "server/request_budget.h"

namespace rankd::server {

class RankingService final
    : public rankd::v1::Ranking::WithRawCallbackMethod_Score<
          rankd::v1::Ranking::WithRawCallbackMethod_GetModelInfo<rankd::v1::Ranking::Service>> {
 public:
  struct Options {
    // Server limits on top of the model's (--max_candidates, ...).
    engine::RequestLimits limits;
    // Reported by GetModelInfo ("cpu" or "cuda").
    std::string backend = "cpu";
    // Most bytes of Score requests in flight (--max_inflight_request_bytes);
    // 0 = no limit.
    int64_t max_inflight_request_bytes = 0;
    // Parsed Score requests kept to be parsed into again (message_pool.h);
    // the default keeps up to 128 of at most 256 KiB (a few hundred
    // candidates of a model like Criteo's).
    MessagePool<rankd::v1::ScoreRequest>::Options request_pool;
  };

  // One admitted Score call (admitted_call.h): the parsed request (the
  // engine request points into it) and the response the workers write
  // into. The request comes from the service's pool of parsed requests
  // (message_pool.h: parsed into again, a request's repeated fields keep
  // their capacity) and goes back to it with the call; the response lives
  // on the call's arena. Transports derive from it and implement Send.
  class ScoreCall : public AdmittedCall {
   public:
    using AdmittedCall::AdmittedCall;
    ~ScoreCall() override;

    rankd::v1::ScoreRequest& request() { return *request_; }
    const rankd::v1::ScoreRequest& request() const { return *request_; }

    CallArena arena;
    rankd::v1::ScoreResponse& response = *arena.Create<rankd::v1::ScoreResponse>();

   private:
    friend class RankingService;
    // Set by NewScoreCall; the pool is shared so that a call outliving the
    // service still has somewhere to give its request back.
    std::shared_ptr<MessagePool<rankd::v1::ScoreRequest>> pool_;
    std::unique_ptr<rankd::v1::ScoreRequest> request_;
  };

  RankingService(const ModelManager* models, Metrics* metrics, Options options);

  // The handlers, for any transport. A Score call's life: AdmitScore with
  // its wire size (a refusal is counted; answer it with its status), then
  // NewScoreCall with the hold, then RunScore, which answers the call
  // exactly once (at once or from the worker that computes it).
  absl::StatusOr<RequestBudget::Hold> AdmitScore(int64_t wire_bytes, absl::Time arrival);
  // `Call` derives from ScoreCall; `extra` follows AdmittedCall's arguments
  // in its constructor.
  template <typename Call, typename... Extra>
  Call* NewScoreCall(RequestBudget::Hold hold, grpc::ByteBuffer* response_wire,
                     absl::Time arrival, Extra&&... extra) {
    Call* call = new Call(std::move(hold), budget_.max_bytes(), response_wire, metrics_,
                          Metrics::Protocol::kRankd, arrival, std::forward<Extra>(extra)...);
    call->pool_ = request_pool_;
    call->request_ = request_pool_->Take();
    return call;
  }
  // Parses `request_wire` (emptying it), checks, routes and submits.
  void RunScore(ScoreCall* call, grpc::ByteBuffer* request_wire, absl::Time deadline);
  // GetModelInfo: parses `request_wire` (emptying it) and writes the answer
  // into `response_wire` when the status is OK.
  grpc::Status AnswerModelInfo(grpc::ByteBuffer* request_wire,
                               grpc::ByteBuffer* response_wire) const;

  // The callback API's methods.

  grpc::ServerUnaryReactor* Score(grpc::CallbackServerContext* context,
                                  const grpc::ByteBuffer* request,
                                  grpc::ByteBuffer* response) override;

  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;

  // The SIGTERM drain, first step: from now on every new Score request is
  // answered UNAVAILABLE at once (retryable: the client's next attempt goes
  // to another replica); admitted ones are computed and answered.
  void StopAdmitting();
  // Waits until every admitted Score request is done (answer written) or
  // `deadline` passes; true when all are.
  bool WaitForAdmitted(absl::Time deadline) const;
  // Score requests admitted and not yet done.
  int64_t requests_in_flight() const { return budget_.requests_in_flight(); }
  // The admission budget, shared with the other front ends of the public
  // port (KServeService), so one drain and one byte cap cover them all.
  RequestBudget* budget() { return &budget_; }

 private:
  const ModelManager* models_;
  Metrics* metrics_;
  const engine::RequestLimits limits_;
  const std::string backend_;
  RequestBudget budget_;
  const std::shared_ptr<MessagePool<rankd::v1::ScoreRequest>> request_pool_;
};

}  // namespace rankd::server

#endif  // RANKD_SERVER_RANKING_SERVICE_H_
