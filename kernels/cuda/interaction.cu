// DLRM interactions: DLRM_Net's dot interaction and DCN-v2's cross combine.
// CPU twins: kernels/cpu/dense.h (DotInteraction, CrossLayerForward).
//
// Dot interaction. A group of G lanes (G = 8, 16 or 32, never crossing a warp)
// owns one row at a time: it stages the row's num_vectors x dim floats in
// shared memory (16-byte loads when the row allows), then each lane computes
// pairs p = g, g + G, ... of the lower triangle and writes them, so the G
// lanes write consecutive floats (coalesced). Shared rows are padded so that
// lanes reading different vectors at the same k hit different banks:
//   16-byte path: row pitch = dim/4 float4s made odd (conflict-free quarter
//                 warps, which is how 16-byte shared loads are served);
//   4-byte path:  row pitch = dim made odd.
// Rows whose staging would need more than 48 KB per group read global memory
// directly (no staging); no DLRM shape comes near that (27 x 64 = 7 KB).
// Few rows (a one-candidate batch): a row's pairs are split over `slices`
// groups (slice q takes pairs g + qG, g + qG + sG, ...; each group stages the
// row itself), so a batch of 16 rows still spreads over enough warps to hide
// the shared-memory and FMA latency instead of 16 warps each walking 351 pairs.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/dot_pairs.cuh"
#include "kernels/cuda/interaction.h"

namespace rankd::kernels::cuda {
namespace {

constexpr int kDotBlockThreads = 128;
// Work items (row slices) the dot interaction aims for before it splits a
// row's pairs: a few groups per SM on the GPUs rankd targets.
constexpr int64_t kSpreadGroups = 512;

// Mask of the lanes of this thread's group (G lanes, G a power of two <= 32).
__device__ __forceinline__ unsigned GroupMask(int group_size) {
  if (group_size == 32) return 0xffffffffu;
  const int lane = threadIdx.x & 31;
  return ((1u << group_size) - 1u) << (lane & ~(group_size - 1));
}

// kVec4: dim % 4 == 0, feats and feats_stride 16-byte aligned.
template <bool kVec4>
__global__ void __launch_bounds__(kDotBlockThreads)
    DotInteractionStagedKernel(const float* __restrict__ feats, int64_t feats_stride,
                               int64_t rows, int n, int dim, int offset, int num_pairs,
                               int pitch, int group_shift, int slices,
                               float* __restrict__ out, int64_t out_stride) {
  extern __shared__ float4 smem4[];
  const int group_size = 1 << group_shift;
  const int g = threadIdx.x & (group_size - 1);
  const int group = threadIdx.x >> group_shift;
  const int groups_per_block = blockDim.x >> group_shift;
  const unsigned mask = GroupMask(group_size);
  // pitch is in float4s (kVec4) or floats.
  float* s = reinterpret_cast<float*>(smem4) +
             static_cast<int64_t>(group) * n * pitch * (kVec4 ? 4 : 1);
  // Work item w = row * slices + slice; the grid strides over items.
  const int64_t items = rows * slices;
  const int step = group_size * slices;  // pairs between a lane's consecutive pairs

  for (int64_t w = static_cast<int64_t>(blockIdx.x) * groups_per_block + group; w < items;
       w += static_cast<int64_t>(gridDim.x) * groups_per_block) {
    const int64_t r = w / slices;
    const int first = g + static_cast<int>(w - r * slices) * group_size;  // this lane's first pair
    const float* src = feats + r * feats_stride;
    if (kVec4) {
      const int dim4 = dim >> 2;
      const float4* src4 = reinterpret_cast<const float4*>(src);
      float4* s4 = reinterpret_cast<float4*>(s);
      const int total4 = n * dim4;
      for (int e = g; e < total4; e += group_size) {
        const int v = e / dim4;
        s4[v * pitch + (e - v * dim4)] = __ldg(src4 + e);
      }
    } else {
      const int total = n * dim;
      for (int e = g; e < total; e += group_size) {
        const int v = e / dim;
        s[v * pitch + (e - v * dim)] = __ldg(src + e);
      }
    }
    __syncwarp(mask);

    float* o = out + r * out_stride;
    if (kVec4) {
      WriteStagedRowVec4(reinterpret_cast<const float4*>(s), pitch, dim, g, group_size, first,
                         step, offset, num_pairs, o);
    } else {
      if (first < group_size) {  // slice 0 copies x = T_0
        for (int k = g; k < dim; k += group_size) o[k] = s[k];
      }
      o += dim;
      int i = 0, j = 0;
      PairOf(first, offset, &i, &j);
      for (int p = first; p < num_pairs; p += step) {
        const float* a = s + i * pitch;
        const float* b = s + j * pitch;
        float acc = 0.f;
        for (int k = 0; k < dim; ++k) acc = fmaf(a[k], b[k], acc);
        o[p] = acc;
        AdvancePair(step, offset, &i, &j);
      }
    }
    __syncwarp(mask);  // the next row overwrites s
  }
}

// Rows too big to stage: one warp per row straight from global memory (L1).
__global__ void __launch_bounds__(kDotBlockThreads)
    DotInteractionGlobalKernel(const float* __restrict__ feats, int64_t feats_stride,
                               int64_t rows, int n, int dim, int offset, int num_pairs,
                               float* __restrict__ out, int64_t out_stride) {
  const int g = threadIdx.x & 31;
  const int warps = blockDim.x >> 5;
  int i0 = 0, j0 = 0;
  PairOf(g, offset, &i0, &j0);
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * warps + (threadIdx.x >> 5); r < rows;
       r += static_cast<int64_t>(gridDim.x) * warps) {
    const float* src = feats + r * feats_stride;
    float* o = out + r * out_stride;
    for (int k = g; k < dim; k += 32) o[k] = __ldg(src + k);
    o += dim;
    int i = i0, j = j0;
    for (int p = g; p < num_pairs; p += 32) {
      const float* a = src + static_cast<int64_t>(i) * dim;
      const float* b = src + static_cast<int64_t>(j) * dim;
      float acc = 0.f;
      for (int k = 0; k < dim; ++k) acc = fmaf(__ldg(a + k), __ldg(b + k), acc);
      o[p] = acc;
      AdvancePair(32, offset, &i, &j);
    }
  }
}

// x_next = x0 * t + x. x_next may alias x (each element is read, then written,
// by the same thread), so neither is __restrict__.
__global__ void CrossCombineVec4Kernel(const float4* __restrict__ x0, const float4* x,
                                       const float4* __restrict__ t, int64_t n4,
                                       float4* x_next) {
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n4;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float4 a = __ldg(x0 + e);
    const float4 b = __ldg(t + e);
    const float4 c = x[e];
    x_next[e] = make_float4(fmaf(a.x, b.x, c.x), fmaf(a.y, b.y, c.y), fmaf(a.z, b.z, c.z),
                            fmaf(a.w, b.w, c.w));
  }
}

__global__ void CrossCombineScalarKernel(const float* __restrict__ x0, const float* x,
                                         const float* __restrict__ t, int64_t n,
                                         float* x_next) {
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    x_next[e] = fmaf(__ldg(x0 + e), __ldg(t + e), x[e]);
  }
}

bool Aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Grid for a grid-stride loop over `items` with `per_block` items per block.
unsigned GridFor(int64_t items, int64_t per_block) {
  const int64_t blocks = (items + per_block - 1) / per_block;
  constexpr int64_t kMaxBlocks = int64_t{1} << 20;  // loops cover the rest
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

}  // namespace

cudaError_t LaunchDotInteraction(const float* feats, int64_t feats_stride, int64_t rows,
                                 int num_vectors, int dim, bool self_interaction, float* out,
                                 int64_t out_stride, cudaStream_t stream) {
  if (rows < 0 || num_vectors < 1 || dim < 1) return cudaErrorInvalidValue;
  const int n = num_vectors;
  const int offset = self_interaction ? 1 : 0;
  const int num_pairs = self_interaction ? n * (n + 1) / 2 : n * (n - 1) / 2;
  if (feats_stride < static_cast<int64_t>(n) * dim || out_stride < dim + num_pairs) {
    return cudaErrorInvalidValue;
  }
  if (rows == 0) return cudaSuccess;
  if (feats == nullptr || out == nullptr) return cudaErrorInvalidValue;

  // Smallest group (>= 8 lanes) that has a pair or an x element per lane.
  const int work = num_pairs > dim ? num_pairs : dim;
  int group_shift = 3;
  while (group_shift < 5 && (1 << group_shift) < work) ++group_shift;
  const int group_size = 1 << group_shift;

  const bool vec4 = dim % 4 == 0 && feats_stride % 4 == 0 && Aligned16(feats);
  // Pitches made odd (in the unit of the shared loads): conflict-free banks.
  const int pitch = vec4 ? Vec4Pitch(dim / 4) : (dim | 1);
  const int64_t group_bytes = static_cast<int64_t>(n) * pitch * (vec4 ? 16 : 4);
  if (group_bytes > kDotStageLimitBytes) {
    const int warps = kDotBlockThreads / 32;
    DotInteractionGlobalKernel<<<GridFor(rows, warps), kDotBlockThreads, 0, stream>>>(
        feats, feats_stride, rows, n, dim, offset, num_pairs, out, out_stride);
    return cudaGetLastError();
  }
  int groups = kDotBlockThreads / group_size;
  while (groups > 1 && groups * group_bytes > kDotStageLimitBytes) --groups;
  const int threads = groups * group_size;
  const size_t smem = static_cast<size_t>(groups * group_bytes);
  // Slices per row: enough work items for kSpreadGroups groups, at most one
  // pass of pairs per lane.
  const int64_t max_slices = std::max<int64_t>(1, (num_pairs + group_size - 1) / group_size);
  const int slices =
      static_cast<int>(std::clamp<int64_t>((kSpreadGroups + rows - 1) / rows, 1, max_slices));
  const unsigned grid = GridFor(rows * slices, groups);
  if (vec4) {
    DotInteractionStagedKernel<true><<<grid, threads, smem, stream>>>(
        feats, feats_stride, rows, n, dim, offset, num_pairs, pitch, group_shift, slices, out,
        out_stride);
  } else {
    DotInteractionStagedKernel<false><<<grid, threads, smem, stream>>>(
        feats, feats_stride, rows, n, dim, offset, num_pairs, pitch, group_shift, slices, out,
        out_stride);
  }
  return cudaGetLastError();
}

cudaError_t LaunchCrossCombine(const float* x0, const float* x, const float* t, int64_t rows,
                               int n, float* x_next, cudaStream_t stream) {
  if (rows < 0 || n < 0) return cudaErrorInvalidValue;
  const int64_t total = rows * n;
  if (total == 0) return cudaSuccess;
  if (x0 == nullptr || x == nullptr || t == nullptr || x_next == nullptr) {
    return cudaErrorInvalidValue;
  }
  constexpr int kThreads = 256;
  if (total % 4 == 0 && Aligned16(x0) && Aligned16(x) && Aligned16(t) && Aligned16(x_next)) {
    const int64_t n4 = total / 4;
    CrossCombineVec4Kernel<<<GridFor(n4, kThreads), kThreads, 0, stream>>>(
        reinterpret_cast<const float4*>(x0), reinterpret_cast<const float4*>(x),
        reinterpret_cast<const float4*>(t), n4, reinterpret_cast<float4*>(x_next));
  } else {
    CrossCombineScalarKernel<<<GridFor(total, kThreads), kThreads, 0, stream>>>(x0, x, t, total,
                                                                                x_next);
  }
  return cudaGetLastError();
}

}  // namespace rankd::kernels::cuda
