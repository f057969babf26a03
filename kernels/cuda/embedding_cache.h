// Maintenance kernels of the HBM embedding cache (engine/cuda/embedding_cache.h).
// CPU twins: kernels/cpu/embedding_cache.h (same arguments, same results).
// All pointers are device pointers, except that `src_rows` may be the device
// alias of mapped pinned host memory (a HOST table's rows).
#ifndef RANKD_KERNELS_CUDA_EMBEDDING_CACHE_H_
#define RANKD_KERNELS_CUDA_EMBEDDING_CACHE_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace rankd::kernels::cuda {

// slot_of_row[rows[i]] = slots[i]; out-of-range rows skipped.
cudaError_t LaunchSetCacheSlots(int32_t* slot_of_row, int64_t num_rows, const int64_t* rows,
                                const int32_t* slots, int64_t n, cudaStream_t stream);

// cache_rows[slots[i]] = src_rows[rows[i]] (row_bytes each); pairs out of
// range skipped. One warp per row, 16-byte copies when everything is aligned.
// max_blocks > 0 caps the grid (256 threads a block; warps loop over the rows
// in order), which bounds how far apart in `rows` the rows in flight are: for
// rows sorted by address, how much host address space is being translated at
// once (bench/gpu/host_read_bench --blocks). 0: one warp per row, up to 65536
// blocks.
cudaError_t LaunchFillCacheRows(const void* src_rows, int64_t num_rows, int64_t row_bytes,
                                const int64_t* rows, const int32_t* slots, int64_t n,
                                void* cache_rows, int64_t capacity, cudaStream_t stream,
                                int max_blocks = 0);

}  // namespace rankd::kernels::cuda

#endif  // RANKD_KERNELS_CUDA_EMBEDDING_CACHE_H_
