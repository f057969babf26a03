#include "kernels/cpu/split_tf32.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace rankd::kernels {
namespace {

uint32_t Bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

TEST(SplitTf32Test, BigIsTf32AndTheSumIsExact) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> exp(-140, 127);  // denormals to the largest
  for (int i = 0; i < 200000; ++i) {
    const float x = std::ldexp(mant(rng), exp(rng)) * (i % 2 ? -1.0f : 1.0f);
    if (!std::isfinite(x)) continue;
    float big, small;
    SplitTf32(x, &big, &small);
    ASSERT_EQ(Bits(big) & 0x1FFFu, 0u) << x;
    ASSERT_TRUE(std::isfinite(big)) << x;
    ASSERT_EQ(big + small, x) << x;  // exact: small is representable
    if (std::abs(x) >= std::numeric_limits<float>::min()) {  // normal: 10 mantissa bits kept
      ASSERT_LE(std::abs(small), std::abs(x) * std::ldexp(1.0f, -11)) << x;
    }
  }
}

TEST(SplitTf32Test, RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between TF32 neighbours 1 and 1 + 2^-10: ties to 1.
  float big, small;
  SplitTf32(1.0f + std::ldexp(1.0f, -11), &big, &small);
  EXPECT_EQ(big, 1.0f);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 and 1 + 2^-9: ties to the even 1 + 2^-9.
  SplitTf32(1.0f + 3 * std::ldexp(1.0f, -11), &big, &small);
  EXPECT_EQ(big, 1.0f + std::ldexp(1.0f, -9));
  // Just above halfway rounds up.
  SplitTf32(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20), &big, &small);
  EXPECT_EQ(big, 1.0f + std::ldexp(1.0f, -10));
}

TEST(SplitTf32Test, NonFiniteAndHugeValuesKeepBigAndZeroSmall) {
  const float inf = std::numeric_limits<float>::infinity();
  float big, small;
  SplitTf32(inf, &big, &small);
  EXPECT_EQ(big, inf);
  EXPECT_EQ(small, 0.0f);
  SplitTf32(-inf, &big, &small);
  EXPECT_EQ(big, -inf);
  SplitTf32(std::nanf(""), &big, &small);
  EXPECT_TRUE(std::isnan(big));
  EXPECT_EQ(small, 0.0f);
  // The largest float would round up to infinity: truncated instead.
  const float max = std::numeric_limits<float>::max();
  SplitTf32(max, &big, &small);
  EXPECT_TRUE(std::isfinite(big));
  EXPECT_EQ(big + small, max);
}

TEST(SplitTf32Test, ThreeTermProductIsNearlyFp32) {
  std::mt19937 rng(9);
  std::normal_distribution<float> d(0.0f, 1.0f);
  const int k = 511;  // 3k = 1533: padded to 1536 with zeros
  ASSERT_EQ(SplitTf32Width(k), 1536);
  std::vector<float> x(k), w(k), x3(SplitTf32Width(k), 7.0f), w3(SplitTf32Width(k), 7.0f);
  for (int j = 0; j < k; ++j) x[j] = d(rng), w[j] = d(rng);
  SplitTf32Activations(x.data(), k, 1, k, x3.data());
  SplitTf32Weights(w.data(), 1, k, w3.data());
  double exact = 0, three = 0, one = 0, scale = 0;
  for (int j = 0; j < k; ++j) {
    exact += double{x[j]} * w[j];
    scale += std::abs(double{x[j]} * w[j]);
    one += double{x3[j]} * w3[j];  // big . big: what a single TF32 pass sees
  }
  for (int j = 0; j < SplitTf32Width(k); ++j) three += double{x3[j]} * w3[j];
  for (int j = 3 * k; j < SplitTf32Width(k); ++j) {
    EXPECT_EQ(x3[j], 0.0f);
    EXPECT_EQ(w3[j], 0.0f);
  }
  const double three_err = std::abs(three - exact) / scale;
  const double one_err = std::abs(one - exact) / scale;
  EXPECT_LT(three_err, 1e-9);
  EXPECT_GT(one_err, 1e-8);  // a single pass is far off: the split is what buys it
  EXPECT_LT(three_err * 100, one_err);
}

}  // namespace
}  // namespace rankd::kernels
