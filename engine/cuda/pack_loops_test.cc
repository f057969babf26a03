// pack_loops against its one-element-at-a-time twins: random lengths that
// cover whole blocks and tails, ids at the narrowing's edges, and outputs
// poisoned past n (nothing may be written there).
#include "engine/cuda/pack_loops.h"

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace rankd::engine::cuda {
namespace {

constexpr int32_t kPoison = 0x7eadbeef;

int64_t RandomId(std::mt19937_64& rng) {
  static const int64_t kEdges[] = {0,
                                   1,
                                   -1,
                                   INT32_MAX,
                                   int64_t{INT32_MAX} + 1,
                                   INT32_MIN,
                                   int64_t{1} << 32,
                                   (int64_t{1} << 32) + 5,
                                   std::numeric_limits<int64_t>::max(),
                                   std::numeric_limits<int64_t>::min()};
  switch (rng() % 3) {
    case 0:
      return kEdges[rng() % (sizeof(kEdges) / sizeof(kEdges[0]))];
    case 1:
      return static_cast<int64_t>(rng());  // any 64 bits
    default:
      return static_cast<int64_t>(rng() % (uint64_t{1} << 31));  // a row index
  }
}

using NarrowFn = void (*)(const int64_t*, int64_t, int32_t*);
using AllOnesFn = bool (*)(const int32_t*, int64_t);

void CheckNarrow(NarrowFn fn) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t n = static_cast<int64_t>(rng() % 400);
    std::vector<int64_t> from(n);
    for (int64_t& id : from) id = RandomId(rng);
    std::vector<int32_t> want(n + 8, kPoison), got(n + 8, kPoison);
    NarrowIdsToInt32Reference(from.data(), n, want.data());
    fn(from.data(), n, got.data());
    ASSERT_EQ(got, want) << "n=" << n << " trial " << trial;
  }
}

void CheckAllOnes(AllOnesFn fn) {
  std::mt19937_64 rng(11);
  const int32_t kOthers[] = {0, 2, -1, INT32_MIN, INT32_MAX, 3};
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t n = static_cast<int64_t>(rng() % 400);
    std::vector<int32_t> lengths(n, 1);
    ASSERT_TRUE(fn(lengths.data(), n)) << "n=" << n;
    if (n == 0) continue;
    const int64_t at = static_cast<int64_t>(rng() % n);
    lengths[at] = kOthers[rng() % (sizeof(kOthers) / sizeof(kOthers[0]))];
    ASSERT_EQ(fn(lengths.data(), n), AllLengthsOneReference(lengths.data(), n))
        << "n=" << n << " at " << at << " value " << lengths[at];
    ASSERT_FALSE(fn(lengths.data(), n));
  }
}

TEST(PackLoopsTest, NarrowMatchesItsTwin) { CheckNarrow(NarrowIdsToInt32); }
TEST(PackLoopsTest, NarrowBaselineMatchesItsTwin) { CheckNarrow(NarrowIdsToInt32Baseline); }
TEST(PackLoopsTest, AllOnesMatchesItsTwin) { CheckAllOnes(AllLengthsOne); }
TEST(PackLoopsTest, AllOnesBaselineMatchesItsTwin) { CheckAllOnes(AllLengthsOneBaseline); }

TEST(PackLoopsTest, NarrowEdges) {
  const int64_t from[] = {0, INT32_MAX, int64_t{INT32_MAX} + 1, -1, int64_t{1} << 40};
  int32_t to[5];
  NarrowIdsToInt32(from, 5, to);
  EXPECT_EQ(to[0], 0);
  EXPECT_EQ(to[1], INT32_MAX);
  EXPECT_EQ(to[2], -1);
  EXPECT_EQ(to[3], -1);
  EXPECT_EQ(to[4], -1);
}

}  // namespace
}  // namespace rankd::engine::cuda
