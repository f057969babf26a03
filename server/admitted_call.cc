#include "server/admitted_call.h"

#include <optional>

#include "absl/time/clock.h"
#include "server/budget_admission.h"
#include "server/status_mapping.h"

namespace rankd::server {

absl::StatusOr<RequestBudget::Hold> AdmitWireBytes(RequestBudget* budget, Metrics* metrics,
                                                   Metrics::Protocol protocol,
                                                   int64_t wire_bytes, absl::Time arrival) {
  absl::StatusOr<RequestBudget::Hold> hold = AcquireBytes(budget, metrics, wire_bytes);
  if (!hold.ok()) {
    metrics->RecordRequest("", 0, hold.status().code(), absl::Now() - arrival, protocol);
  }
  return hold;
}

grpc::ServerUnaryReactor* FinishRefused(grpc::CallbackServerContext* context,
                                        const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

void AdmittedCall::Answer(absl::string_view model, int64_t version, const absl::Status& status) {
  metrics_->RecordRequest(model, version, status.code(), absl::Now() - arrival_, protocol_);
  Send(ToGrpcStatus(status));
}

void AdmittedCall::RecordIntakeAndAnswer(const engine::RequestTiming& timing) const {
  // A request that never reached a batch (expired, cancelled) has no batch end.
  std::optional<absl::Duration> answer;
  if (timing.compute > absl::ZeroDuration()) {
    answer = absl::Now() - (timing.enqueue_time + timing.total);
  }
  metrics_->RecordOutsideBatcher(served->name(), timing.enqueue_time - arrival_, answer);
}

void AdmittedCall::Refuse(absl::string_view reason, absl::string_view model, int64_t version,
                          const absl::Status& status) {
  metrics_->RecordRefused(reason);
  Answer(model, version, status);
}

bool AdmittedCall::GrowOrRefuse(int64_t bytes, absl::string_view model, int64_t version) {
  absl::Status grown = GrowBytes(&hold, bytes, max_bytes_, metrics_);
  if (grown.ok()) return true;
  Answer(model, version, grown);
  return false;
}

void AdmittedCall::AnswerServed(const absl::Status& status) {
  // The version is let go of before the answer: once answered, the call may
  // be deleted, and an unloading version should not wait for gRPC's OnDone.
  std::shared_ptr<ServedVersion> version = std::move(served);
  Answer(version->name(), version->version(), status);
}

}  // namespace rankd::server
