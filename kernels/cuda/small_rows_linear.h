// A Linear layer over a handful of rows: y = act(x W^T + b) for at most
// kSmallRowsMax rows, in fp32 FMAs. CPU twin: kernels::LinearForward
// (kernels/cpu/dense.h).
//
// Why: a one-candidate request runs in the smallest row bucket (16 rows),
// where a cuBLASLt GEMM is almost all launch and pipeline prologue, and an
// MLP is a chain of such GEMMs, each waiting for the one before. This kernel
// is one pass over the weights with no prologue, and it can be launched as a
// programmatic dependent of the kernel before it on the stream (`chained`,
// Hopper's programmatic dependent launch): its blocks start while that kernel
// finishes, load their weights (which do not depend on it), and only then
// wait for its output. Products are exact fp32 whatever the worker's math
// mode (more accurate than TF32, never less).
//
// Threading: stateless; safe from any thread on any stream. Capturable into
// a CUDA graph (chained launches become programmatic edges).
#ifndef RANKD_KERNELS_CUDA_SMALL_ROWS_LINEAR_H_
#define RANKD_KERNELS_CUDA_SMALL_ROWS_LINEAR_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cpu/types.h"

namespace rankd::kernels::cuda {

// The most rows one launch computes (one row bucket, kRowQuantum).
inline constexpr int kSmallRowsMax = 16;

struct SmallRowsLinearArgs {
  const float* weight = nullptr;  // device [out, in] row-major (PyTorch Linear)
  const float* bias = nullptr;    // device [out], or null: no bias
  int in = 0;
  int out = 0;
  const float* x = nullptr;  // device [rows, x_ld]; columns [0, in) read
  int64_t x_ld = 0;          // floats, >= in
  int rows = 0;              // 0 .. kSmallRowsMax
  Activation act = Activation::kNone;  // kNone or kRelu
  float* y = nullptr;  // device [rows, y_ld]; columns [0, out) written, nothing else
  int64_t y_ld = 0;    // floats, >= out
};

// y[r, o] = act(sum_k x[r, k] * W[o, k] + b[o]) for r < rows, o < out.
// chained: launch as a programmatic dependent of the previous kernel on
// `stream` (the kernel waits for that kernel's completion before reading x,
// so any previous kernel is safe; without one it is an ordinary launch).
// cudaErrorInvalidValue for rows outside [0, kSmallRowsMax], in or out < 1,
// a leading dimension below the width, a null pointer, or kSigmoid.
cudaError_t LaunchSmallRowsLinear(const SmallRowsLinearArgs& args, bool chained,
                                  cudaStream_t stream);

}  // namespace rankd::kernels::cuda

#endif  // RANKD_KERNELS_CUDA_SMALL_ROWS_LINEAR_H_
