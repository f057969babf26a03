// A chain of narrow Linear layers in one kernel: y = L_n(...L_1(x)), each
// L_i(v) = act_i(v W_i^T + b_i), for any number of rows, on TF32 tensor
// cores (inputs and weights rounded to TF32, fp32 sums: what cuBLASLt's
// TF32 GEMMs compute, the worker's MathMode::kTf32). CPU twin:
// kernels::LinearForward (kernels/cpu/dense.h) on TF32-rounded inputs and
// weights, once per layer.
//
// Why: at serving batch sizes (hundreds to a few thousand rows) a narrow
// layer, such as kaggle's bottom 16 -> 512 or 256 -> 64 -> 16, is a few
// MFLOP, and a cuBLASLt GEMM of that size is mostly its grid's launch and
// pipeline prologue, each layer waiting for the one before. Here every block
// copies the whole chain's weights into shared memory once, before it waits
// for the previous kernel (a programmatic dependent launch, `chained`: the
// weights do not depend on that kernel, so the copy overlaps its tail), then
// runs 16-row tiles through every layer with the activations kept in shared
// memory. Wide layers (whose weights do not fit) stay on cuBLASLt:
// NarrowMlpFits says which chains this kernel takes.
//
// Threading: stateless; safe from any thread on any stream. Capturable into
// a CUDA graph (a chained launch becomes a programmatic edge). Needs sm_80 or
// later (cp.async, TF32 mma).
#ifndef RANKD_KERNELS_CUDA_NARROW_MLP_H_
#define RANKD_KERNELS_CUDA_NARROW_MLP_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cpu/types.h"

namespace rankd::kernels::cuda {

// Layers one launch chains at the most.
inline constexpr int kNarrowMlpMaxLayers = 4;
// The widest input or output of a layer.
inline constexpr int kNarrowMlpMaxWidth = 512;
// Shared memory one block may use: the chain's weights and biases, two
// activation tiles and the partial sums of sliced layers. Within every
// supported GPU's per-block limit (163 KiB on sm_80, 227 KiB on sm_90).
inline constexpr int64_t kNarrowMlpMaxSharedBytes = int64_t{160} << 10;

struct NarrowLayer {
  const float* weight = nullptr;  // device [out, in] row-major (PyTorch Linear)
  const float* bias = nullptr;    // device [out], or null: no bias
  int in = 0;
  int out = 0;
  Activation act = Activation::kRelu;  // kNone or kRelu
};

struct NarrowMlpArgs {
  NarrowLayer layers[kNarrowMlpMaxLayers];
  int num_layers = 0;  // 1 .. kNarrowMlpMaxLayers; layers[i].in == layers[i-1].out
  const float* x = nullptr;  // device [rows, x_ld]; columns [0, layers[0].in) read
  int64_t x_ld = 0;          // floats, >= layers[0].in
  int64_t rows = 0;          // >= 0
  float* y = nullptr;  // device [rows, y_ld]; columns [0, out of the last layer) written, nothing else
  int64_t y_ld = 0;    // floats, >= the last layer's out
};

// Shared memory a block of the chain uses, in bytes (host and device agree:
// the layout is computed from these shapes alone). -1 for a chain the
// kernel does not take (see NarrowMlpFits).
int64_t NarrowMlpSharedBytes(const NarrowLayer* layers, int num_layers);

// Whether the kernel takes this chain: 1 .. kNarrowMlpMaxLayers layers,
// widths in [1, kNarrowMlpMaxWidth], each layer's in equal to the previous
// out, activations kNone or kRelu, and at most kNarrowMlpMaxSharedBytes of
// shared memory. Pointers are not looked at.
bool NarrowMlpFits(const NarrowLayer* layers, int num_layers);

// Runs the chain over args.rows rows. chained: launch as a programmatic
// dependent of the previous kernel on `stream` (the kernel waits for that
// kernel's completion before reading x, so any previous kernel is safe;
// without one it is an ordinary launch). cudaErrorInvalidValue for a chain
// NarrowMlpFits refuses, negative rows, a leading dimension below its
// width, or a null pointer (bias excepted); rows == 0 launches nothing.
cudaError_t LaunchNarrowMlp(const NarrowMlpArgs& args, bool chained, cudaStream_t stream);

}  // namespace rankd::kernels::cuda

#endif  // RANKD_KERNELS_CUDA_NARROW_MLP_H_
