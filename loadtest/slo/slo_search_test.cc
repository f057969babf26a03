#include "loadtest/slo/slo_search.h"

#include <cmath>
#include <functional>
#include <vector>

#include "gtest/gtest.h"

namespace rankd::loadtest {
namespace {

// A fake system: an M/M/1-like p99 that explodes at `capacity` req/s.
struct FakeSystem {
  double capacity;
  double base_ms = 0.5;
  double P99Ms(double rate) const {
    if (rate >= capacity) return 1e9;
    return base_ms * std::log(100.0) / (1.0 - rate / capacity);
  }
};

struct Outcome {
  SloSearch search;
  std::vector<double> probes;
};

Outcome RunSearch(SloSearch::Options o, const std::function<bool(double)>& pass) {
  auto s = SloSearch::Create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  Outcome out{*s, {}};
  while (auto rate = out.search.NextRate()) {
    out.probes.push_back(*rate);
    out.search.Report(*rate, pass(*rate));
    if (out.probes.size() > 1000) break;
  }
  return out;
}

TEST(SloSearchTest, FindsTheKneeWithinPrecision) {
  for (double capacity : {900.0, 12345.0, 150000.0}) {
    FakeSystem sys{capacity};
    const double bound_ms = 5;
    // The exact answer: the rate where p99 = bound.
    const double exact = capacity * (1 - sys.base_ms * std::log(100.0) / bound_ms);
    SloSearch::Options o;
    o.start_rps = 100;
    o.precision = 0.02;
    Outcome r = RunSearch(o, [&](double rate) { return sys.P99Ms(rate) <= bound_ms; });
    ASSERT_TRUE(r.search.found()) << capacity;
    EXPECT_LE(r.search.best_rps(), exact);
    EXPECT_GE(r.search.best_rps(), exact * (1 - 0.02 - 1e-9)) << "capacity " << capacity;
    EXPECT_GT(r.search.lowest_failing_rps(), exact);
    EXPECT_LE(r.search.steps(), 25);
    EXPECT_NE(r.search.stop_reason().find("bracketed"), std::string::npos);
  }
}

TEST(SloSearchTest, GrowsGeometricallyThenBisects) {
  SloSearch::Options o;
  o.start_rps = 100;
  o.growth = 2;
  o.precision = 0.1;
  Outcome r = RunSearch(o, [](double rate) { return rate <= 1000; });
  ASSERT_GE(r.probes.size(), 6u);
  EXPECT_EQ(r.probes[0], 100);
  EXPECT_EQ(r.probes[1], 200);
  EXPECT_EQ(r.probes[2], 400);
  EXPECT_EQ(r.probes[3], 800);
  EXPECT_EQ(r.probes[4], 1600);  // first failure
  EXPECT_EQ(r.probes[5], 1200);  // midpoint of 800 and 1600
  EXPECT_GE(r.search.best_rps(), 1000 / 1.1);
  EXPECT_LE(r.search.best_rps(), 1000);
}

TEST(SloSearchTest, ShrinksWhenTheStartFails) {
  SloSearch::Options o;
  o.start_rps = 10000;
  o.precision = 0.05;
  Outcome r = RunSearch(o, [](double rate) { return rate <= 700; });
  EXPECT_EQ(r.probes[1], 5000);
  EXPECT_TRUE(r.search.found());
  EXPECT_LE(r.search.best_rps(), 700);
  EXPECT_GE(r.search.best_rps(), 700 / 1.05);
}

TEST(SloSearchTest, NotFoundWhenNothingPasses) {
  SloSearch::Options o;
  o.start_rps = 100;
  o.min_rps = 1;
  Outcome r = RunSearch(o, [](double) { return false; });
  EXPECT_FALSE(r.search.found());
  EXPECT_EQ(r.search.best_rps(), 0);
  EXPECT_LE(r.probes.back(), 2);  // 100, 50, 25, 12.5, 6.25, 3.125, 1.5625
  EXPECT_NE(r.search.stop_reason().find("failed at every rate"), std::string::npos);
}

TEST(SloSearchTest, StopsAtTheCap) {
  SloSearch::Options o;
  o.start_rps = 100;
  o.max_rps = 500;
  Outcome r = RunSearch(o, [](double) { return true; });
  EXPECT_EQ(r.probes, (std::vector<double>{100, 200, 400, 500}));
  EXPECT_EQ(r.search.best_rps(), 500);
  EXPECT_NE(r.search.stop_reason().find("cap"), std::string::npos);
}

TEST(SloSearchTest, StopsAfterMaxSteps) {
  SloSearch::Options o;
  o.start_rps = 100;
  o.max_steps = 3;
  Outcome r = RunSearch(o, [](double) { return true; });
  EXPECT_EQ(r.probes.size(), 3u);
  EXPECT_EQ(r.search.best_rps(), 400);
  EXPECT_NE(r.search.stop_reason().find("probes"), std::string::npos);
}

// A noisy system (a pass above a fail): the answer is still a rate that passed.
TEST(SloSearchTest, NonMonotoneOutcomesStillEndWithAPassingRate) {
  SloSearch::Options o;
  o.start_rps = 100;
  o.precision = 0.01;
  std::vector<double> passed;
  Outcome r = RunSearch(o, [&](double rate) {
    const bool pass = rate <= 1000 && !(rate > 600 && rate < 700);
    if (pass) passed.push_back(rate);
    return pass;
  });
  ASSERT_TRUE(r.search.found());
  EXPECT_NE(std::find(passed.begin(), passed.end(), r.search.best_rps()), passed.end());
}

// Rechecks: a failing probe is re-run and the majority decides.
TEST(SloSearchTest, RecheckOverturnsAOneOffFailure) {
  SloSearch::Options o;
  o.start_rps = 100;
  o.growth = 2;
  o.precision = 0.1;
  o.recheck = 2;
  // The first probe at 400 req/s stalls; every other probe follows the
  // system (capacity 1000).
  int probes_at_400 = 0;
  auto stall_once_at_400 = [&](double rate) {
    if (rate == 400 && probes_at_400++ == 0) return false;
    return rate <= 1000;
  };
  Outcome r = RunSearch(o, stall_once_at_400);
  // 100, 200, 400 (fail), 400 (pass), 400 (pass: 2 of 3), 800, 1600 ...
  ASSERT_GE(r.probes.size(), 7u);
  EXPECT_EQ((std::vector<double>(r.probes.begin(), r.probes.begin() + 6)),
            (std::vector<double>{100, 200, 400, 400, 400, 800}));
  EXPECT_EQ(r.search.overturned(), 1);
  ASSERT_TRUE(r.search.found());
  EXPECT_GE(r.search.best_rps(), 1000 / 1.1);
  EXPECT_LE(r.search.best_rps(), 1000);
  // Without rechecks the same stall ends the growth at 200.
  probes_at_400 = 0;
  o.recheck = 0;
  Outcome plain = RunSearch(o, stall_once_at_400);
  EXPECT_LT(plain.search.best_rps(), 400);
}

TEST(SloSearchTest, RecheckStopsAsSoonAsTheMajorityIsKnown) {
  SloSearch::Options o;
  o.start_rps = 100;
  o.precision = 0.1;
  o.recheck = 2;
  // A real limit: every probe above 1000 req/s fails, so each failing rate
  // costs two probes (fail, fail), never three.
  Outcome r = RunSearch(o, [](double rate) { return rate <= 1000; });
  int failing_probes = 0;
  for (double p : r.probes) failing_probes += p > 1000 ? 1 : 0;
  EXPECT_EQ(failing_probes % 2, 0);
  EXPECT_EQ(r.search.rechecks(), failing_probes / 2);
  EXPECT_EQ(r.search.overturned(), 0);
  EXPECT_GE(r.search.best_rps(), 1000 / 1.1);
  EXPECT_LE(r.search.best_rps(), 1000);
  EXPECT_GT(r.search.lowest_failing_rps(), 1000);
}

TEST(SloSearchTest, RecheckFailPassFailFails) {
  SloSearch::Options o;
  o.start_rps = 100;
  o.recheck = 2;
  o.max_steps = 4;
  // Every probe at 100 alternates fail, pass, fail: the rate fails, and the
  // search shrinks to 50.
  int n = 0;
  Outcome r = RunSearch(o, [&](double rate) { return rate == 100 ? (n++ % 2 == 1) : true; });
  EXPECT_EQ(r.probes, (std::vector<double>{100, 100, 100, 50}));
  EXPECT_EQ(r.search.best_rps(), 50);
  EXPECT_EQ(r.search.lowest_failing_rps(), 100);
}

TEST(SloSearchTest, RejectsBadOptions) {
  SloSearch::Options o;
  o.start_rps = 0;
  EXPECT_FALSE(SloSearch::Create(o).ok());
  o = {};
  o.growth = 1;
  EXPECT_FALSE(SloSearch::Create(o).ok());
  o = {};
  o.precision = 0;
  EXPECT_FALSE(SloSearch::Create(o).ok());
  o = {};
  o.max_rps = 50;  // below start
  EXPECT_FALSE(SloSearch::Create(o).ok());
  o = {};
  o.max_steps = 0;
  EXPECT_FALSE(SloSearch::Create(o).ok());
  o = {};
  o.recheck = -1;
  EXPECT_FALSE(SloSearch::Create(o).ok());
  o.recheck = 11;
  EXPECT_FALSE(SloSearch::Create(o).ok());
}

}  // namespace
}  // namespace rankd::loadtest
