// CHECK_CUDA for the GPU benchmarks: a failing CUDA call prints where and why
// and exits with status 2 (a benchmark has nothing to recover). Served code
// returns statuses instead (engine/cuda/cuda_util.h, CudaStatus and
// RANKD_RETURN_IF_CUDA_ERROR); tests assert (kernels/cuda/gpu_test_util.h,
// ASSERT_CUDA).
#ifndef RANKD_BENCH_GPU_CHECK_CUDA_H_
#define RANKD_BENCH_GPU_CHECK_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

#define CHECK_CUDA(expr)                                                                      \
  do {                                                                                        \
    const cudaError_t check_cuda_err_ = (expr);                                               \
    if (check_cuda_err_ != cudaSuccess) {                                                     \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr,                      \
                   cudaGetErrorString(check_cuda_err_));                                      \
      std::exit(2);                                                                           \
    }                                                                                         \
  } while (0)

#endif  // RANKD_BENCH_GPU_CHECK_CUDA_H_
