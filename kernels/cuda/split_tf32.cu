#include "kernels/cuda/split_tf32.h"

namespace rankd::kernels::cuda {
namespace {

// The bits of kernels::SplitTf32 (kernels/cpu/split_tf32.h): round to
// nearest even at mantissa bit 13; not finite, or rounding past the largest
// float: truncate, small = 0 for the former.
__device__ __forceinline__ void Split(float x, float* big, float* small) {
  if (!isfinite(x)) {
    *big = x;
    *small = 0.0f;
    return;
  }
  const unsigned int bits = __float_as_uint(x);
  float b = __uint_as_float((bits + 0x0FFFu + ((bits >> 13) & 1u)) & ~0x1FFFu);
  if (!isfinite(b)) b = __uint_as_float(bits & ~0x1FFFu);
  *big = b;
  *small = x - b;
}

// One thread per input element (and per pad column); a block covers 256
// consecutive columns of a row, so reads and the three writes are coalesced.
__global__ void SplitTf32ActivationsKernel(const float* __restrict__ x, int64_t ld, int k,
                                           int width, float* __restrict__ out) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t r = blockIdx.y;
  float* o = out + r * width;
  if (j < width - 3 * k) o[3 * k + j] = 0.0f;  // pad columns
  if (j >= k) return;
  float big, small;
  Split(__ldg(x + r * ld + j), &big, &small);
  o[j] = big;
  o[k + j] = small;
  o[2 * k + j] = big;
}

}  // namespace

cudaError_t LaunchSplitTf32Activations(const float* x, int64_t ld, int64_t rows, int k,
                                       float* out, cudaStream_t stream) {
  if (rows == 0 || k == 0) return cudaSuccess;
  if (x == nullptr || out == nullptr || rows < 0 || k < 0 || ld < k || rows > 65535 * 1024) {
    return cudaErrorInvalidValue;
  }
  constexpr int kThreads = 256;
  const int width = (3 * k + 3) / 4 * 4;  // kernels::SplitTf32Width
  // Rows go on grid.y (at most 65,535): larger batches in several launches.
  for (int64_t r0 = 0; r0 < rows; r0 += 65535) {
    const int64_t n = rows - r0 < 65535 ? rows - r0 : 65535;
    const dim3 grid((k + kThreads - 1) / kThreads, static_cast<unsigned>(n));
    SplitTf32ActivationsKernel<<<grid, kThreads, 0, stream>>>(x + r0 * ld, ld, k, width,
                                                             out + r0 * width);
  }
  return cudaGetLastError();
}

}  // namespace rankd::kernels::cuda
