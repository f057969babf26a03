// The top MLP's last layer (out = 1) fused with the sigmoid.
//
// A group of G lanes (G a power of two, 1..32, picked from in_dim) computes
// one row's dot product: each lane strides over the row G elements apart
// (float4 loads when the row and w are 16-byte aligned), then the group sums
// with warp shuffles (xor offsets < G stay inside an aligned group). A warp
// thus scores 32 / G rows at a time; the grid strides over rows.
// CPU twin: kernels::LinearForward with Activation::kSigmoid, out = 1.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/dense_layers.h"
#include "kernels/cuda/grid_dependency.cuh"

namespace rankd::kernels::cuda {
namespace {

constexpr int kBlockThreads = 256;
constexpr int kMaxBlocks = 1 << 16;  // grid-stride beyond this

template <int G, bool kVec>
__global__ void __launch_bounds__(kBlockThreads)
    FinalLogitSigmoidKernel(const float* __restrict__ in, int64_t in_stride, int64_t rows,
                            const float* __restrict__ w, const float* __restrict__ b, int in_dim,
                            float* __restrict__ scores) {
  // After a chained launch of the layer before (small_rows_linear.h).
  WaitForPrerequisiteGrid();
  constexpr int kRowsPerWarp = 32 / G;
  const int lane = threadIdx.x & 31;
  const int sub = lane & (G - 1);
  const int group = lane / G;
  const int64_t warps_per_block = kBlockThreads / 32;
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * warps_per_block + threadIdx.x / 32;
  const int64_t total_warps = static_cast<int64_t>(gridDim.x) * warps_per_block;
  const float bias = b != nullptr ? __ldg(b) : 0.0f;

  // The loop condition is uniform across the warp, so every shuffle has all
  // 32 lanes; lanes past the last row compute on nothing and store nothing.
  for (int64_t base = warp * kRowsPerWarp; base < rows; base += total_warps * kRowsPerWarp) {
    const int64_t row = base + group;
    const bool valid = row < rows;
    float acc = 0.0f;
    if (valid) {
      const float* x = in + row * in_stride;
      int i0 = 0;
      if constexpr (kVec) {
        const int n4 = in_dim >> 2;
        const float4* x4 = reinterpret_cast<const float4*>(x);
        const float4* w4 = reinterpret_cast<const float4*>(w);
#pragma unroll 2
        for (int i = sub; i < n4; i += G) {
          const float4 xv = __ldg(x4 + i);
          const float4 wv = __ldg(w4 + i);
          acc = fmaf(xv.x, wv.x, acc);
          acc = fmaf(xv.y, wv.y, acc);
          acc = fmaf(xv.z, wv.z, acc);
          acc = fmaf(xv.w, wv.w, acc);
        }
        i0 = n4 << 2;
      }
#pragma unroll 4
      for (int i = i0 + sub; i < in_dim; i += G) acc = fmaf(__ldg(x + i), __ldg(w + i), acc);
    }
#pragma unroll
    for (int offset = G / 2; offset > 0; offset /= 2) {
      acc += __shfl_xor_sync(0xffffffffu, acc, offset);
    }
    if (valid && sub == 0) {
      const float z = acc + bias;
      // Accurate expf (no fast-math): within a few ulp of the CPU's std::exp.
      scores[row] = 1.0f / (1.0f + expf(-z));
    }
  }
}

template <int G>
cudaError_t Launch(bool vec, int blocks, const float* in, int64_t in_stride, int64_t rows,
                   const float* w, const float* b, int in_dim, float* scores, bool chained,
                   cudaStream_t stream) {
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t config =
      ChainableConfig(dim3(blocks), dim3(kBlockThreads), stream, chained, &attr);
  if (vec) {
    return cudaLaunchKernelEx(&config, FinalLogitSigmoidKernel<G, true>, in, in_stride, rows, w,
                              b, in_dim, scores);
  }
  return cudaLaunchKernelEx(&config, FinalLogitSigmoidKernel<G, false>, in, in_stride, rows, w, b,
                            in_dim, scores);
}

bool Aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

cudaError_t LaunchFinalLogitSigmoid(const float* in, int64_t in_stride, int64_t rows,
                                    const float* w, const float* b, int in_dim, float* scores,
                                    cudaStream_t stream, bool chained) {
  if (rows < 0 || in_dim <= 0 || in_stride < in_dim) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  // b may be null (no bias), like LinearForward's.
  if (in == nullptr || w == nullptr || scores == nullptr) return cudaErrorInvalidValue;

  const bool vec = Aligned16(in) && Aligned16(w) && in_stride % 4 == 0;
  // Lanes per row: enough for about 4 elements (one float4) per lane and pass.
  const int chunks = (in_dim + 3) / 4;
  int g = 1;
  while (g < chunks && g < 32) g *= 2;
  const int64_t rows_per_block = static_cast<int64_t>(kBlockThreads / g);
  const int64_t want = (rows + rows_per_block - 1) / rows_per_block;
  const int blocks = static_cast<int>(want < kMaxBlocks ? want : kMaxBlocks);
  switch (g) {
    case 1:
      return Launch<1>(vec, blocks, in, in_stride, rows, w, b, in_dim, scores, chained, stream);
    case 2:
      return Launch<2>(vec, blocks, in, in_stride, rows, w, b, in_dim, scores, chained, stream);
    case 4:
      return Launch<4>(vec, blocks, in, in_stride, rows, w, b, in_dim, scores, chained, stream);
    case 8:
      return Launch<8>(vec, blocks, in, in_stride, rows, w, b, in_dim, scores, chained, stream);
    case 16:
      return Launch<16>(vec, blocks, in, in_stride, rows, w, b, in_dim, scores, chained, stream);
    default:
      return Launch<32>(vec, blocks, in, in_stride, rows, w, b, in_dim, scores, chained, stream);
  }
}

}  // namespace rankd::kernels::cuda
