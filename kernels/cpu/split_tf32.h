// Split precision for TF32 tensor cores ("3xTF32"), CPU side: the reference
// for kernels/cuda/split_tf32.h and the weights' split at load.
//
// TF32 keeps 10 of fp32's 23 mantissa bits, so one TF32 GEMM is off by up to
// ~2^-11 relative per product. Writing each value as x = big + small, with
// big = x rounded to TF32 (round to nearest, ties to even) and small = x - big
// (exact in fp32, and itself about 2^-11 |x|), a product is
//   x.w = big_x.big_w + small_x.big_w + big_x.small_w + small_x.small_w,
// and dropping the last term (~2^-22 relative) leaves three products a TF32
// tensor core computes with fp32 accumulation: nearly fp32 accuracy at
// tensor-core speed. Laid out side by side, the three are one GEMM over a
// K three times as long:
//   activations [rows, 3k] = [big(x) | small(x) | big(x)]
//   weights     [out, 3k]  = [big(W) | big(W)   | small(W)]
// Values that are not finite, or that would round up past the largest float,
// keep big = x (truncated) and small = 0.
#ifndef RANKD_KERNELS_CPU_SPLIT_TF32_H_
#define RANKD_KERNELS_CPU_SPLIT_TF32_H_

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/split_layout.h"

namespace rankd::kernels {

// big = x rounded to TF32 (low 13 mantissa bits zero), small = x - big.
inline void SplitTf32(float x, float* big, float* small) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if (!std::isfinite(x)) {
    *big = x;
    *small = 0.0f;
    return;
  }
  uint32_t rounded = (bits + 0x0FFFu + ((bits >> 13) & 1u)) & ~0x1FFFu;
  float b;
  std::memcpy(&b, &rounded, 4);
  if (!std::isfinite(b)) {  // rounded past the largest float: truncate
    rounded = bits & ~0x1FFFu;
    std::memcpy(&b, &rounded, 4);
  }
  *big = b;
  *small = x - b;
}

// Floats per split row: 3k rounded up to a multiple of 4, so rows stay
// 16-byte aligned for the tensor-core GEMM; the pad columns are zeros.
inline int SplitTf32Width(int k) { return (3 * k + 3) / 4 * 4; }

// Activations: out[r, 0:3k] = [big(x[r]) | small(x[r]) | big(x[r])], then
// zeros up to SplitTf32Width(k), for rows of x `ld` floats apart.
inline void SplitTf32Activations(const float* x, int64_t ld, int64_t rows, int k, float* out) {
  SplitActivationRows<float, SplitTf32>(x, ld, rows, k, SplitTf32Width(k), out);
}

// Weights W [out, in] -> [out, SplitTf32Width(in)] = [big(W) | big(W) |
// small(W)], then zeros.
inline void SplitTf32Weights(const float* w, int out_dim, int in, float* out) {
  SplitWeightRows<float, SplitTf32>(w, out_dim, in, SplitTf32Width(in), out);
}

}  // namespace rankd::kernels

#endif  // RANKD_KERNELS_CPU_SPLIT_TF32_H_
