#include "kernels/cpu/split_bf16.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace rankd::kernels {
namespace {

TEST(SplitBf16Test, HiPlusLoIsWithin2ToMinus17) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  // lo stays a normal float (x >= 2^-100), up to the largest.
  std::uniform_int_distribution<int> exp(-100, 127);
  for (int i = 0; i < 200000; ++i) {
    const float x = std::ldexp(mant(rng), exp(rng)) * (i % 2 ? -1.0f : 1.0f);
    if (!std::isfinite(x)) continue;
    uint16_t hi, lo;
    SplitBf16(x, &hi, &lo);
    const float h = Bf16ToFloat(hi), l = Bf16ToFloat(lo);
    ASSERT_TRUE(std::isfinite(h)) << x;
    ASSERT_LE(std::abs(double{x} - h), std::abs(double{x}) * std::ldexp(1.0, -8)) << x;
    ASSERT_LE(std::abs(double{x} - h - l), std::abs(double{x}) * std::ldexp(1.0, -17)) << x;
  }
}

TEST(SplitBf16Test, RoundsToNearestEven) {
  // 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7: ties to 1.
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties to the even 1 + 2^-6.
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
  // Just above halfway rounds up.
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20))),
            1.0f + std::ldexp(1.0f, -7));
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(-2.5f)), -2.5f);  // exact values stay
}

TEST(SplitBf16Test, NonFiniteAndHugeValues) {
  const float inf = std::numeric_limits<float>::infinity();
  uint16_t hi, lo;
  SplitBf16(inf, &hi, &lo);
  EXPECT_EQ(Bf16ToFloat(hi), inf);
  EXPECT_EQ(lo, 0);
  SplitBf16(-inf, &hi, &lo);
  EXPECT_EQ(Bf16ToFloat(hi), -inf);
  // A NaN whose payload is only in the low 16 bits stays NaN.
  uint32_t nan_bits = 0x7F800001u;
  float nan;
  std::memcpy(&nan, &nan_bits, 4);
  SplitBf16(nan, &hi, &lo);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(hi)));
  EXPECT_EQ(lo, 0);
  // The largest float would round up to infinity: truncated instead, and lo
  // carries the rest.
  const float max = std::numeric_limits<float>::max();
  SplitBf16(max, &hi, &lo);
  EXPECT_TRUE(std::isfinite(Bf16ToFloat(hi)));
  EXPECT_NEAR(double{Bf16ToFloat(hi)} + Bf16ToFloat(lo), double{max}, double{max} * 1e-5);
}

TEST(SplitBf16Test, ThreeTermProductIsCloseToFp32) {
  std::mt19937 rng(9);
  std::normal_distribution<float> d(0.0f, 1.0f);
  const int k = 509;  // 3k = 1527: padded to 1528 with zeros
  ASSERT_EQ(SplitBf16Width(k), 1528);
  std::vector<float> x(k), w(k);
  std::vector<uint16_t> x3(SplitBf16Width(k), 0x4000), w3(SplitBf16Width(k), 0x4000);
  for (int j = 0; j < k; ++j) x[j] = d(rng), w[j] = d(rng);
  SplitBf16Activations(x.data(), k, 1, k, x3.data());
  SplitBf16Weights(w.data(), 1, k, w3.data());
  double exact = 0, three = 0, one = 0, scale = 0;
  for (int j = 0; j < k; ++j) {
    exact += double{x[j]} * w[j];
    scale += std::abs(double{x[j]} * w[j]);
    one += double{Bf16ToFloat(x3[j])} * Bf16ToFloat(w3[j]);  // hi . hi: a single bf16 pass
  }
  for (int j = 0; j < SplitBf16Width(k); ++j) {
    three += double{Bf16ToFloat(x3[j])} * Bf16ToFloat(w3[j]);
  }
  for (int j = 3 * k; j < SplitBf16Width(k); ++j) {
    EXPECT_EQ(x3[j], 0);
    EXPECT_EQ(w3[j], 0);
  }
  const double three_err = std::abs(three - exact) / scale;
  const double one_err = std::abs(one - exact) / scale;
  EXPECT_LT(three_err, std::ldexp(1.0, -16));
  EXPECT_GT(one_err, 1e-5);  // a single pass is far off: the split is what buys it
  EXPECT_LT(three_err * 30, one_err);
}

}  // namespace
}  // namespace rankd::kernels
