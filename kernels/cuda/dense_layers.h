// Dense layers on the GPU. The MLP's GEMMs go through cuBLASLt
// (kernels/cuda/cublaslt.h); this file holds what cuBLAS does badly: the
// last, 1-wide layer fused with the sigmoid. CPU twin: kernels/cpu/dense.h
// (LinearForward with Activation::kSigmoid and out = 1).
#ifndef RANKD_KERNELS_CUDA_DENSE_LAYERS_H_
#define RANKD_KERNELS_CUDA_DENSE_LAYERS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace rankd::kernels::cuda {

// scores[r] = sigmoid(dot(in[r, 0:in_dim], w) + b[0]) for r in [0, rows).
// chained: launched as a programmatic dependent of the previous kernel on
// `stream` (small_rows_linear.h); the kernel waits for that kernel's grid
// before it reads `in`.
cudaError_t LaunchFinalLogitSigmoid(const float* in, int64_t in_stride, int64_t rows,
                                    const float* w, const float* b, int in_dim, float* scores,
                                    cudaStream_t stream, bool chained = false);

}  // namespace rankd::kernels::cuda

#endif  // RANKD_KERNELS_CUDA_DENSE_LAYERS_H_
