// DLRM interactions on the GPU. CPU twins: kernels/cpu/dense.h
// (DotInteraction, CrossLayerForward).
#ifndef RANKD_KERNELS_CUDA_INTERACTION_H_
#define RANKD_KERNELS_CUDA_INTERACTION_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace rankd::kernels::cuda {

// feats [rows, feats_stride] holding num_vectors vectors of `dim` floats each
// (x first, then e_0..) -> out [rows, out_stride]: x then <T_i, T_j> for all
// i > j (i >= j with self_interaction) in row-major lower-triangle order, as
// DLRM_Net. fp32 arithmetic.
cudaError_t LaunchDotInteraction(const float* feats, int64_t feats_stride, int64_t rows,
                                 int num_vectors, int dim, bool self_interaction, float* out,
                                 int64_t out_stride, cudaStream_t stream);

// How a dot interaction of `rows` rows is laid out on the GPU: groups of
// 2^group_shift lanes (8 to 32, never crossing a warp) each stage one row's
// num_vectors vectors in shared memory (vector v at v * pitch, pitch in
// float4s with vec4 or floats without), `slices` groups per row when there
// are few rows (each takes every slices-th run of pairs), `threads` lanes and
// `smem` bytes a block, `grid` blocks. staged == false: a row would not fit
// in shared memory (only the launch's global-memory kernel applies). Used by
// LaunchDotInteraction and by the unit-bag lookup fused with it
// (unit_bag_dot.h), so both lay rows out alike.
struct DotLaunch {
  bool staged = false;
  int group_shift = 5;
  int pitch = 0;
  int slices = 1;
  int threads = 0;
  size_t smem = 0;
  unsigned grid = 0;
};
DotLaunch PlanDotLaunch(int64_t rows, int num_vectors, int dim, bool self_interaction,
                        bool vec4);

// DCN-v2 low-rank cross combine: x_next = x0 * t + x, all [rows, n]
// contiguous, where t = W (V x) + b was computed by two GEMMs (the bias by the
// second GEMM's epilogue). x_next may alias x.
cudaError_t LaunchCrossCombine(const float* x0, const float* x, const float* t, int64_t rows,
                               int n, float* x_next, cudaStream_t stream);

}  // namespace rankd::kernels::cuda

#endif  // RANKD_KERNELS_CUDA_INTERACTION_H_
