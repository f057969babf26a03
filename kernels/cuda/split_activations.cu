#include "kernels/cuda/split_activations.h"

namespace rankd::kernels::cuda {
namespace {

// The TF32 split: the bits of kernels::SplitTf32 (kernels/cpu/split_tf32.h):
// round to nearest even at mantissa bit 13; not finite, or rounding past the
// largest float: truncate, small = 0 for the former.
struct Tf32Split {
  using Part = float;
  static constexpr int kWidthMultiple = 4;  // kernels::SplitTf32Width

  __device__ __forceinline__ static void Split(float x, Part* big, Part* small) {
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
};

// The bf16 split: hi = FloatToBf16(x), lo = FloatToBf16(x - hi) (0 for x not
// finite), the bits of kernels/cpu/split_bf16.h.
struct Bf16Split {
  using Part = unsigned short;
  static constexpr int kWidthMultiple = 8;  // kernels::SplitBf16Width

  // kernels::FloatToBf16: round to nearest even at bit 16; not finite, or
  // rounding past the largest float: truncate (NaN keeps a mantissa bit).
  __device__ __forceinline__ static Part ToBf16(float x) {
    const unsigned int bits = __float_as_uint(x);
    if (!isfinite(x)) return static_cast<Part>((bits >> 16) | (isnan(x) ? 0x40u : 0u));
    const unsigned int rounded = bits + 0x7FFFu + ((bits >> 16) & 1u);
    if ((rounded & 0x7F800000u) == 0x7F800000u) return static_cast<Part>(bits >> 16);
    return static_cast<Part>(rounded >> 16);
  }

  __device__ __forceinline__ static void Split(float x, Part* hi, Part* lo) {
    *hi = ToBf16(x);
    *lo = isfinite(x) ? ToBf16(x - __uint_as_float(unsigned{*hi} << 16)) : Part{0};
  }
};

// One thread per input element (and per pad column); a block covers 256
// consecutive columns of a row, so reads and the three writes are coalesced.
template <typename S>
__global__ void SplitActivationsKernel(const float* __restrict__ x, int64_t ld, int k, int width,
                                       typename S::Part* __restrict__ out) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t r = blockIdx.y;
  typename S::Part* o = out + r * width;
  if (j < width - 3 * k) o[3 * k + j] = typename S::Part{0};  // pad columns
  if (j >= k) return;
  typename S::Part big, small;
  S::Split(__ldg(x + r * ld + j), &big, &small);
  o[j] = big;
  o[k + j] = small;
  o[2 * k + j] = big;
}

template <typename S>
cudaError_t LaunchSplit(const float* x, int64_t ld, int64_t rows, int k, typename S::Part* out,
                        cudaStream_t stream) {
  if (rows == 0 || k == 0) return cudaSuccess;
  // Batches beyond 1,024 launches of 65,535 rows are refused.
  if (x == nullptr || out == nullptr || rows < 0 || k < 0 || ld < k || rows > 65535 * 1024) {
    return cudaErrorInvalidValue;
  }
  constexpr int kThreads = 256;
  const int width = (3 * k + S::kWidthMultiple - 1) / S::kWidthMultiple * S::kWidthMultiple;
  // Rows go on grid.y (at most 65,535): larger batches in several launches.
  for (int64_t r0 = 0; r0 < rows; r0 += 65535) {
    const int64_t n = rows - r0 < 65535 ? rows - r0 : 65535;
    const dim3 grid((k + kThreads - 1) / kThreads, static_cast<unsigned>(n));
    SplitActivationsKernel<S><<<grid, kThreads, 0, stream>>>(x + r0 * ld, ld, k, width,
                                                             out + r0 * width);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchSplitTf32Activations(const float* x, int64_t ld, int64_t rows, int k,
                                       float* out, cudaStream_t stream) {
  return LaunchSplit<Tf32Split>(x, ld, rows, k, out, stream);
}

cudaError_t LaunchSplitBf16Activations(const float* x, int64_t ld, int64_t rows, int k,
                                       uint16_t* out, cudaStream_t stream) {
  static_assert(sizeof(uint16_t) == sizeof(Bf16Split::Part));
  return LaunchSplit<Bf16Split>(x, ld, rows, k, reinterpret_cast<Bf16Split::Part*>(out), stream);
}

}  // namespace rankd::kernels::cuda
