#include "kernels/cuda/split_bf16.h"

namespace rankd::kernels::cuda {
namespace {

// The bits of kernels::FloatToBf16 (kernels/cpu/split_bf16.h): round to
// nearest even at bit 16; not finite, or rounding past the largest float:
// truncate (NaN keeps a mantissa bit).
__device__ __forceinline__ unsigned short ToBf16(float x) {
  const unsigned int bits = __float_as_uint(x);
  if (!isfinite(x)) return static_cast<unsigned short>((bits >> 16) | (isnan(x) ? 0x40u : 0u));
  const unsigned int rounded = bits + 0x7FFFu + ((bits >> 16) & 1u);
  if ((rounded & 0x7F800000u) == 0x7F800000u) return static_cast<unsigned short>(bits >> 16);
  return static_cast<unsigned short>(rounded >> 16);
}

// One thread per input element (and per pad column); a block covers 256
// consecutive columns of a row, so reads and the three writes are coalesced.
__global__ void SplitBf16ActivationsKernel(const float* __restrict__ x, int64_t ld, int k,
                                           int width, unsigned short* __restrict__ out) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t r = blockIdx.y;
  unsigned short* o = out + r * width;
  if (j < width - 3 * k) o[3 * k + j] = 0;  // pad columns
  if (j >= k) return;
  const float v = __ldg(x + r * ld + j);
  const unsigned short hi = ToBf16(v);
  const unsigned short lo = isfinite(v) ? ToBf16(v - __uint_as_float(unsigned{hi} << 16)) : 0;
  o[j] = hi;
  o[k + j] = lo;
  o[2 * k + j] = hi;
}

}  // namespace

cudaError_t LaunchSplitBf16Activations(const float* x, int64_t ld, int64_t rows, int k,
                                       uint16_t* out, cudaStream_t stream) {
  if (rows == 0 || k == 0) return cudaSuccess;
  if (x == nullptr || out == nullptr || rows < 0 || k < 0 || ld < k) return cudaErrorInvalidValue;
  constexpr int kThreads = 256;
  const int width = (3 * k + 7) / 8 * 8;  // kernels::SplitBf16Width
  // Rows go on grid.y (at most 65,535): larger batches in several launches.
  for (int64_t r0 = 0; r0 < rows; r0 += 65535) {
    const int64_t n = rows - r0 < 65535 ? rows - r0 : 65535;
    const dim3 grid((k + kThreads - 1) / kThreads, static_cast<unsigned>(n));
    SplitBf16ActivationsKernel<<<grid, kThreads, 0, stream>>>(
        x + r0 * ld, ld, k, width, reinterpret_cast<unsigned short*>(out + r0 * width));
  }
  return cudaGetLastError();
}

}  // namespace rankd::kernels::cuda
