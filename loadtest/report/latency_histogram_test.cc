#include "loadtest/report/latency_histogram.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace rankd::loadtest {
namespace {

// The nearest-rank percentile of sorted samples, as the histogram defines it.
int64_t Exact(const std::vector<int64_t>& sorted, double q) {
  int64_t rank = static_cast<int64_t>(std::ceil(q / 100.0 * sorted.size() - 1e-9));
  rank = std::clamp<int64_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

TEST(LatencyHistogramTest, BucketsTileTheRangeWithBoundedWidth) {
  int64_t expected_lower = 0;
  for (int b = 0; b < LatencyHistogram::NumBuckets(); ++b) {
    const int64_t lo = LatencyHistogram::BucketLower(b);
    const int64_t hi = LatencyHistogram::BucketUpper(b);
    ASSERT_EQ(lo, expected_lower) << "bucket " << b;
    ASSERT_LE(lo, hi);
    ASSERT_EQ(LatencyHistogram::BucketOf(lo), b);
    ASSERT_EQ(LatencyHistogram::BucketOf(hi), b);
    if (lo >= 256) {
      ASSERT_LE(static_cast<double>(hi - lo + 1) / lo, 1.0 / 128) << "bucket " << b;
    }
    expected_lower = hi + 1;
  }
  EXPECT_EQ(expected_lower, LatencyHistogram::kMaxValue + 1);
}

TEST(LatencyHistogramTest, EmptyIsZero) {
  LatencyHistogram h;
  EXPECT_EQ(h.count(), 0);
  EXPECT_EQ(h.Percentile(99), 0);
  EXPECT_EQ(h.max(), 0);
  EXPECT_EQ(h.mean(), 0);
}

TEST(LatencyHistogramTest, SmallValuesAreExact) {
  LatencyHistogram h;
  std::vector<int64_t> v;
  for (int i = 0; i < 256; ++i) {
    h.Record(255 - i);
    v.push_back(i);
  }
  for (double q : {0.0, 1.0, 25.0, 50.0, 90.0, 99.0, 99.9, 100.0}) {
    EXPECT_EQ(h.Percentile(q), Exact(v, q)) << "q " << q;
  }
}

// Log-normal latencies from 20 us to seconds, in ns, against exact sorted samples.
TEST(LatencyHistogramTest, PercentilesWithinRelativeErrorOfExact) {
  for (uint64_t seed : {1, 2, 3}) {
    std::mt19937_64 rng(seed);
    std::lognormal_distribution<double> dist(std::log(300e3), 1.5);
    LatencyHistogram h;
    std::vector<int64_t> v;
    for (int i = 0; i < 200000; ++i) {
      const int64_t x = static_cast<int64_t>(dist(rng));
      h.Record(x);
      v.push_back(std::min(x, LatencyHistogram::kMaxValue));
    }
    std::sort(v.begin(), v.end());
    EXPECT_EQ(h.min(), v.front());
    EXPECT_EQ(h.max(), v.back());
    for (double q : {0.0, 1.0, 10.0, 50.0, 75.0, 90.0, 99.0, 99.9, 99.99, 100.0}) {
      const double exact = static_cast<double>(Exact(v, q));
      const double got = static_cast<double>(h.Percentile(q));
      EXPECT_LE(std::abs(got - exact), exact * LatencyHistogram::kMaxRelativeError + 0.5)
          << "seed " << seed << " q " << q << " exact " << exact << " got " << got;
    }
    double sum = 0;
    for (int64_t x : v) sum += x;
    EXPECT_NEAR(h.mean(), sum / v.size(), 1e-6 * h.mean());
  }
}

TEST(LatencyHistogramTest, MergeEqualsRecordingEverything) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> dist(0, 50'000'000);
  LatencyHistogram a, b, all;
  for (int i = 0; i < 10000; ++i) {
    const int64_t x = dist(rng);
    (i % 3 ? a : b).Record(x);
    all.Record(x);
  }
  a.Merge(b);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.min(), all.min());
  EXPECT_EQ(a.max(), all.max());
  for (double q : {1.0, 50.0, 99.0, 99.9}) EXPECT_EQ(a.Percentile(q), all.Percentile(q));
  LatencyHistogram empty;
  empty.Merge(a);
  EXPECT_EQ(empty.min(), a.min());
}

TEST(LatencyHistogramTest, ClampsOutOfRange) {
  LatencyHistogram h;
  h.Record(-5);
  h.Record(LatencyHistogram::kMaxValue * 4);
  EXPECT_EQ(h.min(), 0);
  EXPECT_EQ(h.max(), LatencyHistogram::kMaxValue);
  h.RecordN(1000, 3);
  EXPECT_EQ(h.count(), 5);
  h.Clear();
  EXPECT_EQ(h.count(), 0);
}

// A 500 ms stall among fast answers: the tail percentiles must show it.
TEST(LatencyHistogramTest, RareLargeValuesSetTheTail) {
  LatencyHistogram h;
  h.RecordN(300'000, 9800);          // 0.3 ms
  for (int i = 0; i < 200; ++i) h.Record(500'000'000 - i * 2'500'000);  // 500 .. 2.5 ms
  EXPECT_LE(h.Percentile(50), 301'200);
  EXPECT_GE(h.Percentile(99), 250'000'000 * (1 - LatencyHistogram::kMaxRelativeError));
  EXPECT_EQ(h.Percentile(100), 500'000'000);
}

}  // namespace
}  // namespace rankd::loadtest
