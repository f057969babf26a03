// CHECK_CUDA for the GPU benchmarks: a failing CUDA call prints where, the
// call and the error (worded by kernels/cuda/cuda_status.h like everywhere
// else) and exits with status 2: a benchmark has nothing to recover. Served
// code returns the status instead (RANKD_RETURN_IF_CUDA_ERROR); tests assert
// (ASSERT_CUDA, kernels/cuda/gpu_test_util.h).
#ifndef RANKD_BENCH_GPU_CHECK_CUDA_H_
#define RANKD_BENCH_GPU_CHECK_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "kernels/cuda/cuda_status.h"

namespace rankd::bench {

// Prints "<file>:<line>: <status message>" and exits with 2 unless `s` is OK.
inline void ExitUnlessOk(const absl::Status& s, const char* file, int line) {
  if (s.ok()) return;
  std::fprintf(stderr, "%s:%d: %s\n", file, line, std::string(s.message()).c_str());
  std::exit(2);
}

}  // namespace rankd::bench

#define CHECK_CUDA(expr)                                                                     \
  ::rankd::bench::ExitUnlessOk(::rankd::kernels::cuda::CudaStatus((expr), #expr), __FILE__, \
                               __LINE__)

#endif  // RANKD_BENCH_GPU_CHECK_CUDA_H_
