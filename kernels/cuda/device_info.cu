#include "kernels/cuda/device_info.h"

#include <cuda_runtime.h>

#include <atomic>

#include "kernels/cuda/cuda_status.h"

namespace rankd::kernels::cuda {
namespace {

// Compiled with the same -gencode flags as every other kernel: if this one
// has no image for a device, none has.
__global__ void KernelImageProbe() {}

#define RANKD_STRINGIFY2(...) #__VA_ARGS__
#define RANKD_STRINGIFY(...) RANKD_STRINGIFY2(__VA_ARGS__)

constexpr int kMaxDevices = 64;

// Empty when `device` can run this binary's kernels, else why not.
std::string KernelImageProblem(int device, const cudaDeviceProp& prop) {
  cudaFuncAttributes attr;
  cudaError_t err = cudaSetDevice(device);
  if (err == cudaSuccess) err = cudaFuncGetAttributes(&attr, KernelImageProbe);
  if (err == cudaSuccess) return "";
  cudaGetLastError();  // not sticky; start the next call clean
  if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction ||
      err == cudaErrorUnsupportedPtxVersion) {
    return "device " + std::to_string(device) + " (" + prop.name + ", sm_" +
           std::to_string(prop.major) + std::to_string(prop.minor) +
           "): this binary has no kernel image for it (built for compute " + BuiltCudaArchs() +
           "; build with --config=portable); ";
  }
  return "device " + std::to_string(device) + ": " + CudaErrorText(err) + "; ";
}

}  // namespace

std::string BuiltCudaArchs() {
#ifdef __CUDA_ARCH_LIST__
  return RANKD_STRINGIFY(__CUDA_ARCH_LIST__);
#else
  return "unknown";
#endif
}

int64_t MaxSharedBytesPerBlock(int device) {
  static std::atomic<int64_t> cached[kMaxDevices] = {};
  if (device < 0 || device >= kMaxDevices) return 0;
  int64_t bytes = cached[device].load(std::memory_order_relaxed);
  if (bytes > 0) return bytes;
  int value = 0;
  if (cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
      cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  cached[device].store(value, std::memory_order_relaxed);
  return value;
}

DeviceQuery QueryDevices() {
  DeviceQuery q;
  cudaRuntimeGetVersion(&q.runtime_version);
  if (cudaDriverGetVersion(&q.driver_version) != cudaSuccess) q.driver_version = 0;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    // No device / no driver is the normal case on CPU machines, not an error.
    q.note = CudaErrorText(err);
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return q;
  }
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop;
    err = cudaGetDeviceProperties(&prop, d);
    if (err != cudaSuccess) {
      q.note += "device " + std::to_string(d) + ": " + CudaErrorText(err) + "; ";
      continue;
    }
    const std::string problem = KernelImageProblem(d, prop);
    if (!problem.empty()) {
      q.note += problem;
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
    info.max_shared_bytes_per_block = MaxSharedBytesPerBlock(d);
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
