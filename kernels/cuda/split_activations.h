// Split precision on the GPU: the per-batch split of the activations that feed
// a split GEMM (DCN cross layers under --gpu_math tf32, "3xTF32", or
// --gpu_cross_math bf16x3). What each split is, and why three products of its
// parts come near fp32: kernels/cpu/split_tf32.h and kernels/cpu/split_bf16.h,
// whose SplitTf32Activations and SplitBf16Activations are these kernels' CPU
// twins (same bits).
#ifndef RANKD_KERNELS_CUDA_SPLIT_ACTIVATIONS_H_
#define RANKD_KERNELS_CUDA_SPLIT_ACTIVATIONS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace rankd::kernels::cuda {

// out[r, 0:3k] = [big(x[r]) | small(x[r]) | big(x[r])] in TF32 (float
// storage), then zeros up to kernels::SplitTf32Width(k) (out's row length: 3k
// rounded up to a multiple of 4), for r in [0, rows); x rows are `ld` floats
// apart. out must not overlap x. cudaErrorInvalidValue for null pointers,
// negative sizes, ld < k or more than 65,535 * 1,024 rows.
cudaError_t LaunchSplitTf32Activations(const float* x, int64_t ld, int64_t rows, int k,
                                       float* out, cudaStream_t stream);

// out[r, 0:3k] = [hi(x[r]) | lo(x[r]) | hi(x[r])] as bf16 bit patterns, then
// zeros up to kernels::SplitBf16Width(k) (3k rounded up to a multiple of 8);
// otherwise as LaunchSplitTf32Activations.
cudaError_t LaunchSplitBf16Activations(const float* x, int64_t ld, int64_t rows, int k,
                                       uint16_t* out, cudaStream_t stream);

}  // namespace rankd::kernels::cuda

#endif  // RANKD_KERNELS_CUDA_SPLIT_ACTIVATIONS_H_
