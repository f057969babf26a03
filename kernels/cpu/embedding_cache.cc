#include "kernels/cpu/embedding_cache.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace rankd::kernels {

void SetCacheSlots(int32_t* slot_of_row, int64_t num_rows, const int64_t* rows,
                   const int32_t* slots, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (rows[i] >= 0 && rows[i] < num_rows) slot_of_row[rows[i]] = slots[i];
  }
}

void FillCacheRows(const void* src_rows, int64_t num_rows, int64_t row_bytes, const int64_t* rows,
                   const int32_t* slots, int64_t n, void* cache_rows, int64_t capacity) {
  const auto* src = static_cast<const char*>(src_rows);
  auto* dst = static_cast<char*>(cache_rows);
  for (int64_t i = 0; i < n; ++i) {
    if (rows[i] < 0 || rows[i] >= num_rows || slots[i] < 0 || slots[i] >= capacity) continue;
    std::memcpy(dst + slots[i] * row_bytes, src + rows[i] * row_bytes, row_bytes);
  }
}

HostReadCount CountHostReads(const int64_t* rows, int64_t n, const int32_t* slot_of_row) {
  std::vector<int64_t> missed;
  for (int64_t i = 0; i < n; ++i) {
    if (rows[i] < 0) continue;  // unresolved: never read
    if (slot_of_row != nullptr && slot_of_row[rows[i]] >= 0) continue;
    missed.push_back(rows[i]);
  }
  HostReadCount count;
  count.misses = static_cast<int64_t>(missed.size());
  std::sort(missed.begin(), missed.end());
  count.distinct_rows = std::unique(missed.begin(), missed.end()) - missed.begin();
  return count;
}

}  // namespace rankd::kernels
