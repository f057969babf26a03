#include "kernels/cpu/embedding_cache.h"

#include <cstring>

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

}  // namespace rankd::kernels
