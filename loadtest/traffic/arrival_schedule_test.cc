#include "loadtest/traffic/arrival_schedule.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace rankd::loadtest {
namespace {

TEST(ArrivalScheduleTest, ConstantIsEvenlySpacedWithoutDrift) {
  ArrivalSchedule::Options o;
  o.rate_per_s = 3000;  // 333333.33 ns: rounding must not accumulate
  auto s = ArrivalSchedule::Create(o);
  ASSERT_TRUE(s.ok()) << s.status();
  int64_t prev = -1;
  for (int i = 0; i < 3000; ++i) {
    const int64_t t = s->Next();
    if (i == 0) {
      EXPECT_EQ(t, 0);
    }
    if (prev >= 0) {
      EXPECT_NEAR(t - prev, 333333, 1);
    }
    prev = t;
  }
  EXPECT_EQ(s->Next(), 1'000'000'000);  // arrival 3000: exactly 1 s
}

TEST(ArrivalScheduleTest, ConstantPhaseShifts) {
  ArrivalSchedule::Options o;
  o.rate_per_s = 1000;
  o.phase_ns = 250'000;
  auto s = ArrivalSchedule::Create(o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->Next(), 250'000);
  EXPECT_EQ(s->Next(), 1'250'000);
}

TEST(ArrivalScheduleTest, PoissonHasTheMeanRateAndExponentialGaps) {
  ArrivalSchedule::Options o;
  o.arrival = Arrival::kPoisson;
  o.rate_per_s = 2000;
  o.seed = 42;
  auto s = ArrivalSchedule::Create(o);
  ASSERT_TRUE(s.ok());
  const int n = 200000;
  std::vector<double> gaps;
  int64_t prev = 0;
  for (int i = 0; i < n; ++i) {
    const int64_t t = s->Next();
    ASSERT_GE(t, prev);
    gaps.push_back((t - prev) / 1e9);
    prev = t;
  }
  // n arrivals over ~100 s: the mean rate within 1% (sd of the count ~0.22%).
  EXPECT_NEAR(n / (prev / 1e9), 2000, 20);
  // Exponential: sd = mean, and P(gap > mean) = 1/e.
  double mean = 0, var = 0;
  for (double g : gaps) mean += g;
  mean /= n;
  int above = 0;
  for (double g : gaps) {
    var += (g - mean) * (g - mean);
    above += g > mean;
  }
  EXPECT_NEAR(std::sqrt(var / n) / mean, 1.0, 0.02);
  EXPECT_NEAR(static_cast<double>(above) / n, std::exp(-1.0), 0.005);
}

TEST(ArrivalScheduleTest, SameSeedSameTimes) {
  ArrivalSchedule::Options o;
  o.arrival = Arrival::kPoisson;
  o.seed = 9;
  auto a = ArrivalSchedule::Create(o);
  auto b = ArrivalSchedule::Create(o);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a->Next(), b->Next());
}

TEST(ArrivalScheduleTest, RejectsBadOptions) {
  ArrivalSchedule::Options o;
  o.rate_per_s = 0;
  EXPECT_FALSE(ArrivalSchedule::Create(o).ok());
  o.rate_per_s = std::nan("");
  EXPECT_FALSE(ArrivalSchedule::Create(o).ok());
  o.rate_per_s = 1;
  o.phase_ns = -1;
  EXPECT_FALSE(ArrivalSchedule::Create(o).ok());
  EXPECT_EQ(ParseArrival("poisson").value(), Arrival::kPoisson);
  auto bad = ParseArrival("bursty");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--arrival"), std::string::npos);
}

}  // namespace
}  // namespace rankd::loadtest
