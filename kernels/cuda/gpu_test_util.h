// Shared by the randomized GPU tests (*_gpu_test.cc): skip without a device,
// assert on CUDA calls, and a seed that is random per run but replayable
// (RANKD_TEST_SEED=<n>). Tests only.
#ifndef RANKD_KERNELS_CUDA_GPU_TEST_UTIL_H_
#define RANKD_KERNELS_CUDA_GPU_TEST_UTIL_H_

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/cuda_status.h"

namespace rankd::kernels::cuda::testing {

// Success for cudaSuccess, else a failure naming `what` and the error: for
// helpers that return an AssertionResult; tests use ASSERT_CUDA / EXPECT_CUDA.
inline ::testing::AssertionResult CudaSucceeded(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << CudaErrorText(err);
}

// Whether a CUDA device is usable (clears the error when not).
inline bool HaveGpu() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return n > 0;
}

// RANKD_TEST_SEED when set, else a fresh random seed (print it with failures).
inline uint64_t TestSeed() {
  if (const char* s = std::getenv("RANKD_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  return (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
}

// n floats uniform in [lo, hi), none of them zero (a zero input or weight
// would hide a product the kernel under test skipped).
template <typename Rng>
std::vector<float> NonZeroUniform(size_t n, float lo, float hi, Rng* rng) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) {
    do {
      f = dist(*rng);
    } while (f == 0.0f);
  }
  return v;
}

// Device memory for n floats, freed on scope exit; a failed allocation
// leaves get() null (the launch under test then reports it).
class DeviceFloats {
 public:
  explicit DeviceFloats(size_t n) : n_(n) {
    void* p = nullptr;
    if (cudaMalloc(&p, (n_ > 0 ? n_ : 1) * sizeof(float)) == cudaSuccess) p_ = static_cast<float*>(p);
  }
  explicit DeviceFloats(const std::vector<float>& host) : DeviceFloats(host.size()) {
    if (p_ != nullptr) cudaMemcpy(p_, host.data(), 4 * n_, cudaMemcpyHostToDevice);
  }
  ~DeviceFloats() { cudaFree(p_); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  float* get() const { return p_; }
  // 0xFF bytes: a NaN no kernel computes, so an unwritten output shows.
  void Poison() {
    if (p_ != nullptr) cudaMemset(p_, 0xFF, 4 * n_);
  }
  std::vector<float> ToHost() const {
    std::vector<float> h(n_);
    if (p_ != nullptr) cudaMemcpy(h.data(), p_, 4 * n_, cudaMemcpyDeviceToHost);
    return h;
  }

 private:
  size_t n_;
  float* p_ = nullptr;
};

// Device allocations freed together. Copy() places the data `pad` bytes past
// a fresh (256-byte aligned) allocation, to exercise misaligned pointers.
class DeviceArena {
 public:
  DeviceArena() = default;
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  ~DeviceArena() {
    for (void* p : allocations_) cudaFree(p);
  }

  void* Alloc(size_t bytes) {
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, std::max<size_t>(bytes, 1));
    if (err != cudaSuccess) {
      error_ = err;
      return nullptr;
    }
    allocations_.push_back(p);
    return p;
  }

  template <typename T>
  T* Copy(const std::vector<T>& v, size_t pad = 0) {
    char* base = static_cast<char*>(Alloc(v.size() * sizeof(T) + pad));
    if (base == nullptr) return nullptr;
    if (!v.empty()) {
      const cudaError_t err =
          cudaMemcpy(base + pad, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
      if (err != cudaSuccess) error_ = err;
    }
    return reinterpret_cast<T*>(base + pad);
  }

  cudaError_t error() const { return error_; }

 private:
  std::vector<void*> allocations_;
  cudaError_t error_ = cudaSuccess;
};

}  // namespace rankd::kernels::cuda::testing

#define SKIP_WITHOUT_GPU() \
  if (!::rankd::kernels::cuda::testing::HaveGpu()) GTEST_SKIP() << "no CUDA device on this machine"

// The one way tests check a CUDA call: fatal (ASSERT_CUDA) or not (EXPECT_CUDA).
#define ASSERT_CUDA(expr) ASSERT_TRUE(::rankd::kernels::cuda::testing::CudaSucceeded((expr), #expr))
#define EXPECT_CUDA(expr) EXPECT_TRUE(::rankd::kernels::cuda::testing::CudaSucceeded((expr), #expr))

#endif  // RANKD_KERNELS_CUDA_GPU_TEST_UTIL_H_
