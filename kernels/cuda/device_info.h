// Which CUDA devices this process can use. Plain C++ header (no CUDA types) so
// host code can ask without CUDA headers; implemented in device_info.cu.
#ifndef RANKD_KERNELS_CUDA_DEVICE_INFO_H_
#define RANKD_KERNELS_CUDA_DEVICE_INFO_H_

#include <cstdint>
#include <string>
#include <vector>

namespace rankd::kernels::cuda {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  int multiprocessors = 0;
  int64_t total_memory_bytes = 0;
  int64_t free_memory_bytes = 0;
  int64_t l2_bytes = 0;
  // Shared memory one block may opt in to (cudaDevAttrMaxSharedMemoryPerBlockOptin;
  // 227 KiB on H100 / H200, 99 KiB on sm_86 / sm_89).
  int64_t max_shared_bytes_per_block = 0;
};

struct DeviceQuery {
  // Usable devices; empty when there is no GPU or no driver. A device this
  // binary has no kernel image for (no cubin for its SM and no PTX it can
  // JIT) is not usable: it is left out and named in `note`.
  std::vector<DeviceInfo> devices;
  // Why `devices` is empty or short, e.g. "no CUDA-capable device is
  // detected"; empty when every visible device was read.
  std::string note;
  // The CUDA runtime this binary was built with, e.g. 13000.
  int runtime_version = 0;
  int driver_version = 0;  // 0 when no driver is installed
};

// Never fails: a machine without GPU or driver gives no devices and a note.
DeviceQuery QueryDevices();

// The virtual architectures this binary's device code was compiled for, as
// nvcc's __CUDA_ARCH_LIST__: "900" (the default build) or
// "800,900,1000" (--config=portable).
std::string BuiltCudaArchs();

// Opt-in shared memory per block of `device` (cached after the first call);
// 0 where it cannot be read.
int64_t MaxSharedBytesPerBlock(int device);

}  // namespace rankd::kernels::cuda

#endif  // RANKD_KERNELS_CUDA_DEVICE_INFO_H_
