// Device helper: one warp copies one row of bytes. Shared by the kernels that
// move whole embedding rows (row_scatter.cu, dynamic_table.cu's upserts).
#ifndef RANKD_KERNELS_CUDA_WARP_ROW_COPY_CUH_
#define RANKD_KERNELS_CUDA_WARP_ROW_COPY_CUH_

#include <cstdint>

namespace rankd::kernels::cuda {

// True when 16-byte accesses fit both rows: `a`, `b` and row_bytes are
// multiples of 16 (a 512-byte fp32 dim-128 row is then one warp-wide access).
__host__ __device__ inline bool RowsAligned16(const void* a, const void* b, int64_t row_bytes) {
  return ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) |
           static_cast<uintptr_t>(row_bytes)) & 15) == 0;
}

// Copies row_bytes bytes from `src` to `dst` with the 32 lanes of a warp
// (`lane` = threadIdx.x % 32): 16 bytes a lane a step when `aligned16`
// (RowsAligned16 of both rows), a byte a lane otherwise. `src` is read
// through the read-only cache, so it must not change during the kernel.
__device__ __forceinline__ void WarpCopyRow(const char* __restrict__ src, char* __restrict__ dst,
                                            int64_t row_bytes, bool aligned16, int lane) {
  if (aligned16) {
    for (int64_t o = lane * 16; o < row_bytes; o += 32 * 16) {
      *reinterpret_cast<uint4*>(dst + o) = __ldg(reinterpret_cast<const uint4*>(src + o));
    }
  } else {
    for (int64_t o = lane; o < row_bytes; o += 32) dst[o] = src[o];
  }
}

}  // namespace rankd::kernels::cuda

#endif  // RANKD_KERNELS_CUDA_WARP_ROW_COPY_CUH_
