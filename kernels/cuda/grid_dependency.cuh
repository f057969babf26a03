// Device side of Hopper's programmatic dependent launch (PDL), for kernels
// that a launch with cudaLaunchAttributeProgrammaticStreamSerialization may
// follow or precede (small_rows_linear.h). CUDA sources only.
#ifndef RANKD_KERNELS_CUDA_GRID_DEPENDENCY_CUH_
#define RANKD_KERNELS_CUDA_GRID_DEPENDENCY_CUH_

#include <cuda_runtime.h>

namespace rankd::kernels::cuda {

// Whether the current device runs programmatic dependent launches (sm_90 and
// later); elsewhere launches are made without the attribute.
inline bool CurrentDeviceChainsLaunches() {
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
    return false;
  }
  return major >= 9;
}

// A launch configuration with the programmatic-serialization attribute when
// `chained` (and the device has it). `attr` must outlive the launch call.
inline cudaLaunchConfig_t ChainableConfig(dim3 grid, dim3 block, cudaStream_t stream,
                                          bool chained, cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.stream = stream;
  attr->id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr->val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attr;
  config.numAttrs = chained && CurrentDeviceChainsLaunches() ? 1 : 0;
  return config;
}

// Waits until the grids this one depends on programmatically have completed
// and their writes are visible. Returns at once for an ordinary launch.
// Call before reading anything the previous kernel wrote. No-op before sm_90.
__device__ __forceinline__ void WaitForPrerequisiteGrid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets a grid launched after this one as a programmatic dependent start its
// blocks now; it still waits (WaitForPrerequisiteGrid) for this grid's
// completion before it reads this grid's output. No-op before sm_90.
__device__ __forceinline__ void LetDependentGridsLaunch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

}  // namespace rankd::kernels::cuda

#endif  // RANKD_KERNELS_CUDA_GRID_DEPENDENCY_CUH_
