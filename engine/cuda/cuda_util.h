// Small CUDA helpers for engine/cuda: errors as absl::Status, and owning
// device / pinned-host buffers. Every CUDA call in engine/cuda is checked.
#ifndef RANKD_ENGINE_CUDA_CUDA_UTIL_H_
#define RANKD_ENGINE_CUDA_CUDA_UTIL_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace rankd::engine::cuda {

inline absl::Status CudaStatus(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return absl::OkStatus();
  const absl::StatusCode code = err == cudaErrorMemoryAllocation
                                    ? absl::StatusCode::kResourceExhausted
                                    : absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrCat(what, ": ", cudaGetErrorName(err), " (",
                                         cudaGetErrorString(err), ")"));
}

#define RANKD_RETURN_IF_CUDA_ERROR(expr, what)                              \
  do {                                                                      \
    const absl::Status rankd_s_ = ::rankd::engine::cuda::CudaStatus((expr), (what)); \
    if (!rankd_s_.ok()) return rankd_s_;                                   \
  } while (0)

// A synchronous cudaMemcpy in chunks of `chunk_bytes`. A load copies tables
// of hundreds of MB while other model versions serve on the same GPU; one
// copy that long holds the driver, and their workers' calls stall behind it.
// Between chunks they get through.
inline absl::Status ChunkedMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                                  const std::string& what, size_t chunk_bytes = size_t{16} << 20) {
  for (size_t done = 0; done < bytes; done += chunk_bytes) {
    const size_t n = bytes - done < chunk_bytes ? bytes - done : chunk_bytes;
    RANKD_RETURN_IF_CUDA_ERROR(cudaMemcpy(static_cast<char*>(dst) + done,
                                          static_cast<const char*>(src) + done, n, kind),
                               what);
  }
  return absl::OkStatus();
}

// Device memory on the current device; freed in the destructor.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { Reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      Reset();
      ptr_ = o.ptr_;
      bytes_ = o.bytes_;
      o.ptr_ = nullptr;
      o.bytes_ = 0;
    }
    return *this;
  }

  absl::Status Allocate(size_t bytes, const std::string& what) {
    Reset();
    if (bytes == 0) return absl::OkStatus();
    RANKD_RETURN_IF_CUDA_ERROR(cudaMalloc(&ptr_, bytes),
                               absl::StrCat("cudaMalloc ", bytes, " bytes for ", what));
    bytes_ = bytes;
    return absl::OkStatus();
  }
  void Reset() {
    if (ptr_ != nullptr) cudaFree(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Page-locked host memory (fast, asynchronous copies); freed in the destructor.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() { Reset(); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  absl::Status Allocate(size_t bytes, const std::string& what) {
    Reset();
    if (bytes == 0) return absl::OkStatus();
    RANKD_RETURN_IF_CUDA_ERROR(cudaHostAlloc(&ptr_, bytes, cudaHostAllocDefault),
                               absl::StrCat("cudaHostAlloc ", bytes, " bytes for ", what));
    bytes_ = bytes;
    return absl::OkStatus();
  }
  void Reset() {
    if (ptr_ != nullptr) cudaFreeHost(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace rankd::engine::cuda

#endif  // RANKD_ENGINE_CUDA_CUDA_UTIL_H_
