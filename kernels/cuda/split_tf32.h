// Split precision for TF32 tensor cores ("3xTF32") on the GPU: the per-batch
// split of the activations that feed a split GEMM (DCN cross layers under
// --gpu_math tf32). What the split is, and why three TF32 products are
// nearly fp32: kernels/cpu/split_tf32.h, whose SplitTf32Activations is this
// kernel's CPU twin (same bits).
#ifndef RANKD_KERNELS_CUDA_SPLIT_TF32_H_
#define RANKD_KERNELS_CUDA_SPLIT_TF32_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace rankd::kernels::cuda {

// out[r, 0:3k] = [big(x[r]) | small(x[r]) | big(x[r])], then zeros up to
// kernels::SplitTf32Width(k) (out's row length: 3k rounded up to a multiple
// of 4), for r in [0, rows); x rows are `ld` floats apart. out must not
// overlap x.
cudaError_t LaunchSplitTf32Activations(const float* x, int64_t ld, int64_t rows, int k,
                                       float* out, cudaStream_t stream);

}  // namespace rankd::kernels::cuda

#endif  // RANKD_KERNELS_CUDA_SPLIT_TF32_H_
