#include "loadtest/slo/slo_verdict.h"

#include "gtest/gtest.h"

namespace rankd::loadtest {
namespace {

StepResult Step(double p99_us, int64_t completed, int64_t errors) {
  StepResult s;
  s.completed = completed;
  s.errors = errors;
  s.latency.slo_percentile_us = p99_us;
  return s;
}

TEST(JudgeStepTest, PassesUnderBothBounds) {
  StepResult s = Step(4900, 10000, 5);
  JudgeStep({5, 99, 0.001}, &s);
  ASSERT_TRUE(s.slo_pass.has_value());
  EXPECT_TRUE(*s.slo_pass);
  EXPECT_EQ(s.slo_reason, "p99 4.900 ms <= 5 ms, errors 0.05%");
}

TEST(JudgeStepTest, FailsOnLatencyErrorsOrNothing) {
  StepResult slow = Step(5063, 10000, 0);
  JudgeStep({5, 99, 0.001}, &slow);
  EXPECT_FALSE(*slow.slo_pass);
  EXPECT_EQ(slow.slo_reason, "p99 5.063 ms > 5 ms");

  StepResult failing = Step(1000, 1000, 3);
  JudgeStep({5, 99.9, 0.001}, &failing);
  EXPECT_FALSE(*failing.slo_pass);
  EXPECT_EQ(failing.slo_reason, "errors 0.3% > 0.1%");

  StepResult both = Step(9000, 1000, 500);
  both.client_behind = true;
  JudgeStep({5, 99, 0.001}, &both);
  EXPECT_EQ(both.slo_reason,
            "p99 9.000 ms > 5 ms; errors 50% > 0.1% (the client fell behind its schedule: its lag counts)");

  StepResult none = Step(0, 0, 0);
  JudgeStep({5, 99, 0.001}, &none);
  EXPECT_FALSE(*none.slo_pass);
  EXPECT_EQ(none.slo_reason.rfind("no answers", 0), 0u);
}

TEST(JudgeStepTest, SaysWhenThereAreTooFewAnswers) {
  StepResult s = Step(1000, 60, 0);
  JudgeStep({5, 99, 0.001}, &s);
  EXPECT_TRUE(*s.slo_pass);
  EXPECT_NE(s.slo_reason.find("only 60 answers: p99 is their max"), std::string::npos) << s.slo_reason;
  StepResult enough = Step(1000, 100, 0);
  JudgeStep({5, 99, 0.001}, &enough);
  EXPECT_EQ(enough.slo_reason.find("only"), std::string::npos);
}

TEST(JudgeStepTest, NoBoundNoVerdict) {
  StepResult s = Step(1e9, 10, 10);
  JudgeStep({0, 99, 0.001}, &s);
  EXPECT_FALSE(s.slo_pass.has_value());
  EXPECT_TRUE(s.slo_reason.empty());
}

}  // namespace
}  // namespace rankd::loadtest
