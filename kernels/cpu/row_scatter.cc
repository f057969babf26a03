#include "kernels/cpu/row_scatter.h"

#include <cstdint>
#include <cstring>

namespace rankd::kernels {

void ScatterRows(void* dst, int64_t row_bytes, const int64_t* ids, int64_t n, const void* src) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(d + ids[i] * row_bytes, s + i * row_bytes, row_bytes);
  }
}

void CacheWriteThrough(const int32_t* cache_slot, void* cache_rows, int64_t row_bytes,
                       const int64_t* ids, int64_t n, const void* src) {
  char* d = static_cast<char*>(cache_rows);
  const char* s = static_cast<const char*>(src);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t slot = cache_slot[ids[i]];
    if (slot >= 0) std::memcpy(d + slot * row_bytes, s + i * row_bytes, row_bytes);
  }
}

}  // namespace rankd::kernels
