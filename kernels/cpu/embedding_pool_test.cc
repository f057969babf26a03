#include "kernels/cpu/embedding_pool.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/hash_table.h"
#include "kernels/cpu/types.h"

namespace rankd::kernels {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Independent decoders (not through Eigen) for the reference.
double RefHalfToDouble(uint16_t h) {
  const int sign = h >> 15;
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  double v;
  if (exp == 0) {
    v = std::ldexp(mant, -24);
  } else if (exp == 31) {
    v = mant == 0 ? std::numeric_limits<double>::infinity()
                  : std::numeric_limits<double>::quiet_NaN();
  } else {
    v = std::ldexp(1024 + mant, exp - 25);
  }
  return sign ? -v : v;
}

double RefBf16ToDouble(uint16_t b) {
  return BitsFloat(static_cast<uint32_t>(b) << 16);
}

// ---------------------------------------------------------------------------
// Conversions

TEST(ConversionTest, HalfKnownValues) {
  struct Case {
    float f;
    uint16_t bits;
  };
  for (const Case& c : {
           Case{1.0f, 0x3C00},
           Case{-1.0f, 0xBC00},
           Case{0.0f, 0x0000},
           Case{-0.0f, 0x8000},
           Case{2.0f, 0x4000},
           Case{0.5f, 0x3800},
           Case{65504.0f, 0x7BFF},   // largest finite half
           Case{65519.99f, 0x7BFF},  // rounds down to max
           Case{65520.0f, 0x7C00},   // tie -> even = 2^16 -> inf
           Case{1e6f, 0x7C00},
           Case{-1e6f, 0xFC00},
           Case{kInf, 0x7C00},
           Case{-kInf, 0xFC00},
           Case{std::ldexp(1.0f, -14), 0x0400},  // smallest normal
           Case{std::ldexp(1.0f, -24), 0x0001},  // smallest subnormal
           Case{std::ldexp(1.0f, -25), 0x0000},  // tie -> even (0)
           Case{std::ldexp(3.0f, -25), 0x0002},  // tie 1|2 -> even (2)
           Case{std::ldexp(1.0f, -26), 0x0000},
           Case{1.0f + std::ldexp(1.0f, -11), 0x3C00},  // tie -> even
           Case{1.0f + std::ldexp(3.0f, -11), 0x3C02},  // tie -> even (up)
           Case{1.0f + std::ldexp(1.0f, -10), 0x3C01},
           Case{1.0f + std::ldexp(1.5f, -11), 0x3C01},  // above tie -> up
           Case{0.1f, 0x2E66},
           Case{-3.14159265f, 0xC248},
       }) {
    SCOPED_TRACE(testing::Message() << "f=" << c.f);
    EXPECT_EQ(FloatToHalfBits(c.f), c.bits);
  }
  const uint16_t nan = FloatToHalfBits(kNaN);
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);
  EXPECT_TRUE(std::isnan(HalfBitsToFloat(nan)));
  EXPECT_TRUE(std::isnan(HalfBitsToFloat(FloatToHalfBits(-kNaN))));
}

TEST(ConversionTest, Bf16KnownValues) {
  struct Case {
    float f;
    uint16_t bits;
  };
  for (const Case& c : {
           Case{1.0f, 0x3F80},
           Case{-1.0f, 0xBF80},
           Case{0.0f, 0x0000},
           Case{-0.0f, 0x8000},
           Case{3.0f, 0x4040},
           Case{1.0f + std::ldexp(1.0f, -8), 0x3F80},  // tie -> even (down)
           Case{1.0f + std::ldexp(3.0f, -8), 0x3F82},  // tie -> even (up)
           Case{1.0f + std::ldexp(1.0f, -7), 0x3F81},
           Case{BitsFloat(0x3F808001), 0x3F81},              // just above tie
           Case{std::numeric_limits<float>::max(), 0x7F80},  // -> inf
           Case{BitsFloat(0x7F7F7FFF), 0x7F7F},  // largest w/o overflow
           Case{kInf, 0x7F80},
           Case{-kInf, 0xFF80},
           Case{BitsFloat(0x00000001), 0x0000},  // fp32 subnormal
           Case{BitsFloat(0x00018000), 0x0002},  // subnormal tie -> even
           Case{0.1f, 0x3DCD},
       }) {
    SCOPED_TRACE(testing::Message() << "f=" << c.f);
    EXPECT_EQ(FloatToBf16Bits(c.f), c.bits);
  }
  const uint16_t nan = FloatToBf16Bits(kNaN);
  EXPECT_EQ(nan & 0x7F80, 0x7F80);
  EXPECT_NE(nan & 0x007F, 0);
  // A NaN whose payload lives only in the low 16 bits must stay NaN.
  EXPECT_TRUE(
      std::isnan(Bf16BitsToFloat(FloatToBf16Bits(BitsFloat(0x7F800001)))));
  EXPECT_TRUE(
      std::isnan(Bf16BitsToFloat(FloatToBf16Bits(BitsFloat(0xFF800001)))));
}

// Every 16-bit pattern: decoding is exact and encoding it back is lossless.
TEST(ConversionTest, AllBitPatternsRoundTrip) {
  for (uint32_t u = 0; u <= 0xFFFF; ++u) {
    const uint16_t bits = static_cast<uint16_t>(u);
    const float h = HalfBitsToFloat(bits);
    const double h_ref = RefHalfToDouble(bits);
    if (std::isnan(h_ref)) {
      ASSERT_TRUE(std::isnan(h)) << std::hex << u;
      ASSERT_TRUE(std::isnan(HalfBitsToFloat(FloatToHalfBits(h))));
    } else {
      ASSERT_EQ(static_cast<double>(h), h_ref) << std::hex << u;
      ASSERT_EQ(FloatToHalfBits(h), bits) << std::hex << u;
    }
    const float b = Bf16BitsToFloat(bits);
    const double b_ref = RefBf16ToDouble(bits);
    if (std::isnan(b_ref)) {
      ASSERT_TRUE(std::isnan(b)) << std::hex << u;
      ASSERT_TRUE(std::isnan(Bf16BitsToFloat(FloatToBf16Bits(b))));
    } else {
      ASSERT_EQ(static_cast<double>(b), b_ref) << std::hex << u;
      ASSERT_EQ(FloatToBf16Bits(b), bits) << std::hex << u;
    }
  }
}

// Rounding is to the nearest representable value, ties to an even mantissa,
// over random fp32 inputs (finite, within range).
template <typename Encode, typename Decode>
void ExpectNearestEven(Encode encode, Decode decode, float max_abs,
                       uint64_t seed) {
  std::mt19937 rng(seed);
  for (int i = 0; i < 200000; ++i) {
    float f = BitsFloat(rng() & 0x7FFFFFFF);
    if (!std::isfinite(f) || f >= max_abs) continue;
    const uint16_t bits = encode(f);
    const double v = decode(bits);
    const double down = bits > 0 ? decode(bits - 1) : -decode(bits + 1);
    const double up = decode(bits + 1);
    const double err = std::abs(v - f);
    ASSERT_LE(err, std::abs(down - f)) << f;
    ASSERT_LE(err, std::abs(up - f)) << f;
    if (err == std::abs(down - f) || err == std::abs(up - f)) {
      ASSERT_EQ(bits & 1, 0) << "tie not rounded to even: " << f;
    }
  }
}

TEST(ConversionTest, RoundsToNearestEvenOnRandomInputs) {
  ExpectNearestEven(FloatToHalfBits, RefHalfToDouble, 65504.0f, 1);
  ExpectNearestEven(FloatToBf16Bits, RefBf16ToDouble, BitsFloat(0x7F7F0000), 2);
  // Exact ties, which random inputs rarely hit: bf16 drops 16 bits.
  std::mt19937 rng(3);
  for (int i = 0; i < 10000; ++i) {
    const uint32_t hi = (rng() % 0x7F00) << 16;
    const uint32_t tie = hi | 0x8000;
    const uint16_t got = FloatToBf16Bits(BitsFloat(tie));
    const uint16_t expect =
        static_cast<uint16_t>((hi >> 16) + ((hi >> 16) & 1));
    ASSERT_EQ(got, expect) << std::hex << tie;
  }
}

TEST(ConversionTest, RowElementToFloat) {
  const float f32[3] = {1.5f, -2.25f, 3e-8f};
  const uint16_t f16[3] = {0x3C00, 0xC248, 0x0001};
  const uint16_t b16[3] = {0x3F80, 0xC049, 0x0080};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(RowElementToFloat(f32, RowType::kFp32, i), f32[i]);
    EXPECT_EQ(RowElementToFloat(f16, RowType::kFp16, i),
              static_cast<float>(RefHalfToDouble(f16[i])));
    EXPECT_EQ(RowElementToFloat(b16, RowType::kBf16, i),
              static_cast<float>(RefBf16ToDouble(b16[i])));
  }
}

// ---------------------------------------------------------------------------
// Pooling

// Random value in +-[0.05, 1]: never zero, so a skipped term shows.
float NonZero(std::mt19937_64& rng) {
  std::uniform_real_distribution<float> mag(0.05f, 1.0f);
  return (rng() & 1) ? mag(rng) : -mag(rng);
}

// A table's storage plus its values as the kernel must read them (double).
struct TestTable {
  RowType type;
  int64_t num_rows;
  int dim;
  std::vector<float> f32;
  std::vector<uint16_t> f16;   // fp16 or bf16 bits
  std::vector<double> values;  // decoded, [num_rows * dim]

  const void* data() const {
    return type == RowType::kFp32 ? static_cast<const void*>(f32.data())
                                  : static_cast<const void*>(f16.data());
  }
};

TestTable MakeTable(RowType type, int64_t num_rows, int dim,
                    std::mt19937_64& rng) {
  TestTable t{type, num_rows, dim, {}, {}, {}};
  const int64_t n = num_rows * dim;
  t.values.resize(n);
  if (type == RowType::kFp32) t.f32.resize(n);
  if (type != RowType::kFp32) t.f16.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    const float v = NonZero(rng) * 4.0f;
    switch (type) {
      case RowType::kFp32:
        t.f32[i] = v;
        t.values[i] = v;
        break;
      case RowType::kFp16:
        t.f16[i] = FloatToHalfBits(v);
        t.values[i] = RefHalfToDouble(t.f16[i]);
        break;
      case RowType::kBf16:
        t.f16[i] = FloatToBf16Bits(v);
        t.values[i] = RefBf16ToDouble(t.f16[i]);
        break;
    }
  }
  return t;
}

struct TestBags {
  std::vector<int64_t> ids;
  std::vector<int64_t> offsets;
  std::vector<float> weights;
  std::vector<bool> resolves;  // per id
  std::vector<int64_t> rows;   // per id: resolved row, or -1
};

// Bags of the given sizes. offsets[0] is deliberately > 0 (ids before it are
// junk the kernel must not read). About one id in seven does not resolve.
TestBags MakeBags(const std::vector<int>& sizes, int64_t num_rows,
                  const std::vector<int64_t>* keys,
                  const std::vector<int64_t>& missing_keys,
                  std::mt19937_64& rng) {
  TestBags b;
  constexpr int kLead = 5;
  for (int i = 0; i < kLead; ++i) {
    b.ids.push_back(-999);
    b.weights.push_back(kNaN);
    b.resolves.push_back(false);
    b.rows.push_back(-1);
  }
  b.offsets.push_back(kLead);
  const int64_t bad_static[] = {-1, num_rows, num_rows + 7,
                                std::numeric_limits<int64_t>::max(),
                                std::numeric_limits<int64_t>::min()};
  for (int size : sizes) {
    for (int i = 0; i < size; ++i) {
      const bool resolve = rng() % 7 != 0;
      int64_t row = -1;
      int64_t id;
      if (resolve) {
        row = static_cast<int64_t>(rng() % num_rows);
        id = keys ? (*keys)[row] : row;
      } else if (keys) {
        id = missing_keys[rng() % missing_keys.size()];
      } else {
        id = bad_static[rng() % 5];
      }
      b.ids.push_back(id);
      b.resolves.push_back(resolve);
      b.rows.push_back(row);
      b.weights.push_back(NonZero(rng) * 2.0f);
    }
    b.offsets.push_back(static_cast<int64_t>(b.ids.size()));
  }
  return b;
}

struct Expected {
  std::vector<double> out;      // [num_bags * dim]
  std::vector<double> abs_sum;  // error scale per element
  int64_t unresolved = 0;
};

// Double-precision reference of torch.nn.functional.embedding_bag.
Expected Reference(const TestTable& t, const TestBags& b, Pooling pooling,
                   bool weighted, const std::vector<float>* default_vector) {
  const int dim = t.dim;
  const int64_t num_bags = static_cast<int64_t>(b.offsets.size()) - 1;
  Expected e;
  e.out.assign(num_bags * dim, 0.0);
  e.abs_sum.assign(num_bags * dim, 0.0);
  for (int64_t bag = 0; bag < num_bags; ++bag) {
    const int64_t begin = b.offsets[bag], end = b.offsets[bag + 1];
    for (int d = 0; d < dim; ++d) {
      double acc = pooling == Pooling::kMax
                       ? -std::numeric_limits<double>::infinity()
                       : 0.0;
      double abs_acc = 0.0;
      for (int64_t i = begin; i < end; ++i) {
        const double w = weighted ? b.weights[i] : 1.0;
        double v = 0.0;
        if (b.resolves[i]) {
          v = t.values[b.rows[i] * dim + d];
        } else if (default_vector != nullptr) {
          v = (*default_vector)[d];
        }
        const double term = w * v;
        acc = pooling == Pooling::kMax ? std::max(acc, term) : acc + term;
        abs_acc += std::abs(term);
      }
      if (end == begin) acc = 0.0;
      if (pooling == Pooling::kMean && end > begin) {
        acc /= static_cast<double>(end - begin);
        abs_acc /= static_cast<double>(end - begin);
      }
      if (pooling == Pooling::kMax) abs_acc = std::abs(acc);
      e.out[bag * dim + d] = acc;
      e.abs_sum[bag * dim + d] = abs_acc;
    }
    for (int64_t i = begin; i < end; ++i) e.unresolved += !b.resolves[i];
  }
  return e;
}

std::string Name(RowType t) {
  return t == RowType::kFp32 ? "fp32" : t == RowType::kFp16 ? "fp16" : "bf16";
}
std::string Name(Pooling p) {
  return p == Pooling::kSum ? "sum" : p == Pooling::kMean ? "mean" : "max";
}

// Runs one configuration against the reference, with NaN-poisoned output
// (row padding included, which must stay untouched).
void CheckPooling(RowType type, Pooling pooling, bool weighted, bool dynamic,
                  bool with_default, int dim, const std::vector<int>& sizes,
                  uint64_t seed) {
  SCOPED_TRACE(testing::Message()
               << Name(type) << " " << Name(pooling)
               << (weighted ? " weighted" : " unweighted")
               << (dynamic ? " dynamic" : " static")
               << (with_default ? " default" : " zeros") << " dim=" << dim);
  std::mt19937_64 rng(seed);
  const int64_t num_rows = 37;
  const TestTable table = MakeTable(type, num_rows, dim, rng);

  // Dynamic: row r holds key keys[r]; keys span the int64 range.
  std::vector<int64_t> keys;
  std::vector<int64_t> missing;
  HashTable hash;
  HashTableView view;
  if (dynamic) {
    std::unordered_set<int64_t> seen;
    keys = {std::numeric_limits<int64_t>::max(),
            std::numeric_limits<int64_t>::min() + 1, -1, 0};
    seen.insert(keys.begin(), keys.end());
    while (static_cast<int64_t>(keys.size()) < num_rows) {
      const int64_t k = static_cast<int64_t>(rng());
      if (k != kEmptyKey && seen.insert(k).second) keys.push_back(k);
    }
    std::shuffle(keys.begin(), keys.end(), rng);
    for (int64_t k : {int64_t{1}, int64_t{-2}, int64_t{123456789},
                      std::numeric_limits<int64_t>::max() - 1}) {
      if (!seen.count(k)) missing.push_back(k);
    }
    ASSERT_TRUE(HashTable::Build(keys, 0, &hash).ok());
    view = hash.view();
  }

  std::vector<float> default_vector(dim);
  for (float& v : default_vector) v = NonZero(rng) * 3.0f;

  const TestBags bags =
      MakeBags(sizes, num_rows, dynamic ? &keys : nullptr, missing, rng);
  PoolTable pt;
  pt.rows = table.data();
  pt.row_type = type;
  pt.num_rows = num_rows;
  pt.dim = dim;
  pt.pooling = pooling;
  pt.hash = dynamic ? &view : nullptr;
  pt.default_vector = with_default ? default_vector.data() : nullptr;
  PoolBags pb;
  pb.ids = bags.ids.data();
  pb.offsets = bags.offsets.data();
  pb.weights = weighted ? bags.weights.data() : nullptr;
  pb.num_bags = static_cast<int64_t>(sizes.size());

  const int64_t stride = dim + 3;
  std::vector<float> out(pb.num_bags * stride + 1, kNaN);
  const int64_t unresolved = PoolEmbeddings(pt, pb, out.data(), stride);

  const Expected e = Reference(table, bags, pooling, weighted,
                               with_default ? &default_vector : nullptr);
  EXPECT_EQ(unresolved, e.unresolved);
  for (int64_t b = 0; b < pb.num_bags; ++b) {
    for (int d = 0; d < dim; ++d) {
      const float got = out[b * stride + d];
      const double want = e.out[b * dim + d];
      const double tol = 1e-5 * e.abs_sum[b * dim + d] + 1e-30;
      ASSERT_NEAR(got, want, tol)
          << "bag " << b << " (size " << sizes[b] << ") element " << d;
      if (sizes[b] == 0) {
        ASSERT_EQ(FloatBits(got), 0u) << "empty bag must give +0.0";
      }
    }
    for (int64_t d = dim; d < stride; ++d) {
      ASSERT_TRUE(std::isnan(out[b * stride + d])) << "wrote row padding";
    }
  }
  EXPECT_TRUE(std::isnan(out.back())) << "wrote past the end";
}

TEST(PoolEmbeddingsTest, EveryCombinationMatchesReference) {
  // Empty bags (first, middle, last), single ids, and a max-size bag.
  const std::vector<int> sizes = {0, 1, 3, 0, 7, 2, 1000, 1, 5, 0};
  uint64_t seed = 1;
  for (RowType type : {RowType::kFp32, RowType::kFp16, RowType::kBf16}) {
    for (Pooling pooling : {Pooling::kSum, Pooling::kMean, Pooling::kMax}) {
      for (bool weighted : {false, true}) {
        for (bool dynamic : {false, true}) {
          for (bool with_default : {false, true}) {
            for (int dim : {1, 13, 64}) {
              CheckPooling(type, pooling, weighted, dynamic, with_default, dim,
                           sizes, seed++);
            }
          }
        }
      }
    }
  }
}

TEST(PoolEmbeddingsTest, ManySmallRandomBags) {
  std::mt19937_64 rng(99);
  std::vector<int> sizes(301);
  for (int& s : sizes) s = static_cast<int>(rng() % 9);
  CheckPooling(RowType::kFp32, Pooling::kSum, true, true, true, 128, sizes, 7);
  CheckPooling(RowType::kBf16, Pooling::kMean, false, false, false, 17, sizes,
               8);
  CheckPooling(RowType::kFp16, Pooling::kMax, true, false, true, 5, sizes, 9);
}

TEST(PoolEmbeddingsTest, NoBagsWritesNothing) {
  const float rows[4] = {1, 2, 3, 4};
  PoolTable pt;
  pt.rows = rows;
  pt.num_rows = 2;
  pt.dim = 2;
  const int64_t offsets[1] = {0};
  PoolBags pb;
  pb.offsets = offsets;
  pb.num_bags = 0;
  float out[2] = {kNaN, kNaN};
  EXPECT_EQ(PoolEmbeddings(pt, pb, out, 2), 0);
  EXPECT_TRUE(std::isnan(out[0]) && std::isnan(out[1]));
}

// MAX over negative rows only: the -inf start must not leak, and a missing id
// with no default vector takes part as zeros.
TEST(PoolEmbeddingsTest, MaxOfNegativeRowsAndMissingZeros) {
  const float rows[4] = {-1.0f, -2.0f, -3.0f, -0.5f};
  PoolTable pt;
  pt.rows = rows;
  pt.num_rows = 2;
  pt.dim = 2;
  pt.pooling = Pooling::kMax;
  const int64_t ids[3] = {0, 1, 5};
  const int64_t offsets[3] = {0, 2, 3};
  PoolBags pb;
  pb.ids = ids;
  pb.offsets = offsets;
  pb.num_bags = 2;
  float out[4] = {kNaN, kNaN, kNaN, kNaN};
  EXPECT_EQ(PoolEmbeddings(pt, pb, out, 2), 1);
  EXPECT_EQ(out[0], -1.0f);
  EXPECT_EQ(out[1], -0.5f);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(out[3], 0.0f);
}

TEST(PoolEmbeddingsTest, WeightsApplyToDefaultVector) {
  const uint16_t rows[2] = {FloatToBf16Bits(2.0f), FloatToBf16Bits(4.0f)};
  const float def[2] = {10.0f, 20.0f};
  PoolTable pt;
  pt.rows = rows;
  pt.row_type = RowType::kBf16;
  pt.num_rows = 1;
  pt.dim = 2;
  pt.pooling = Pooling::kMean;
  pt.default_vector = def;
  const int64_t ids[2] = {0, -3};
  const float weights[2] = {0.5f, -1.0f};
  const int64_t offsets[2] = {0, 2};
  PoolBags pb{ids, offsets, weights, 1};
  float out[2] = {kNaN, kNaN};
  EXPECT_EQ(PoolEmbeddings(pt, pb, out, 2), 1);
  EXPECT_EQ(out[0], (0.5f * 2.0f - 10.0f) / 2);
  EXPECT_EQ(out[1], (0.5f * 4.0f - 20.0f) / 2);
}

}  // namespace
}  // namespace rankd::kernels
