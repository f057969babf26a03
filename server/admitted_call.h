// What the gRPC scoring front ends (rankd.v1.Ranking/Score and KServe v2
// ModelInfer) share: admission by wire size before parsing, one admitted call
// from its arrival to gRPC's OnDone, and its hand-off to the batcher.
//
// A handler's life: AdmitWireBytes (refused: answer on the default reactor
// with FinishRefused); new <Front>Reactor (derived from AdmittedCall); parse;
// GrowOrRefuse as the parsed request's size becomes known; route and
// convert; Submit. Every path ends in exactly one Answer, which counts the
// call in rankd_requests_total{protocol}.
//
// Transports: AdmittedCall knows nothing of how its answer is written; Send
// does that. ReactorCall<Call> answers through gRPC's callback API (a
// ServerUnaryReactor); the completion-queue front (server/ranking_cq_front.h)
// derives its own.
//
// Ownership: the transport deletes the call once its answer is written or
// the call is cancelled (the reactor in OnDone). It holds the admission hold
// (bytes return to the budget when it is deleted) and the routed version
// until the answer (the batcher may keep its callbacks longer).
// Threading: built and first used on the gRPC handler thread; Answer then
// runs on that thread or on a worker or completion thread, once; the
// transport sets `cancelled` from a gRPC thread at any time.
#ifndef RANKD_SERVER_ADMITTED_CALL_H_
#define RANKD_SERVER_ADMITTED_CALL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "engine/serving/model_instance.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "server/metrics.h"
#include "server/lifecycle/model_manager.h"
#include "server/raw_messages.h"
#include "server/request_budget.h"

namespace rankd::server {

// Admission of a call of `wire_bytes` on `budget`: its hold, or the refusal
// (RESOURCE_EXHAUSTED over the budget, UNAVAILABLE while draining), already
// counted (the refusal reason and rankd_requests_total{protocol}). Answer a
// refusal with FinishRefused.
absl::StatusOr<RequestBudget::Hold> AdmitWireBytes(RequestBudget* budget, Metrics* metrics,
                                                   Metrics::Protocol protocol,
                                                   int64_t wire_bytes, absl::Time arrival);

// Answers `status` on the context's default reactor and returns it.
grpc::ServerUnaryReactor* FinishRefused(grpc::CallbackServerContext* context,
                                        const absl::Status& status);

// One admitted call; front ends derive their call from it, adding the
// parsed request and the response the workers write into, and a transport
// (ReactorCall or their own) that implements Send.
class AdmittedCall {
 public:
  AdmittedCall(RequestBudget::Hold hold, int64_t max_bytes, grpc::ByteBuffer* response_wire,
               Metrics* metrics, Metrics::Protocol protocol, absl::Time arrival)
      : hold(std::move(hold)),
        response_wire(response_wire),
        max_bytes_(max_bytes),
        metrics_(metrics),
        protocol_(protocol),
        arrival_(arrival) {}

  virtual ~AdmittedCall() = default;
  AdmittedCall(const AdmittedCall&) = delete;
  AdmittedCall& operator=(const AdmittedCall&) = delete;

  // Counts the call and answers it. `this` may be gone when it returns.
  void Answer(absl::string_view model, int64_t version, const absl::Status& status);
  // Answer for a request refused for `reason` (rankd_refused_total).
  void Refuse(absl::string_view reason, absl::string_view model, int64_t version,
              const absl::Status& status);
  // Raises the hold to `bytes`; when that would pass the budget, refuses the
  // call (RESOURCE_EXHAUSTED naming the sizes) and returns false.
  bool GrowOrRefuse(int64_t bytes, absl::string_view model, int64_t version);
  // Answers with the routed version's name and number, letting go of the
  // version first.
  void AnswerServed(const absl::Status& status);
  // Records where a computed call's time went outside the batcher: from its
  // arrival to its queue, and from its batch's end to now, its answer
  // (rankd_intake_duration_seconds, rankd_answer_duration_seconds).
  void RecordIntakeAndAnswer(const engine::RequestTiming& timing) const;

  std::shared_ptr<ServedVersion> served;  // the routed version, until the answer
  RequestBudget::Hold hold;
  grpc::ByteBuffer* const response_wire;  // the transport's, valid until the call is deleted
  std::atomic<bool> cancelled{false};

 protected:
  // Writes the answer (`status`; when OK, the message in response_wire).
  // Called once; the transport may delete the call before it returns.
  virtual void Send(const grpc::Status& status) = 0;

 private:
  const int64_t max_bytes_;
  Metrics* const metrics_;
  const Metrics::Protocol protocol_;
  const absl::Time arrival_;
};

// A call answered through gRPC's callback API: its own reactor. gRPC calls
// OnCancel (from any thread) and, once the answer is written or the call
// is cancelled, OnDone, which deletes it.
template <typename Call>
class ReactorCall final : public Call, public grpc::ServerUnaryReactor {
 public:
  using Call::Call;
  void OnCancel() override { this->cancelled.store(true, std::memory_order_relaxed); }
  void OnDone() override { delete this; }

 private:
  void Send(const grpc::Status& status) override { Finish(status); }
};

// Hands `item` (request and scores filled in) to the routed version's batcher
// for `call`, whose `response` message the workers write into: the batcher
// polls the call's cancellation, and once the batch is done the response is
// serialized and the call answered. A refused submission (queue full,
// shutting down) is answered at once.
template <typename Call>
void SubmitAdmitted(Call* call, engine::QueuedRequest item) {
  engine::ModelInstance* model = &call->served->instance();
  item.cancelled = [call] { return call->cancelled.load(std::memory_order_relaxed); };
  item.done = [call](absl::Status status, const engine::RequestTiming& timing) {
    if (status.ok()) status = SerializeResponse(call->response, call->response_wire);
    call->RecordIntakeAndAnswer(timing);
    call->AnswerServed(status);
  };
  absl::Status submitted = model->Submit(std::move(item));
  if (!submitted.ok()) call->AnswerServed(submitted);
}

}  // namespace rankd::server

#endif  // RANKD_SERVER_ADMITTED_CALL_H_
