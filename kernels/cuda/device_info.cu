#include "kernels/cuda/device_info.h"

#include <cuda_runtime.h>

namespace rankd::kernels::cuda {

DeviceQuery QueryDevices() {
  DeviceQuery q;
  cudaRuntimeGetVersion(&q.runtime_version);
  if (cudaDriverGetVersion(&q.driver_version) != cudaSuccess) q.driver_version = 0;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    // No device / no driver is the normal case on CPU machines, not an error.
    q.note = cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return q;
  }
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop;
    err = cudaGetDeviceProperties(&prop, d);
    if (err != cudaSuccess) {
      q.note += "device " + std::to_string(d) + ": " + cudaGetErrorString(err) + "; ";
      continue;
    }
    DeviceInfo info;
    info.ordinal = d;
    info.name = prop.name;
    info.compute_major = prop.major;
    info.compute_minor = prop.minor;
    info.multiprocessors = prop.multiProcessorCount;
    info.total_memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    info.l2_bytes = prop.l2CacheSize;
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaSetDevice(d) == cudaSuccess &&
        cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
      info.free_memory_bytes = static_cast<int64_t>(free_bytes);
    } else {
      q.note += "device " + std::to_string(d) + ": cannot read free memory; ";
    }
    q.devices.push_back(info);
  }
  return q;
}

}  // namespace rankd::kernels::cuda
