// Small CUDA helpers for engine/cuda: chunked copies and owning device /
// pinned-host buffers. Every CUDA call in engine/cuda is checked, its error an
// absl::Status through kernels/cuda/cuda_status.h.
#ifndef RANKD_ENGINE_CUDA_CUDA_UTIL_H_
#define RANKD_ENGINE_CUDA_CUDA_UTIL_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_status.h"

namespace rankd::engine::cuda {

// CUDA errors are worded and turned into statuses by the kernels layer's
// helper (kernels/cuda/cuda_status.h, which also defines
// RANKD_RETURN_IF_CUDA_ERROR).
using ::rankd::kernels::cuda::CudaStatus;

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

// How a CudaBuffer's memory is allocated and freed, and the call's name in
// errors.
struct DeviceMemory {
  static constexpr const char* kAllocCall = "cudaMalloc";
  static cudaError_t Alloc(void** ptr, size_t bytes) { return cudaMalloc(ptr, bytes); }
  static void Free(void* ptr) { cudaFree(ptr); }
};
struct PinnedHostMemory {
  static constexpr const char* kAllocCall = "cudaHostAlloc";
  static cudaError_t Alloc(void** ptr, size_t bytes) {
    return cudaHostAlloc(ptr, bytes, cudaHostAllocDefault);
  }
  static void Free(void* ptr) { cudaFreeHost(ptr); }
};

// An owning buffer of `Memory` (DeviceMemory or PinnedHostMemory): empty until
// Allocate, freed by Reset and in the destructor; movable, not copyable. Not
// thread-safe: one owner at a time.
template <typename Memory>
class CudaBuffer {
 public:
  CudaBuffer() = default;
  ~CudaBuffer() { Reset(); }
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;
  CudaBuffer(CudaBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  CudaBuffer& operator=(CudaBuffer&& o) noexcept {
    if (this != &o) {
      Reset();
      ptr_ = o.ptr_;
      bytes_ = o.bytes_;
      o.ptr_ = nullptr;
      o.bytes_ = 0;
    }
    return *this;
  }

  // Frees what the buffer held, then allocates `bytes` (none for 0). The
  // error names `what` and the size; out of memory is RESOURCE_EXHAUSTED.
  absl::Status Allocate(size_t bytes, const std::string& what) {
    Reset();
    if (bytes == 0) return absl::OkStatus();
    RANKD_RETURN_IF_CUDA_ERROR(
        Memory::Alloc(&ptr_, bytes),
        absl::StrCat(Memory::kAllocCall, " ", bytes, " bytes for ", what));
    bytes_ = bytes;
    return absl::OkStatus();
  }
  void Reset() {
    if (ptr_ != nullptr) Memory::Free(ptr_);
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

// Device memory on the current device.
using DeviceBuffer = CudaBuffer<DeviceMemory>;
// Page-locked host memory (fast, asynchronous copies).
using PinnedBuffer = CudaBuffer<PinnedHostMemory>;

}  // namespace rankd::engine::cuda

#endif  // RANKD_ENGINE_CUDA_CUDA_UTIL_H_
