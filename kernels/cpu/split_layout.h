// The row layout of the split-precision GEMMs, CPU side, shared by 3xTF32
// (kernels/cpu/split_tf32.h) and bf16x3 (kernels/cpu/split_bf16.h): each
// value x is split into a rounded part and the rest, Split(x, &big, &small),
// and the parts are laid side by side so that the three products
// big.big + small.big + big.small are one GEMM over a K three times as long:
//   activations [rows, 3k] = [big(x) | small(x) | big(x)]
//   weights     [out, 3k]  = [big(W) | big(W)   | small(W)]
// then zeros up to the row width (3k rounded up for alignment).
#ifndef RANKD_KERNELS_CPU_SPLIT_LAYOUT_H_
#define RANKD_KERNELS_CPU_SPLIT_LAYOUT_H_

#include <cstdint>

namespace rankd::kernels {

// Activations: out[r, 0:3k] = [big(x[r]) | small(x[r]) | big(x[r])], then
// zeros up to `width`, for rows of x `ld` floats apart.
template <typename T, void (*Split)(float, T*, T*)>
inline void SplitActivationRows(const float* x, int64_t ld, int64_t rows, int k, int width,
                                T* out) {
  for (int64_t r = 0; r < rows; ++r) {
    T* o = out + r * width;
    for (int j = 0; j < k; ++j) {
      Split(x[r * ld + j], &o[j], &o[k + j]);
      o[2 * k + j] = o[j];
    }
    for (int j = 3 * k; j < width; ++j) o[j] = T{0};
  }
}

// Weights W [out, in] -> [out, width] = [big(W) | big(W) | small(W)], then
// zeros.
template <typename T, void (*Split)(float, T*, T*)>
inline void SplitWeightRows(const float* w, int out_dim, int in, int width, T* out) {
  for (int64_t o = 0; o < out_dim; ++o) {
    T* d = out + o * width;
    for (int j = 0; j < in; ++j) {
      Split(w[o * in + j], &d[j], &d[2 * in + j]);
      d[in + j] = d[j];
    }
    for (int j = 3 * in; j < width; ++j) d[j] = T{0};
  }
}

}  // namespace rankd::kernels

#endif  // RANKD_KERNELS_CPU_SPLIT_LAYOUT_H_
