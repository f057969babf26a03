// Split precision for bf16 tensor cores ("bf16x3") on the GPU: the per-batch
// split of the activations that feed a split GEMM (DCN cross layers under
// --gpu_cross_math bf16x3). What the split is, and why three bf16 products
// come within ~2^-17 of fp32: kernels/cpu/split_bf16.h, whose
// SplitBf16Activations is this kernel's CPU twin (same bits).
#ifndef RANKD_KERNELS_CUDA_SPLIT_BF16_H_
#define RANKD_KERNELS_CUDA_SPLIT_BF16_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace rankd::kernels::cuda {

// out[r, 0:3k] = [hi(x[r]) | lo(x[r]) | hi(x[r])] as bf16 bit patterns,
// then zeros up to kernels::SplitBf16Width(k) (out's row length: 3k rounded
// up to a multiple of 8), for r in [0, rows); x rows are `ld` floats apart.
// out must not overlap x.
cudaError_t LaunchSplitBf16Activations(const float* x, int64_t ld, int64_t rows, int k,
                                       uint16_t* out, cudaStream_t stream);

}  // namespace rankd::kernels::cuda

#endif  // RANKD_KERNELS_CUDA_SPLIT_BF16_H_
