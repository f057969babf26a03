// Split precision for bf16 tensor cores ("bf16x3"), CPU side: the reference
// for kernels/cuda/split_bf16.h and the weights' split at load.
//
// bf16 keeps 7 of fp32's 23 mantissa bits (and all 8 exponent bits, so no
// value overflows the way fp16 would). Writing x = hi + lo, with hi = x
// rounded to bf16 (round to nearest, ties to even) and lo = x - hi rounded to
// bf16, leaves a remainder of about 2^-9 |lo| <= 2^-18 |x|. Then
//   x.w ~ hi_x.hi_w + lo_x.hi_w + hi_x.lo_w
// drops lo_x.lo_w and the remainders, all about 2^-17 relative: 64 times
// closer than one TF32 pass (2^-11), at bf16 tensor-core speed (twice TF32's)
// with half of 3xTF32's bytes (kernels/cpu/split_tf32.h is the 3xTF32 twin
// of this file). Laid out side by side, the three products are one GEMM
// over a K three times as long, accumulated in fp32:
//   activations [rows, 3k] = [hi(x) | lo(x) | hi(x)]
//   weights     [out, 3k]  = [hi(W) | hi(W) | lo(W)]
// Values are bf16 bit patterns (uint16_t: the high half of the fp32 bits).
// Values that are not finite, or that would round up past the largest
// float, keep hi = x truncated (NaN stays NaN) and lo = 0.
#ifndef RANKD_KERNELS_CPU_SPLIT_BF16_H_
#define RANKD_KERNELS_CPU_SPLIT_BF16_H_

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/split_layout.h"

namespace rankd::kernels {

// The fp32 value of a bf16 bit pattern (exact).
inline float Bf16ToFloat(uint16_t h) {
  const uint32_t bits = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// x rounded to bf16, nearest even; not finite, or rounding past the largest
// float: truncated (a NaN keeps a mantissa bit set so it stays NaN).
inline uint16_t FloatToBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if (!std::isfinite(x)) return static_cast<uint16_t>((bits >> 16) | (std::isnan(x) ? 0x40u : 0u));
  const uint32_t rounded = bits + 0x7FFFu + ((bits >> 16) & 1u);
  if ((rounded & 0x7F800000u) == 0x7F800000u) return static_cast<uint16_t>(bits >> 16);
  return static_cast<uint16_t>(rounded >> 16);
}

// hi = x rounded to bf16, lo = (x - hi) rounded to bf16 (x - hi is exact in
// fp32); lo = 0 for values that are not finite.
inline void SplitBf16(float x, uint16_t* hi, uint16_t* lo) {
  *hi = FloatToBf16(x);
  *lo = std::isfinite(x) ? FloatToBf16(x - Bf16ToFloat(*hi)) : uint16_t{0};
}

// Elements per split row: 3k rounded up to a multiple of 8, so rows stay
// 16-byte aligned for the tensor-core GEMM; the pad columns are zeros.
inline int SplitBf16Width(int k) { return (3 * k + 7) / 8 * 8; }

// Activations: out[r, 0:3k] = [hi(x[r]) | lo(x[r]) | hi(x[r])], then zeros
// up to SplitBf16Width(k), for rows of x `ld` floats apart.
inline void SplitBf16Activations(const float* x, int64_t ld, int64_t rows, int k,
                                 uint16_t* out) {
  SplitActivationRows<uint16_t, SplitBf16>(x, ld, rows, k, SplitBf16Width(k), out);
}

// Weights W [out, in] -> [out, SplitBf16Width(in)] = [hi(W) | hi(W) |
// lo(W)], then zeros.
inline void SplitBf16Weights(const float* w, int out_dim, int in, uint16_t* out) {
  SplitWeightRows<uint16_t, SplitBf16>(w, out_dim, in, SplitBf16Width(in), out);
}

}  // namespace rankd::kernels

#endif  // RANKD_KERNELS_CPU_SPLIT_BF16_H_
