// Maintenance kernels of the HBM embedding cache (see embedding_cache.h).
// Both run on the cache's maintenance stream, off the request path.
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "kernels/cuda/embedding_cache.h"

namespace rankd::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarpSize = 32;

__global__ void SetCacheSlotsKernel(int32_t* __restrict__ slot_of_row, int64_t num_rows,
                                    const int64_t* __restrict__ rows,
                                    const int32_t* __restrict__ slots, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const int64_t r = rows[i];
    if (r >= 0 && r < num_rows) slot_of_row[r] = slots[i];
  }
}

// One warp per (row, slot) pair; kVec16: 16-byte words, else bytes.
template <bool kVec16>
__global__ void FillCacheRowsKernel(const char* __restrict__ src, int64_t num_rows,
                                    int64_t row_bytes, const int64_t* __restrict__ rows,
                                    const int32_t* __restrict__ slots, int64_t n,
                                    char* __restrict__ dst, int64_t capacity) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / kWarpSize);
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * (blockDim.x / kWarpSize) +
                   threadIdx.x / kWarpSize;
       i < n; i += warps) {
    const int64_t r = rows[i];
    const int64_t s = slots[i];
    if (r < 0 || r >= num_rows || s < 0 || s >= capacity) continue;
    const char* from = src + r * row_bytes;
    char* to = dst + s * row_bytes;
    if constexpr (kVec16) {
      for (int64_t b = lane * 16; b < row_bytes; b += kWarpSize * 16) {
        *reinterpret_cast<int4*>(to + b) = *reinterpret_cast<const int4*>(from + b);
      }
    } else {
      for (int64_t b = lane; b < row_bytes; b += kWarpSize) to[b] = from[b];
    }
  }
}

unsigned int Grid(int64_t items, int per_block) {
  const int64_t blocks = (items + per_block - 1) / per_block;
  return static_cast<unsigned int>(blocks < 65536 ? blocks : 65536);
}

}  // namespace

cudaError_t LaunchSetCacheSlots(int32_t* slot_of_row, int64_t num_rows, const int64_t* rows,
                                const int32_t* slots, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (slot_of_row == nullptr || rows == nullptr || slots == nullptr) return cudaErrorInvalidValue;
  SetCacheSlotsKernel<<<Grid(n, kThreads), kThreads, 0, stream>>>(slot_of_row, num_rows, rows,
                                                                  slots, n);
  return cudaGetLastError();
}

cudaError_t LaunchFillCacheRows(const void* src_rows, int64_t num_rows, int64_t row_bytes,
                                const int64_t* rows, const int32_t* slots, int64_t n,
                                void* cache_rows, int64_t capacity, cudaStream_t stream,
                                int max_blocks) {
  if (n <= 0 || row_bytes <= 0) return cudaSuccess;
  if (max_blocks < 0) return cudaErrorInvalidValue;
  if (src_rows == nullptr || rows == nullptr || slots == nullptr || cache_rows == nullptr) {
    return cudaErrorInvalidValue;
  }
  const bool vec16 = row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(src_rows) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(cache_rows) % 16 == 0;
  const int warps_per_block = kThreads / kWarpSize;
  unsigned int grid = Grid(n, warps_per_block);
  if (max_blocks > 0 && grid > static_cast<unsigned int>(max_blocks)) {
    grid = static_cast<unsigned int>(max_blocks);
  }
  const auto* src = static_cast<const char*>(src_rows);
  auto* dst = static_cast<char*>(cache_rows);
  if (vec16) {
    FillCacheRowsKernel<true><<<grid, kThreads, 0, stream>>>(
        src, num_rows, row_bytes, rows, slots, n, dst, capacity);
  } else {
    FillCacheRowsKernel<false><<<grid, kThreads, 0, stream>>>(
        src, num_rows, row_bytes, rows, slots, n, dst, capacity);
  }
  return cudaGetLastError();
}

}  // namespace rankd::kernels::cuda
