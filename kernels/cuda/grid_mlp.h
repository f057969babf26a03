// A chain of Linear layers (an MLP) in one cooperative kernel: every layer is
// spread over the whole GPU in output tiles on TF32 tensor cores (mma.sync
// m16n8k8, fp32 accumulation), and the layers are separated by grid-wide
// barriers instead of kernel boundaries. CPU twin: kernels::LinearForward
// (kernels/cpu/dense.h) once per layer on TF32-rounded inputs and weights.
//
// Why: the MLPs of DLRM-style models are narrow (widths <= 512). At a few
// thousand rows each cuBLASLt GEMM is a small grid whose launch, pipeline
// prologue and drain cost more than its arithmetic, and an MLP is a chain of
// them, each waiting for the one before. Here a layer's tiles start as soon
// as the grid barrier after the previous layer opens, with no launch between.
//
// Layout of one layer: the output [rows, out] is cut into TM x TN tiles
// (64x64, 32x32 or 32x16: the largest that still gives most SMs a tile);
// the blocks take tiles in grid-stride order. A block of 4 warps (2 x 2, a
// warp owns a (TM/2) x (TN/2) quarter) walks k in steps of 32, with the A
// (input rows) and B (weight rows) slices of the next steps in flight by
// cp.async while it multiplies the current one (kStages-deep ring in shared
// memory, rows padded to 36 floats so the fragment loads hit 32 banks).
// Inputs and weights are rounded to TF32 (round to nearest) as they are
// loaded into fragments. The epilogue adds the bias, applies ReLU when asked
// and stores the tile.
//
// Threading: stateless; safe from any thread on any stream. Capturable into
// a CUDA graph (a cooperative kernel node).
#ifndef RANKD_KERNELS_CUDA_GRID_MLP_H_
#define RANKD_KERNELS_CUDA_GRID_MLP_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace rankd::kernels::cuda {

inline constexpr int kGridMlpMaxLayers = 4;

struct GridMlpLayer {
  const float* weight = nullptr;  // device [out, in] row-major (PyTorch Linear), 16-byte aligned
  const float* bias = nullptr;    // device [out], or null: no bias
  int in = 0;                     // a multiple of 4 (16-byte rows)
  int out = 0;
  bool relu = false;
  float* y = nullptr;  // device [rows, y_ld]; columns [0, out) written, nothing else
  int64_t y_ld = 0;    // floats, >= out; the next layer's input
};

struct GridMlpArgs {
  const float* x = nullptr;  // device [rows, x_ld], 16-byte aligned; columns [0, in) read
  int64_t x_ld = 0;          // floats, >= the first layer's in, a multiple of 4
  int64_t rows = 0;          // >= 0
  int num_layers = 0;        // 1 .. kGridMlpMaxLayers
  GridMlpLayer layer[kGridMlpMaxLayers];
};

// Whether LaunchGridMlp takes these arguments: 1..kGridMlpMaxLayers layers,
// each layer's in equal to the previous out (x's width for the first), every
// in a multiple of 4, leading dimensions >= the width and (for inputs) a
// multiple of 4, inputs and weights 16-byte aligned, non-null pointers
// (bias aside), rows >= 0, and a device with cooperative launch.
bool GridMlpFits(const GridMlpArgs& args);

// Runs the chain: layer 0 reads x, layer i > 0 reads layer i-1's y.
// cudaErrorInvalidValue where GridMlpFits says no.
cudaError_t LaunchGridMlp(const GridMlpArgs& args, cudaStream_t stream);

}  // namespace rankd::kernels::cuda

#endif  // RANKD_KERNELS_CUDA_GRID_MLP_H_
