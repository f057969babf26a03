// Row scatters on the GPU: embedding updates of STATIC tables (rows written
// in place by id) and the write-through that keeps a HOST table's HBM cache
// of hot rows (kernels/cuda/embedding_lookup.h: cache_slot / cache_rows)
// from serving a stale row after an update. CPU twins:
// kernels/cpu/row_scatter.h. Launchers enqueue on `stream`, allocate
// nothing, check the launch and return its error. Callers order them after
// any lookup reading the same rows (the engine applies updates between
// batches).
#ifndef RANKD_KERNELS_CUDA_ROW_SCATTER_H_
#define RANKD_KERNELS_CUDA_ROW_SCATTER_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace rankd::kernels::cuda {

// dst row ids[i] = src row i for i < n. dst: device memory or mapped pinned
// host memory (its device alias), [rows, row_bytes]; ids and src: device
// memory ([n], [n, row_bytes]). Precondition (validated by the caller): ids
// unique and in range. 16-byte accesses when every pointer and row_bytes are
// 16-byte aligned.
cudaError_t LaunchScatterRows(void* dst, int64_t row_bytes, const int64_t* ids, int64_t n,
                              const void* src, cudaStream_t stream);

// For i < n with cache_slot[ids[i]] >= 0: cache_rows slot cache_slot[ids[i]]
// = src row i. cache_slot: device [num_rows] (slot or -1); cache_rows:
// device [capacity, row_bytes]; ids, src: device. Same precondition on ids.
cudaError_t LaunchCacheWriteThrough(const int32_t* cache_slot, void* cache_rows,
                                    int64_t row_bytes, const int64_t* ids, int64_t n,
                                    const void* src, cudaStream_t stream);

}  // namespace rankd::kernels::cuda

#endif  // RANKD_KERNELS_CUDA_ROW_SCATTER_H_
