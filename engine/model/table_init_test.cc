// RANDOM table values and keys: the documented formula (re-derived here from
// table_init.h's comment, so a change to either shows), independence from
// chunking, ranges, dtype rounding, and key uniqueness.
#include "engine/model/table_init.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_set>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/embedding_pool.h"
#include "kernels/cpu/hash_table.h"

namespace rankd::engine {
namespace {

constexpr uint64_t G = 0x9e3779b97f4a7c15ULL;
constexpr uint64_t M63 = (uint64_t{1} << 63) - 1;

uint64_t M(uint64_t x) { return kernels::HashKey(static_cast<int64_t>(x)); }

// The definition in table_init.h, written out step by step.
uint64_t DocStream(uint64_t seed, const std::string& name) {
  uint64_t h = M(seed + G);
  for (unsigned char c : name) h = M(h ^ c);
  return h;
}
double DocValue(uint64_t stream, uint64_t r, uint64_t c) {
  const uint64_t row_seed = M(stream + (r + 1) * G);
  const uint64_t u = M(row_seed + (c + 1) * G);
  return (static_cast<double>(u >> 41) + 0.5) / 4194304.0 - 1.0;
}
int64_t DocKey(uint64_t stream, uint64_t r) {
  uint64_t x = (r + (M(stream ^ 0x6b6579) >> 1)) & M63;
  x ^= x >> 32;
  x = (x * 0xff51afd7ed558ccdULL) & M63;
  x ^= x >> 29;
  x = (x * 0xc4ceb9fe1a85ec53ULL) & M63;
  x ^= x >> 32;
  return static_cast<int64_t>(x);
}

TEST(TableInitTest, MatchesTheDocumentedDefinition) {
  for (uint64_t seed : {uint64_t{0}, uint64_t{1}, ~uint64_t{0}}) {
    for (const std::string name : {"t0", "emb_user", ""}) {
      const uint64_t s = RandomTableStream(seed, name);
      ASSERT_EQ(s, DocStream(seed, name));
      for (int64_t r : {int64_t{0}, int64_t{1}, int64_t{39999999},
                        int64_t{1} << 40}) {
        for (int64_t c : {0, 1, 127}) {
          ASSERT_EQ(RandomTableUnit(s, r, c),
                    static_cast<float>(DocValue(s, r, c)));
        }
        ASSERT_EQ(RandomTableKey(s, r), DocKey(s, r));
      }
    }
  }
}

// Pinned values: the same on every machine and compiler (a changed number
// here means every RANDOM model in use changes its scores).
TEST(TableInitTest, PinnedValues) {
  const uint64_t s = RandomTableStream(1, "t0");
  EXPECT_EQ(RandomTableKey(s, 0), 6209344208829437368);
  EXPECT_EQ(RandomTableUnit(s, 3, 5), 0.3393946886f);
  EXPECT_EQ(RandomTableUnit(RandomTableStream(7, "emb"), 1000000, 127),
            0.2025207281f);
  // Exact: 23-bit values fit a float.
  EXPECT_EQ(static_cast<double>(RandomTableUnit(s, 3, 5)), DocValue(s, 3, 5));
  EXPECT_NE(RandomTableStream(1, "t0"), RandomTableStream(2, "t0"));
  EXPECT_NE(RandomTableStream(1, "t0"), RandomTableStream(1, "t1"));
}

TEST(TableInitTest, RowsDoNotDependOnChunking) {
  const uint64_t s = RandomTableStream(9, "x");
  const int dim = 7;
  const int64_t rows = 1000;
  for (kernels::RowType type : {kernels::RowType::kFp32,
                                kernels::RowType::kFp16,
                                kernels::RowType::kBf16}) {
    const size_t row_bytes = dim * kernels::RowTypeBytes(type);
    std::vector<uint8_t> whole(rows * row_bytes, 0xAB);
    std::vector<uint8_t> pieces(rows * row_bytes, 0xCD);
    FillRandomRows(s, 0.3f, dim, type, 0, rows, whole.data());
    for (int64_t b = 0; b < rows;) {
      const int64_t e = std::min<int64_t>(rows, b + 1 + b % 37);
      FillRandomRows(s, 0.3f, dim, type, b, e, pieces.data() + b * row_bytes);
      b = e;
    }
    EXPECT_EQ(whole, pieces);
  }
}

TEST(TableInitTest, ValuesInRangeAndRoundedToTheDtype) {
  const uint64_t s = RandomTableStream(4, "t");
  const int dim = 16;
  const int64_t rows = 4096;
  const float scale = DefaultRandomInitScale(rows);
  EXPECT_FLOAT_EQ(scale, 1.0f / 64);
  std::vector<float> f32(rows * dim);
  std::vector<uint16_t> f16(rows * dim), b16(rows * dim);
  FillRandomRows(s, scale, dim, kernels::RowType::kFp32, 0, rows,
                 reinterpret_cast<uint8_t*>(f32.data()));
  FillRandomRows(s, scale, dim, kernels::RowType::kFp16, 0, rows,
                 reinterpret_cast<uint8_t*>(f16.data()));
  FillRandomRows(s, scale, dim, kernels::RowType::kBf16, 0, rows,
                 reinterpret_cast<uint8_t*>(b16.data()));
  // After rounding to a 16-bit type a value may reach the rounded scale.
  const float f16_bound = kernels::HalfBitsToFloat(kernels::FloatToHalfBits(scale));
  const float b16_bound = kernels::Bf16BitsToFloat(kernels::FloatToBf16Bits(scale));
  double sum = 0, min = 1, max = -1;
  for (int64_t i = 0; i < rows * dim; ++i) {
    const int64_t r = i / dim, c = i % dim;
    const float v = scale * RandomTableUnit(s, r, c);
    ASSERT_EQ(f32[i], v);
    ASSERT_LE(std::fabs(v), scale);
    ASSERT_EQ(f16[i], kernels::FloatToHalfBits(v)) << i;  // round to nearest even
    ASSERT_EQ(b16[i], kernels::FloatToBf16Bits(v)) << i;
    ASSERT_LE(std::fabs(kernels::HalfBitsToFloat(f16[i])), f16_bound);
    ASSERT_LE(std::fabs(kernels::Bf16BitsToFloat(b16[i])), b16_bound);
    sum += v;
    min = std::min<double>(min, v);
    max = std::max<double>(max, v);
  }
  // Uniform over the whole range, centred on 0.
  EXPECT_LT(std::fabs(sum / (rows * dim)), 0.01 * scale);
  EXPECT_LT(min, -0.99 * scale);
  EXPECT_GT(max, 0.99 * scale);
}

TEST(TableInitTest, KeysAreDistinctNonNegativeAndMissesAreNotKeys) {
  const uint64_t s = RandomTableStream(1, "ids");
  const int64_t n = 200000;
  std::vector<int64_t> keys(n);
  FillRandomKeys(s, 0, n, keys.data());
  std::unordered_set<int64_t> set(keys.begin(), keys.end());
  EXPECT_EQ(static_cast<int64_t>(set.size()), n);
  for (int64_t k : keys) {
    ASSERT_GE(k, 0);
    ASSERT_NE(k, kernels::kEmptyKey);
  }
  for (int64_t r = n; r < n + 10000; ++r) {
    ASSERT_EQ(set.count(RandomTableKey(s, r)), 0u) << r;
  }
  // Spread over the whole non-negative range (not small integers).
  EXPECT_GT(*std::max_element(keys.begin(), keys.end()), int64_t{1} << 62);
  // And they load into the hash table and look up to their rows.
  kernels::HashTable table;
  ASSERT_TRUE(kernels::HashTable::Build(keys, 0, &table).ok());
  for (int64_t r = 0; r < n; r += 997) {
    ASSERT_EQ(kernels::HashLookup(table.view(), keys[r]), r);
  }
}

}  // namespace
}  // namespace rankd::engine
