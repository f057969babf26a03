// Device arrays for the GPU benchmarks: cudaMalloc'd (and filled) under
// CHECK_CUDA, so a failure exits with where and why. The caller owns them and
// frees them with cudaFree (or leaves them to the process's exit).
#ifndef RANKD_BENCH_GPU_DEVICE_ARRAY_H_
#define RANKD_BENCH_GPU_DEVICE_ARRAY_H_

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "bench/gpu/check_cuda.h"

namespace rankd::bench {

// `count` uninitialised Ts in device memory (room for one when count is 0,
// so the pointer is never null).
template <typename T>
T* Alloc(int64_t count) {
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, sizeof(T) * std::max<int64_t>(count, 1)));
  return static_cast<T*>(p);
}

// A device copy of `v` (see Alloc for an empty one).
template <typename T>
T* ToDevice(const std::vector<T>& v) {
  T* p = Alloc<T>(static_cast<int64_t>(v.size()));
  if (!v.empty()) CHECK_CUDA(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

}  // namespace rankd::bench

#endif  // RANKD_BENCH_GPU_DEVICE_ARRAY_H_
