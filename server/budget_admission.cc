#include "server/budget_admission.h"

namespace rankd::server {

absl::StatusOr<RequestBudget::Hold> AcquireBytes(RequestBudget* budget, Metrics* metrics,
                                                 int64_t bytes) {
  absl::StatusOr<RequestBudget::Hold> hold = budget->TryAcquire(bytes);
  if (!hold.ok()) {
    metrics->RecordRefused(hold.status().code() == absl::StatusCode::kUnavailable
                               ? "shutting_down"
                               : "inflight_bytes");
  }
  return hold;
}

absl::Status GrowBytes(RequestBudget::Hold* hold, int64_t bytes, int64_t max_bytes,
                       Metrics* metrics) {
  if (hold->Grow(bytes)) return absl::OkStatus();
  metrics->RecordRefused("inflight_bytes");
  return OverBudgetError(bytes, max_bytes);
}

}  // namespace rankd::server
