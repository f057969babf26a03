// y = act(x W^T + b) for inputs of at most 32 features (see thin_linear.h).
#include "kernels/cuda/thin_linear.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace rankd::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kRows = 16;  // rows a block owns

__global__ void __launch_bounds__(kThreads)
    ThinLinearKernel(const float* __restrict__ w, const float* __restrict__ bias, int in,
                     int out, const float* __restrict__ x, int64_t x_ld, int64_t rows, bool relu,
                     float* __restrict__ y, int64_t y_ld) {
  __shared__ float xs[kRows][kThinLinearMaxIn];
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int valid_rows = rows - row0 < kRows ? static_cast<int>(rows - row0) : kRows;
  for (int i = threadIdx.x; i < kRows * in; i += kThreads) {
    const int r = i / in, k = i - r * in;
    xs[r][k] = r < valid_rows ? __ldg(x + (row0 + r) * x_ld + k) : 0.0f;
  }
  __syncthreads();
  for (int c = threadIdx.x; c < out; c += kThreads) {
    float wc[kThinLinearMaxIn];
#pragma unroll
    for (int k = 0; k < kThinLinearMaxIn; ++k) {
      wc[k] = k < in ? __ldg(w + static_cast<int64_t>(c) * in + k) : 0.0f;
    }
    const float b = bias != nullptr ? __ldg(bias + c) : 0.0f;
    for (int r = 0; r < valid_rows; ++r) {
      float acc = 0.0f;
#pragma unroll
      for (int k = 0; k < kThinLinearMaxIn; ++k) {
        if (k < in) acc = fmaf(xs[r][k], wc[k], acc);
      }
      float v = acc + b;
      if (relu) v = fmaxf(v, 0.0f);
      y[(row0 + r) * y_ld + c] = v;
    }
  }
}

}  // namespace

cudaError_t LaunchThinLinear(const ThinLinearArgs& a, cudaStream_t stream) {
  if (a.in < 1 || a.in > kThinLinearMaxIn || a.out < 1 || a.rows < 0 || a.x_ld < a.in ||
      a.y_ld < a.out || (a.act != Activation::kNone && a.act != Activation::kRelu)) {
    return cudaErrorInvalidValue;
  }
  if (a.rows == 0) return cudaSuccess;
  if (a.weight == nullptr || a.x == nullptr || a.y == nullptr) return cudaErrorInvalidValue;
  const int64_t blocks = (a.rows + kRows - 1) / kRows;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  ThinLinearKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      a.weight, a.bias, a.in, a.out, a.x, a.x_ld, a.rows, a.act == Activation::kRelu, a.y,
      a.y_ld);
  return cudaGetLastError();
}

}  // namespace rankd::kernels::cuda
