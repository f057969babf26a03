// DLRM interactions on the GPU. CPU twins: kernels/cpu/dense.h
// (DotInteraction, CrossLayerForward).
#ifndef RANKD_KERNELS_CUDA_INTERACTION_H_
#define RANKD_KERNELS_CUDA_INTERACTION_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace rankd::kernels::cuda {

// feats [rows, feats_stride] holding num_vectors vectors of `dim` floats each
// (x first, then e_0..) -> out [rows, out_stride]: x then <T_i, T_j> for all
// i > j (i >= j with self_interaction) in row-major lower-triangle order, as
// DLRM_Net. fp32 arithmetic.
cudaError_t LaunchDotInteraction(const float* feats, int64_t feats_stride, int64_t rows,
                                 int num_vectors, int dim, bool self_interaction, float* out,
                                 int64_t out_stride, cudaStream_t stream);

// DCN-v2 low-rank cross combine: x_next = x0 * t + x, all [rows, n]
// contiguous, where t = W (V x) + b was computed by two GEMMs (the bias by the
// second GEMM's epilogue). x_next may alias x.
cudaError_t LaunchCrossCombine(const float* x0, const float* x, const float* t, int64_t rows,
                               int n, float* x_next, cudaStream_t stream);

}  // namespace rankd::kernels::cuda

#endif  // RANKD_KERNELS_CUDA_INTERACTION_H_
