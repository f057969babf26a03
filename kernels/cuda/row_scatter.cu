// Row scatter kernels (see row_scatter.h): one warp per source row, 16-byte
// loads and stores when aligned (a 512-byte fp32 dim-128 row is one warp-wide
// access), bytes otherwise.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/row_scatter.h"
#include "kernels/cuda/warp_row_copy.cuh"

namespace rankd::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = kThreads / kWarp;

// kCache: the destination row is cache_slot[ids[i]] (skipped when < 0).
template <bool kCache>
__global__ void __launch_bounds__(kThreads)
    ScatterKernel(char* __restrict__ dst, int64_t row_bytes, const int64_t* __restrict__ ids,
                  int64_t n, const char* __restrict__ src, const int32_t* __restrict__ cache_slot,
                  bool vec) {
  const int lane = threadIdx.x & (kWarp - 1);
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp; i < n;
       i += warps) {
    int64_t row = __ldg(ids + i);
    if constexpr (kCache) {
      row = __ldg(cache_slot + row);
      if (row < 0) continue;
    }
    WarpCopyRow(src + i * row_bytes, dst + row * row_bytes, row_bytes, vec, lane);
  }
}

unsigned int Blocks(int64_t n) {
  return static_cast<unsigned int>(
      std::min<int64_t>((n + kWarpsPerBlock - 1) / kWarpsPerBlock, int64_t{1} << 16));
}

}  // namespace

cudaError_t LaunchScatterRows(void* dst, int64_t row_bytes, const int64_t* ids, int64_t n,
                              const void* src, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (dst == nullptr || ids == nullptr || src == nullptr || row_bytes <= 0) {
    return cudaErrorInvalidValue;
  }
  ScatterKernel<false><<<Blocks(n), kThreads, 0, stream>>>(
      static_cast<char*>(dst), row_bytes, ids, n, static_cast<const char*>(src), nullptr,
      RowsAligned16(dst, src, row_bytes));
  return cudaGetLastError();
}

cudaError_t LaunchCacheWriteThrough(const int32_t* cache_slot, void* cache_rows,
                                    int64_t row_bytes, const int64_t* ids, int64_t n,
                                    const void* src, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (cache_slot == nullptr || cache_rows == nullptr || ids == nullptr || src == nullptr ||
      row_bytes <= 0) {
    return cudaErrorInvalidValue;
  }
  ScatterKernel<true><<<Blocks(n), kThreads, 0, stream>>>(
      static_cast<char*>(cache_rows), row_bytes, ids, n, static_cast<const char*>(src),
      cache_slot, RowsAligned16(cache_rows, src, row_bytes));
  return cudaGetLastError();
}

}  // namespace rankd::kernels::cuda
