// Dense (fully connected) layers and the DLRM interactions on row blocks, via
// Eigen. Row counts passed here must be multiples of kRowQuantum (types.h)
// so results never depend on the block size.
#ifndef RANKD_KERNELS_CPU_DENSE_H_
#define RANKD_KERNELS_CPU_DENSE_H_

#include <cstdint>

#include "kernels/cpu/types.h"

namespace rankd::kernels {

// PyTorch nn.Linear layout: weight [out, in] row-major, bias [out].
struct LinearView {
  const float* weight = nullptr;
  const float* bias = nullptr;
  int in = 0;
  int out = 0;
};

// out[r, :] = act(in[r, :] @ weight^T + bias) for r in [0, rows).
// `in` is [rows, in_stride] (first layer.in columns used), `out` is
// [rows, out_stride]; out may not alias in.
void LinearForward(const LinearView& layer, const float* in, int64_t in_stride,
                   int64_t rows, Activation act, float* out,
                   int64_t out_stride);

// DLRM_Net dot interaction. feats is [rows, num_vectors, dim] (num_vectors =
// 1 + F: x first, then e_0..e_{F-1}). Writes, per row, x (dim floats) followed
// by <T_i, T_j> for all i > j (i >= j with self_interaction) in row-major
// lower-triangle order: (1,0), (2,0), (2,1), (3,0), ...
// out is [rows, out_stride], out_stride >= DotInteractionWidth(...).
void DotInteraction(const float* feats, int64_t rows, int num_vectors, int dim,
                    bool self_interaction, float* out, int64_t out_stride);

inline int DotInteractionWidth(int num_vectors, int dim, bool self_interaction) {
  const int n = num_vectors;
  return dim + (self_interaction ? n * (n + 1) / 2 : n * (n - 1) / 2);
}

// One TorchRec LowRankCrossNet layer over rows of width n:
//   x_next = x0 * (W (V x) + b) + x
// V [rank, n], W [n, rank], b [n], all row-major. `scratch` holds rows * rank
// floats. x_next may not alias x or x0.
struct CrossLayerView {
  const float* v = nullptr;
  const float* w = nullptr;
  const float* bias = nullptr;
  int n = 0;
  int rank = 0;
};
void CrossLayerForward(const CrossLayerView& layer, const float* x0,
                       const float* x, int64_t rows, float* scratch,
                       float* x_next);

}  // namespace rankd::kernels

#endif  // RANKD_KERNELS_CPU_DENSE_H_
