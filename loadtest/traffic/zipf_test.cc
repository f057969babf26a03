#include "loadtest/traffic/zipf.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace rankd::loadtest {
namespace {

// Observed frequencies against the exact Zipf pmf: ranks 0..9 one by one, then
// bins doubling in width up to n; each within 5 standard errors.
void CheckDistribution(int64_t n, double alpha, int draws) {
  auto z = ZipfSampler::Create(n, alpha);
  ASSERT_TRUE(z.ok()) << z.status();
  std::mt19937_64 rng(1234);
  std::vector<int64_t> counts(n, 0);
  for (int i = 0; i < draws; ++i) {
    const int64_t r = (*z)(rng);
    ASSERT_GE(r, 0);
    ASSERT_LT(r, n);
    ++counts[r];
  }
  std::vector<double> pmf(n);
  double norm = 0;
  for (int64_t k = 1; k <= n; ++k) norm += std::pow(static_cast<double>(k), -alpha);
  for (int64_t r = 0; r < n; ++r) pmf[r] = std::pow(static_cast<double>(r + 1), -alpha) / norm;
  int64_t lo = 0;
  while (lo < n) {
    const int64_t hi = lo < 10 ? lo + 1 : std::min(n, lo * 2);  // [lo, hi)
    double p = 0, observed = 0;
    for (int64_t r = lo; r < hi; ++r) {
      p += pmf[r];
      observed += static_cast<double>(counts[r]) / draws;
    }
    const double se = std::sqrt(p * (1 - p) / draws);
    EXPECT_NEAR(observed, p, 5 * se + 1e-6)
        << "n " << n << " alpha " << alpha << " ranks [" << lo << ", " << hi << ")";
    lo = hi;
  }
}

TEST(ZipfSamplerTest, MatchesThePmf) {
  CheckDistribution(100, 1.05, 1000000);
  CheckDistribution(1000, 1.2, 1000000);
  CheckDistribution(1000, 0.8, 1000000);  // alpha < 1
  CheckDistribution(50, 1.0, 500000);     // the log branch
  CheckDistribution(20, 3.0, 500000);     // steep
}

TEST(ZipfSamplerTest, UniformAtAlphaZero) { CheckDistribution(64, 0.0, 640000); }

TEST(ZipfSamplerTest, HugeRangeStaysInBounds) {
  auto z = ZipfSampler::Create(int64_t{1} << 40, 1.05);
  ASSERT_TRUE(z.ok());
  std::mt19937_64 rng(5);
  int64_t zeros = 0;
  for (int i = 0; i < 100000; ++i) {
    const int64_t r = (*z)(rng);
    ASSERT_GE(r, 0);
    ASSERT_LT(r, int64_t{1} << 40);
    zeros += r == 0;
  }
  EXPECT_GT(zeros, 0);  // rank 0 is the single most likely
}

TEST(ZipfSamplerTest, OneRow) {
  auto z = ZipfSampler::Create(1, 1.2);
  std::mt19937_64 rng(1);
  EXPECT_EQ((*z)(rng), 0);
}

TEST(ZipfSamplerTest, RejectsBadParameters) {
  EXPECT_FALSE(ZipfSampler::Create(0, 1.0).ok());
  EXPECT_FALSE(ZipfSampler::Create(10, -1.0).ok());
  EXPECT_FALSE(ZipfSampler::Create(10, std::nan("")).ok());
}

TEST(IdScatterTest, IsABijection) {
  for (int64_t rows : {1, 2, 3, 10, 97, 1000, 4096, 65537}) {
    IdScatter scatter(rows);
    std::set<int64_t> seen;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t id = scatter(r);
      ASSERT_GE(id, 0);
      ASSERT_LT(id, rows);
      seen.insert(id);
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), rows) << "rows " << rows;
  }
  IdScatter big(1000);
  EXPECT_NE(big(1) - big(0), 1);  // hot ranks are spread, not adjacent
}

}  // namespace
}  // namespace rankd::loadtest
