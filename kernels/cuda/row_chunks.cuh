// Device helpers for reading embedding rows: raw read-only loads that skip
// L1, and their conversion to floats. Included by the .cu files of
// :embedding_lookup only.
#ifndef RANKD_KERNELS_CUDA_ROW_CHUNKS_CUH_
#define RANKD_KERNELS_CUDA_ROW_CHUNKS_CUH_

#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cpu/types.h"

namespace rankd::kernels::cuda {

// Loads kBytes (2, 4, 8 or 16) read-only bytes into 32-bit words. Rows are
// gathered at random and rarely reused by the same SM, so they skip L1
// (L1::no_allocate) and leave it to ids, bag offsets and table descriptors.
template <int kBytes>
__device__ __forceinline__ void LoadRaw(const void* p, uint32_t (&r)[(kBytes + 3) / 4]) {
  if constexpr (kBytes == 16) {
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
        : "l"(p));
  } else if constexpr (kBytes == 8) {
    asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "l"(p));
  } else if constexpr (kBytes == 4) {
    asm("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(r[0]) : "l"(p));
  } else {
    static_assert(kBytes == 2, "2, 4, 8 or 16 bytes");
    unsigned short h;
    asm("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(h) : "l"(p));
    r[0] = h;
  }
}

// Raw words -> kVec floats (exact for all three storage types).
template <RowType kType, int kVec>
__device__ __forceinline__ void RawToFloat(const uint32_t* r, float (&f)[kVec]) {
  if constexpr (kType == RowType::kFp32) {
#pragma unroll
    for (int i = 0; i < kVec; ++i) f[i] = __uint_as_float(r[i]);
  } else if constexpr (kVec == 1) {
    f[0] = kType == RowType::kBf16
               ? __uint_as_float(r[0] << 16)
               : __half2float(__ushort_as_half(static_cast<unsigned short>(r[0])));
  } else {
    // Two 16-bit values per word, element 2i in the low half (little endian).
#pragma unroll
    for (int i = 0; i < kVec / 2; ++i) {
      if constexpr (kType == RowType::kBf16) {
        f[2 * i] = __uint_as_float(r[i] << 16);
        f[2 * i + 1] = __uint_as_float(r[i] & 0xffff0000u);
      } else {
        f[2 * i] = __half2float(__ushort_as_half(static_cast<unsigned short>(r[i] & 0xffffu)));
        f[2 * i + 1] = __half2float(__ushort_as_half(static_cast<unsigned short>(r[i] >> 16)));
      }
    }
  }
}

}  // namespace rankd::kernels::cuda

#endif  // RANKD_KERNELS_CUDA_ROW_CHUNKS_CUH_
