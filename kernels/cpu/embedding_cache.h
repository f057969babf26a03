// CPU twins of the HBM embedding cache's maintenance kernels
// (kernels/cuda/embedding_cache.h). The cache maps a HOST table's row to a
// slot of a device array of cached rows (slot_of_row[row] = slot, or -1);
// these two primitives are all its refresh needs.
#ifndef RANKD_KERNELS_CPU_EMBEDDING_CACHE_H_
#define RANKD_KERNELS_CPU_EMBEDDING_CACHE_H_

#include <cstdint>

namespace rankd::kernels {

// slot_of_row[rows[i]] = slots[i] for i < n (slots[i] may be -1: uncached).
// Rows are distinct; out-of-range rows (< 0 or >= num_rows) are skipped.
void SetCacheSlots(int32_t* slot_of_row, int64_t num_rows, const int64_t* rows,
                   const int32_t* slots, int64_t n);

// Copies row rows[i] of `src_rows` ([num_rows, row_bytes]) into slot
// slots[i] of `cache_rows` ([capacity, row_bytes]) for i < n. Pairs with a row
// or slot out of range are skipped.
void FillCacheRows(const void* src_rows, int64_t num_rows, int64_t row_bytes, const int64_t* rows,
                   const int32_t* slots, int64_t n, void* cache_rows, int64_t capacity);

// What the GPU lookup reads from host memory for one HOST table's ids of a
// batch: CPU twin of the staging passes' accounting (HostStaging in
// kernels/cuda/embedding_lookup.h). `rows` are the resolved rows of the ids
// (kMissingRow = -1 skipped), `slot_of_row` the cache's map (nullptr = no
// cache). A miss is an id whose row is not cached; each distinct missed row
// is copied from host memory once (while the staging buffer has room).
struct HostReadCount {
  int64_t misses = 0;
  int64_t distinct_rows = 0;
};
HostReadCount CountHostReads(const int64_t* rows, int64_t n, const int32_t* slot_of_row);

}  // namespace rankd::kernels

#endif  // RANKD_KERNELS_CPU_EMBEDDING_CACHE_H_
