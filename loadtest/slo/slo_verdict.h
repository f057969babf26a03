// Whether one measured step meets an SLO: its latency percentile under a
// bound and its share of failed calls under a bound; the reason in words
// ("p99 5.063 ms > 5 ms; errors 0.3% > 0.1%"). Pure function of the step.
#ifndef RANKD_LOADTEST_SLO_SLO_VERDICT_H_
#define RANKD_LOADTEST_SLO_SLO_VERDICT_H_

#include "loadtest/report/report.h"

namespace rankd::loadtest {

struct SloCriteria {
  double latency_ms = 0;        // > 0: the bound; 0 = no SLO (JudgeStep does nothing)
  double percentile = 99;       // (0, 100]; the step's latency.slo_percentile_us must be it
  double max_error_ratio = 0.001;
};

// Sets step->slo_pass and step->slo_reason. A step without answers fails.
// The reason also says when the step had too few answers for the percentile
// to differ from the max, and when a failing step had the client behind.
void JudgeStep(const SloCriteria& slo, StepResult* step);

}  // namespace rankd::loadtest

#endif  // RANKD_LOADTEST_SLO_SLO_VERDICT_H_
