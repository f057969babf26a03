// rankd.v1.Ranking over the gRPC callback API. Score validates the request
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
// Thread-safe; each RPC's state lives in its reactor, deleted when gRPC calls
// OnDone.
#ifndef RANKD_SERVER_RANKING_SERVICE_H_
#define RANKD_SERVER_RANKING_SERVICE_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "engine/request_validation.h"
#include "rankd/v1/ranking.grpc.pb.h"
#include "server/lifecycle/model_manager.h"
#include "server/metrics.h"
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
  };

  RankingService(const ModelManager* models, Metrics* metrics, Options options);

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
  class ScoreReactor;

  const ModelManager* models_;
  Metrics* metrics_;
  const engine::RequestLimits limits_;
  const std::string backend_;
  RequestBudget budget_;
};

}  // namespace rankd::server

#endif  // RANKD_SERVER_RANKING_SERVICE_H_
