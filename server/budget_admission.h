// Admission by bytes on the RequestBudget, with each refusal counted
// (rankd_refused_total{reason}): what every front end (gRPC Score, KServe
// ModelInfer, the HTTP handlers) does before it parses a request and as its
// parsed size becomes known.
//
// Threading: as RequestBudget and Metrics (thread-safe); a Hold is used by
// one thread at a time.
#ifndef RANKD_SERVER_BUDGET_ADMISSION_H_
#define RANKD_SERVER_BUDGET_ADMISSION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/metrics.h"
#include "server/request_budget.h"

namespace rankd::server {

// A hold of `bytes` on `budget`, or the refusal (UNAVAILABLE while draining,
// counted as "shutting_down"; RESOURCE_EXHAUSTED over the budget, counted as
// "inflight_bytes").
absl::StatusOr<RequestBudget::Hold> AcquireBytes(RequestBudget* budget, Metrics* metrics,
                                                 int64_t bytes);

// Raises `hold` to `bytes`; over the budget (`max_bytes`) counts the refusal
// as "inflight_bytes" and returns OverBudgetError.
absl::Status GrowBytes(RequestBudget::Hold* hold, int64_t bytes, int64_t max_bytes,
                       Metrics* metrics);

}  // namespace rankd::server

#endif  // RANKD_SERVER_BUDGET_ADMISSION_H_
