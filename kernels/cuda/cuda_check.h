// Error checking for CUDA runtime calls in kernels/cuda. Launchers return the
// cudaError_t of their launch (cudaGetLastError right after it), so callers
// (engine/cuda) turn it into an absl::Status with context.
#ifndef RANKD_KERNELS_CUDA_CUDA_CHECK_H_
#define RANKD_KERNELS_CUDA_CUDA_CHECK_H_

#include <cuda_runtime_api.h>

#define RANKD_CUDA_RETURN_IF_ERROR(expr)      \
  do {                                        \
    const cudaError_t rankd_err_ = (expr);    \
    if (rankd_err_ != cudaSuccess) return rankd_err_; \
  } while (0)

#endif  // RANKD_KERNELS_CUDA_CUDA_CHECK_H_
