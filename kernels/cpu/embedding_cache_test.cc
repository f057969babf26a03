#include "kernels/cpu/embedding_cache.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace rankd::kernels {
namespace {

TEST(EmbeddingCacheCpuTest, SetSlotsWritesInRangeRowsOnly) {
  std::vector<int32_t> map = {5, 5, 5, 5};
  const std::vector<int64_t> rows = {2, -1, 0, 4};
  const std::vector<int32_t> slots = {9, 1, -1, 3};
  SetCacheSlots(map.data(), 4, rows.data(), slots.data(), 4);
  EXPECT_EQ(map, (std::vector<int32_t>{-1, 5, 9, 5}));
}

TEST(EmbeddingCacheCpuTest, FillRowsCopiesWholeRowsIntoSlots) {
  // 3 rows of 3 bytes; a cache of 2 slots.
  const std::vector<uint8_t> src = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<uint8_t> cache(6, 0);
  const std::vector<int64_t> rows = {2, 0, 3, 1};
  const std::vector<int32_t> slots = {0, 1, 0, 2};  // (3, 0) and (1, 2) out of range
  FillCacheRows(src.data(), 3, 3, rows.data(), slots.data(), 4, cache.data(), 2);
  EXPECT_EQ(cache, (std::vector<uint8_t>{7, 8, 9, 1, 2, 3}));
}

TEST(EmbeddingCacheCpuTest, HostReadsCountMissesAndDistinctMissedRows) {
  // Rows 1 and 3 are cached; 0, 2 and 4 are not.
  const std::vector<int32_t> map = {-1, 0, -1, 1, -1};
  const std::vector<int64_t> rows = {0, 1, 2, 0, -1, 3, 2, 4, 0, 1};
  const HostReadCount count = CountHostReads(rows.data(), rows.size(), map.data());
  EXPECT_EQ(count.misses, 6);         // 0, 2, 0, 2, 4, 0
  EXPECT_EQ(count.distinct_rows, 3);  // 0, 2, 4
  const HostReadCount no_cache = CountHostReads(rows.data(), rows.size(), nullptr);
  EXPECT_EQ(no_cache.misses, 9);
  EXPECT_EQ(no_cache.distinct_rows, 5);
}

}  // namespace
}  // namespace rankd::kernels
