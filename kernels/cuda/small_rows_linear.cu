// y = act(x W^T + b) over at most 16 rows (see small_rows_linear.h).
//
// Work item: one output column o for kRowsPerWarp (4) rows. A group of G
// lanes (G a power of two, 1..32: one lane per chunk of the input row, up to
// a warp) computes it: lane `sub` of the group takes the chunks sub, sub + G,
// sub + 2G, ... of W's row o (16-byte float4 chunks when W, x and the leading
// dimensions allow, else single floats) and the same chunks of each of its 4
// rows of x, keeping one partial sum per row; the group then sums each row's
// partials with xor-shuffles (offsets < G stay inside the group) and lane
// r % G writes row r. A warp covers 32 / G columns for one group of 4 rows;
// a block's 8 warps are the 4 row groups of 2 column sets, so the warps that
// share a column's weights share an SM's L1. Splitting the rows over warps
// keeps each warp's chain of dependent instructions short: at this size the
// kernel is latency-bound (few warps, each waiting on its loads), not
// bandwidth- or compute-bound.
//
// Order of work, for the programmatic dependent launch: let the next kernel
// launch, load this lane's first kPrefetch weight chunks (the weights do not
// depend on the previous kernel), then wait for the previous kernel's grid,
// and only then read x (through the read-only cache).
// CPU twin: kernels::LinearForward (kernels/cpu/dense.h).
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/grid_dependency.cuh"
#include "kernels/cuda/small_rows_linear.h"

namespace rankd::kernels::cuda {
namespace {

constexpr int kBlockThreads = 256;
constexpr int kWarpsPerBlock = kBlockThreads / 32;
// Weight chunks a lane holds before it waits for the previous kernel; the
// rest are loaded batch by batch as the loop reaches them.
constexpr int kPrefetch = 4;

__device__ __forceinline__ float Dot(float4 a, float4 b, float acc) {
  acc = fmaf(a.x, b.x, acc);
  acc = fmaf(a.y, b.y, acc);
  acc = fmaf(a.z, b.z, acc);
  return fmaf(a.w, b.w, acc);
}
__device__ __forceinline__ float Dot(float a, float b, float acc) { return fmaf(a, b, acc); }

constexpr int kRowsPerWarp = 4;
constexpr int kRowGroups = kSmallRowsMax / kRowsPerWarp;
constexpr int kColumnSets = kWarpsPerBlock / kRowGroups;
static_assert(kRowGroups * kRowsPerWarp == kSmallRowsMax, "row groups cover the rows");
static_assert(kColumnSets * kRowGroups == kWarpsPerBlock, "a block is whole column sets");

// V: float4 (16-byte chunks) or float. Chunk counts and leading dimensions
// are in units of V.
template <int G, typename V>
__global__ void __launch_bounds__(kBlockThreads)
    SmallRowsLinearKernel(const V* __restrict__ w, const float* __restrict__ bias, int chunks,
                          int out, const V* __restrict__ x, int64_t x_ld, int rows, bool relu,
                          float* __restrict__ y, int64_t y_ld) {
  LetDependentGridsLaunch();
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x / 32;
  const int row0 = (warp % kRowGroups) * kRowsPerWarp;
  if (row0 >= rows) return;  // the whole warp: no shuffle loses a lane
  const int sub = lane & (G - 1);
  const int o = (blockIdx.x * kColumnSets + warp / kRowGroups) * (32 / G) + lane / G;
  const bool valid = o < out;
  const V* w_row = w + static_cast<int64_t>(valid ? o : 0) * chunks;
  const V* x_rows = x + row0 * x_ld;
  // Chunks of this lane: sub + j * G for j < per_lane (the same count for
  // every lane of the grid, so the loop below is uniform).
  const int per_lane = (chunks + G - 1) / G;

  V wv[kPrefetch] = {};
#pragma unroll
  for (int j = 0; j < kPrefetch; ++j) {
    const int c = sub + j * G;
    if (valid && c < chunks) wv[j] = __ldg(w_row + c);
  }
  const float b = (valid && bias != nullptr) ? __ldg(bias + o) : 0.0f;

  WaitForPrerequisiteGrid();

  bool has[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) has[r] = row0 + r < rows;
  float acc[kRowsPerWarp] = {};
  for (int j0 = 0; j0 < per_lane; j0 += kPrefetch) {
    V cur[kPrefetch];
#pragma unroll
    for (int j = 0; j < kPrefetch; ++j) cur[j] = wv[j];
    if (j0 + kPrefetch < per_lane) {
#pragma unroll
      for (int j = 0; j < kPrefetch; ++j) {
        const int c = sub + (j0 + kPrefetch + j) * G;
        if (valid && c < chunks) wv[j] = __ldg(w_row + c);
      }
    }
#pragma unroll
    for (int j = 0; j < kPrefetch; ++j) {
      const int c = sub + (j0 + j) * G;
      if (!valid || c >= chunks) continue;
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        if (has[r]) acc[r] = Dot(__ldg(x_rows + r * x_ld + c), cur[j], acc[r]);
      }
    }
  }

  // Every lane of the warp takes part in the shuffles (full mask); lanes of
  // columns past `out` sum zeros and write nothing.
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
#pragma unroll
    for (int offset = G / 2; offset > 0; offset /= 2) {
      acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], offset);
    }
  }
  if (!valid) return;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    if (has[r] && r % G == sub) {
      const float v = acc[r] + b;
      y[(row0 + r) * y_ld + o] = relu ? fmaxf(v, 0.0f) : v;
    }
  }
}

bool Aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

template <int G, typename V>
cudaError_t Launch(const SmallRowsLinearArgs& a, int unit, bool chained, cudaStream_t stream) {
  const int per_block = kColumnSets * (32 / G);
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t config =
      ChainableConfig(dim3(static_cast<unsigned>((a.out + per_block - 1) / per_block)),
                      dim3(kBlockThreads), stream, chained, &attr);
  return cudaLaunchKernelEx(&config, SmallRowsLinearKernel<G, V>,
                            reinterpret_cast<const V*>(a.weight), a.bias, a.in / unit, a.out,
                            reinterpret_cast<const V*>(a.x), a.x_ld / unit, a.rows,
                            a.act == Activation::kRelu, a.y, a.y_ld);
}

template <typename V>
cudaError_t LaunchFor(const SmallRowsLinearArgs& a, int unit, bool chained, cudaStream_t stream) {
  // Lanes per column: one per chunk, at most the warp.
  const int chunks = (a.in + unit - 1) / unit;
  int g = 1;
  while (g < chunks && g < 32) g *= 2;
  switch (g) {
    case 1:
      return Launch<1, V>(a, unit, chained, stream);
    case 2:
      return Launch<2, V>(a, unit, chained, stream);
    case 4:
      return Launch<4, V>(a, unit, chained, stream);
    case 8:
      return Launch<8, V>(a, unit, chained, stream);
    case 16:
      return Launch<16, V>(a, unit, chained, stream);
    default:
      return Launch<32, V>(a, unit, chained, stream);
  }
}

}  // namespace

cudaError_t LaunchSmallRowsLinear(const SmallRowsLinearArgs& a, bool chained,
                                  cudaStream_t stream) {
  if (a.rows < 0 || a.rows > kSmallRowsMax || a.in < 1 || a.out < 1 || a.x_ld < a.in ||
      a.y_ld < a.out) {
    return cudaErrorInvalidValue;
  }
  if (a.act != Activation::kNone && a.act != Activation::kRelu) return cudaErrorInvalidValue;
  if (a.rows == 0) return cudaSuccess;
  if (a.weight == nullptr || a.x == nullptr || a.y == nullptr) return cudaErrorInvalidValue;
  const bool vec = a.in % 4 == 0 && a.x_ld % 4 == 0 && Aligned16(a.weight) && Aligned16(a.x);
  return vec ? LaunchFor<float4>(a, 4, chained, stream) : LaunchFor<float>(a, 1, chained, stream);
}

}  // namespace rankd::kernels::cuda
