#include "server/budget_admission.h"

#include <string>

#include "gtest/gtest.h"

namespace rankd::server {
namespace {

// rankd_requests_refused_total{reason} as exposed.
double Refused(Metrics& metrics, const std::string& reason) {
  for (const auto& family : metrics.registry().Collect()) {
    if (family.name != "rankd_requests_refused_total") continue;
    for (const auto& m : family.metric) {
      for (const auto& label : m.label) {
        if (label.name == "reason" && label.value == reason) return m.counter.value;
      }
    }
  }
  return -1;
}

TEST(BudgetAdmission, CountsEachRefusalByReason) {
  Metrics metrics("test", "cpu");
  RequestBudget budget({/*max_bytes=*/100});
  auto hold = AcquireBytes(&budget, &metrics, 60);
  ASSERT_TRUE(hold.ok()) << hold.status();
  EXPECT_EQ(Refused(metrics, "inflight_bytes"), 0);

  // Over the budget: refused and counted; the held bytes stay.
  auto over = AcquireBytes(&budget, &metrics, 41);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Refused(metrics, "inflight_bytes"), 1);

  // Growing within the budget is free; past it, OverBudgetError and a count.
  EXPECT_TRUE(GrowBytes(&*hold, 100, budget.max_bytes(), &metrics).ok());
  absl::Status grown = GrowBytes(&*hold, 101, budget.max_bytes(), &metrics);
  EXPECT_EQ(grown.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(grown.message(), OverBudgetError(101, 100).message());
  EXPECT_EQ(Refused(metrics, "inflight_bytes"), 2);
  EXPECT_EQ(budget.bytes_in_flight(), 100);

  // Draining: UNAVAILABLE, counted as shutting_down.
  budget.Close();
  auto closed = AcquireBytes(&budget, &metrics, 1);
  EXPECT_EQ(closed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Refused(metrics, "shutting_down"), 1);
  EXPECT_EQ(Refused(metrics, "inflight_bytes"), 2);
}

}  // namespace
}  // namespace rankd::server
