// CPU twins of the row-scatter kernels (kernels/cuda/row_scatter.h): embedding
// updates of STATIC tables, and the write-through that keeps an HBM cache of
// a HOST table's hot rows from serving a stale row after an update.
// Stateless and thread-compatible: calls on disjoint destinations may run in
// parallel. No allocation; the caller owns every buffer.
#ifndef RANKD_KERNELS_CPU_ROW_SCATTER_H_
#define RANKD_KERNELS_CPU_ROW_SCATTER_H_

#include <cstdint>

namespace rankd::kernels {

// dst row ids[i] = src row i, for i < n (rows of row_bytes bytes; dst is
// [rows, row_bytes], src [n, row_bytes]). Precondition (validated by the
// caller): ids unique and in range.
void ScatterRows(void* dst, int64_t row_bytes, const int64_t* ids, int64_t n, const void* src);

// For i < n with cache_slot[ids[i]] >= 0: cache row cache_slot[ids[i]] of
// cache_rows ([capacity, row_bytes]) = src row i. Uncached ids are skipped
// (their host rows are written by ScatterRows). Same precondition on ids.
void CacheWriteThrough(const int32_t* cache_slot, void* cache_rows, int64_t row_bytes,
                       const int64_t* ids, int64_t n, const void* src);

}  // namespace rankd::kernels

#endif  // RANKD_KERNELS_CPU_ROW_SCATTER_H_
