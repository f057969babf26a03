// A Linear layer with a thin input (at most kThinLinearMaxIn features, such
// as a DLRM bottom MLP's first layer over the dense features): y = act(x W^T
// + b) for any number of rows, in fp32 FMAs. CPU twin: kernels::LinearForward
// (kernels/cpu/dense.h).
//
// Why: with K this small a GEMM does almost no arithmetic per output and is
// bound by writing y; cuBLASLt still runs a tiled tensor-core kernel with its
// pipeline prologue for it. Here a block of 256 threads owns 16 rows: it
// stages their x in shared memory, and each thread holds one output column's
// weights in registers and writes that column for the 16 rows (coalesced
// across the block's threads). Products are exact fp32 whatever the worker's
// math mode (more accurate than TF32, never less).
//
// Threading: stateless; safe from any thread on any stream; capturable.
#ifndef RANKD_KERNELS_CUDA_THIN_LINEAR_H_
#define RANKD_KERNELS_CUDA_THIN_LINEAR_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cpu/types.h"

namespace rankd::kernels::cuda {

inline constexpr int kThinLinearMaxIn = 32;

struct ThinLinearArgs {
  const float* weight = nullptr;  // device [out, in] row-major (PyTorch Linear)
  const float* bias = nullptr;    // device [out], or null: no bias
  int in = 0;                     // 1 .. kThinLinearMaxIn
  int out = 0;                    // >= 1
  const float* x = nullptr;       // device [rows, x_ld]; columns [0, in) read
  int64_t x_ld = 0;               // floats, >= in
  int64_t rows = 0;               // >= 0
  Activation act = Activation::kNone;  // kNone or kRelu
  float* y = nullptr;  // device [rows, y_ld]; columns [0, out) written, nothing else
  int64_t y_ld = 0;    // floats, >= out
};

// y[r, o] = act(sum_k x[r, k] * W[o, k] + b[o]) for r < rows, o < out (the
// sum in k order from 0, then the bias). cudaErrorInvalidValue for in
// outside [1, kThinLinearMaxIn], out < 1, rows < 0, a leading dimension
// below its width, a null pointer (bias aside) or kSigmoid.
cudaError_t LaunchThinLinear(const ThinLinearArgs& args, cudaStream_t stream);

}  // namespace rankd::kernels::cuda

#endif  // RANKD_KERNELS_CUDA_THIN_LINEAR_H_
