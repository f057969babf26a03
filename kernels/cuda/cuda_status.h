// The one way rankd words a CUDA runtime error and turns it into an
// absl::Status. Served code returns it (RANKD_RETURN_IF_CUDA_ERROR), GPU tests
// assert on it (ASSERT_CUDA, kernels/cuda/gpu_test_util.h) and the GPU
// benchmarks exit with it (CHECK_CUDA, bench/gpu/check_cuda.h), so an error
// reads the same wherever it surfaces. Host code: nothing here launches.
#ifndef RANKD_KERNELS_CUDA_CUDA_STATUS_H_
#define RANKD_KERNELS_CUDA_CUDA_STATUS_H_

#include <cuda_runtime_api.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace rankd::kernels::cuda {

// "cudaErrorMemoryAllocation (out of memory)": the error's name, then
// CUDA's description of it.
inline std::string CudaErrorText(cudaError_t err) {
  return absl::StrCat(cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
}

// OK for cudaSuccess; otherwise "<what>: <CudaErrorText>", RESOURCE_EXHAUSTED
// when the GPU ran out of memory and INTERNAL for any other error.
inline absl::Status CudaStatus(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return absl::OkStatus();
  const absl::StatusCode code = err == cudaErrorMemoryAllocation
                                    ? absl::StatusCode::kResourceExhausted
                                    : absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrCat(what, ": ", CudaErrorText(err)));
}

}  // namespace rankd::kernels::cuda

// Returns CudaStatus(expr, what) from the enclosing function when `expr` (a
// cudaError_t) is not cudaSuccess.
#define RANKD_RETURN_IF_CUDA_ERROR(expr, what)                                           \
  do {                                                                                   \
    const absl::Status rankd_s_ = ::rankd::kernels::cuda::CudaStatus((expr), (what));    \
    if (!rankd_s_.ok()) return rankd_s_;                                                 \
  } while (0)

#endif  // RANKD_KERNELS_CUDA_CUDA_STATUS_H_
