#include "loadtest/slo/slo_verdict.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace rankd::loadtest {

void JudgeStep(const SloCriteria& slo, StepResult* s) {
  if (slo.latency_ms <= 0) return;
  const double bound_us = slo.latency_ms * 1000;
  const double error_ratio = s->completed > 0 ? static_cast<double>(s->errors) / s->completed : 1;
  std::vector<std::string> why;
  if (s->completed == 0) why.push_back("no answers");
  if (s->latency.slo_percentile_us > bound_us) {
    why.push_back(absl::StrFormat("p%g %.3f ms > %g ms", slo.percentile,
                                  s->latency.slo_percentile_us / 1000, slo.latency_ms));
  }
  if (error_ratio > slo.max_error_ratio) {
    why.push_back(absl::StrFormat("errors %.3g%% > %.3g%%", error_ratio * 100,
                                  slo.max_error_ratio * 100));
  }
  s->slo_pass = why.empty();
  s->slo_reason = why.empty() ? absl::StrFormat("p%g %.3f ms <= %g ms, errors %.3g%%",
                                                slo.percentile, s->latency.slo_percentile_us / 1000,
                                                slo.latency_ms, error_ratio * 100)
                              : absl::StrJoin(why, "; ");
  // With fewer than 1 / (1 - q) answers the q-th percentile is the max.
  const double tail = 1.0 - slo.percentile / 100.0;
  if (s->completed > 0 && tail > 0 && s->completed * tail < 1.0 - 1e-9) {
    absl::StrAppend(&s->slo_reason,
                    absl::StrFormat(" (only %d answers: p%g is their max; use a longer --duration_s)",
                                    s->completed, slo.percentile));
  }
  if (!why.empty() && s->client_behind) {
    absl::StrAppend(&s->slo_reason, " (the client fell behind its schedule: its lag counts)");
  }
}

}  // namespace rankd::loadtest
