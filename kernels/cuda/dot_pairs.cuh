// Device helpers of the dot interaction shared by its kernels
// (interaction.cu) and the unit-bag lookup fused with it
// (unit_bag_dot.cu): pair order, the staged layout's pitch and size bound,
// the dot product of two staged vectors and a staged row's output. Both kernels use these same functions, so a pair's value
// is the same bits whichever kernel computes it.
#ifndef RANKD_KERNELS_CUDA_DOT_PAIRS_CUH_
#define RANKD_KERNELS_CUDA_DOT_PAIRS_CUH_

#include <cuda_runtime.h>

namespace rankd::kernels::cuda {

// Lower-triangle position of pair p: pairs (1,0), (2,0), (2,1), (3,0), ...
// or, with self interaction (offset 1), (0,0), (1,0), (1,1), (2,0), ...
// Row i holds i + offset pairs.
__device__ __forceinline__ void PairOf(int p, int offset, int* i, int* j) {
  int row = 1 - offset;
  while (p >= row + offset) {
    p -= row + offset;
    ++row;
  }
  *i = row;
  *j = p;
}

// Moves (i, j) `step` pairs further along the same order.
__device__ __forceinline__ void AdvancePair(int step, int offset, int* i, int* j) {
  *j += step;
  while (*j >= *i + offset) {
    *j -= *i + offset;
    ++*i;
  }
}

// <a, b> over dim4 float4s of shared memory: one partial sum per component
// (4 independent FMA chains), added pairwise at the end.
__device__ __forceinline__ float DotVec4(const float4* a, const float4* b, int dim4) {
  float ax = 0.f, ay = 0.f, az = 0.f, aw = 0.f;
  for (int k = 0; k < dim4; ++k) {
    const float4 u = a[k];
    const float4 v = b[k];
    ax = fmaf(u.x, v.x, ax);
    ay = fmaf(u.y, v.y, ay);
    az = fmaf(u.z, v.z, az);
    aw = fmaf(u.w, v.w, aw);
  }
  return (ax + ay) + (az + aw);
}

// Rows staged in shared memory take at most this many bytes per row (more:
// the dot interaction reads global memory; the fused lookup is refused). No
// DLRM shape comes near it (27 vectors of 64 floats: 7 KB).
constexpr int kDotStageLimitBytes = 48 * 1024;

// Odd pitch (in float4s) of a staged vector of dim4 float4s: lanes reading
// different vectors at the same k hit different banks (16-byte shared loads
// are served a quarter warp at a time).
__host__ __device__ __forceinline__ int Vec4Pitch(int dim4) { return dim4 | 1; }

// One staged row's output (vec4 layout: vector v at s4 + v * pitch): the
// lanes of slice 0 (first < group_size) copy x = vector 0 to o[0, dim); each
// lane then writes its pairs first, first + step, ... to o[dim + p].
__device__ __forceinline__ void WriteStagedRowVec4(const float4* s4, int pitch, int dim, int g,
                                                   int group_size, int first, int step,
                                                   int offset, int num_pairs, float* o) {
  const float* s = reinterpret_cast<const float*>(s4);
  if (first < group_size) {
    for (int k = g; k < dim; k += group_size) o[k] = s[k];
  }
  o += dim;
  int i = 0, j = 0;
  PairOf(first, offset, &i, &j);
  for (int p = first; p < num_pairs; p += step) {
    o[p] = DotVec4(s4 + i * pitch, s4 + j * pitch, dim >> 2);
    AdvancePair(step, offset, &i, &j);
  }
}

}  // namespace rankd::kernels::cuda

#endif  // RANKD_KERNELS_CUDA_DOT_PAIRS_CUH_
