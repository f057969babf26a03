// The unit-bag lookup fused with the dot interaction: for a batch whose every
// feature is pooled by the unit-bag kernel (PooledLookupArgs::unit_bags_only)
// and whose interaction is DOT, one kernel gathers each row's embedding rows
// straight into the shared memory the dot interaction reads, instead of the
// unit-bag kernel writing the pooled vectors to the interaction input and
// the dot kernel reading them back: one launch (and one dependent step of
// the forward) fewer, and the pooled vectors never cross global memory.
//
// Results are those of LaunchPooledLookup followed by LaunchDotInteraction,
// bit for bit: a pooled vector is the unit-bag kernel's arithmetic (SUM /
// MEAN fmaf(w, x, 0), MAX fmaxf(-inf, w * x), an unresolved id the default
// vector or zeros times its weight, counted in PooledLookupArgs::unresolved),
// and the pairs are computed by the same device code (dot_pairs.cuh) from
// the same staged floats. CPU twins: PoolEmbeddings
// (kernels/cpu/embedding_pool.h) then DotInteraction (kernels/cpu/dense.h).
#ifndef RANKD_KERNELS_CUDA_UNIT_BAG_DOT_H_
#define RANKD_KERNELS_CUDA_UNIT_BAG_DOT_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/embedding_lookup.h"

namespace rankd::kernels::cuda {

// Whether a row of 1 + num_features vectors of `dim` floats can be staged
// (dim a positive multiple of 4, the row within the shared-memory bound).
bool UnitBagDotFits(int num_features, int dim);

// The bottom MLP's last layer run inside the fused kernel: x_r = ReLU(h_r W^T
// + b) is computed per row into the staged x (and written to out[r, 0:dim))
// instead of read from memory. That layer is a GEMM of a few thousand rows
// by `dim` columns, too small to fill the GPU, and its launch is a dependent
// step of the forward; here it costs each block one pass over h_r. Products
// are fp32 FMAs (4 partial sums over k, then bias, then ReLU), whatever the
// worker's math mode: at least as accurate as a TF32 GEMM. CPU twin:
// kernels::LinearForward with Activation::kRelu.
inline constexpr int kUnitBagDotMaxBottomIn = 512;
struct UnitBagDotBottomLayer {
  const float* h = nullptr;       // device [rows, h_ld], 16-byte aligned; null: x is read
  int64_t h_ld = 0;               // floats, >= in, a multiple of 4
  const float* weight = nullptr;  // device [dim, in] row-major (PyTorch Linear), 16-byte aligned
  const float* bias = nullptr;    // device [dim], or null: no bias
  int in = 0;                     // a multiple of 4 in [4, kUnitBagDotMaxBottomIn]
};

// Whether a last bottom layer of `in` inputs can run inside the kernel for
// rows that UnitBagDotFits (`in` in range, h_r staged within the bound too).
bool UnitBagDotBottomFits(int num_features, int dim, int in);

// out[r] = x_r, then <T_i, T_j> (i > j, or i >= j with self_interaction)
// over T_0 = x_r (dim floats at x + r * x_stride) and T_v = the pooled vector
// of the feature whose DeviceFeature::out_col is v * dim, for rows r in
// [0, rows). Rows at or past a feature's num_bags (a bucket's padding) use
// zeros for its vector. The pooled vectors are not written anywhere;
// lookup.out is not read.
//
// The caller guarantees (wrong results otherwise, as for unit_bags_only):
// every feature is unit_bags on a table with UnitBagRowChunks > 0 and
// dim `dim`, and the features' out_col are dim * 1 .. dim * num_features in
// some order. Refused with cudaErrorInvalidValue: lookup.unit_bags_only
// unset or lookup.any_host set, dim not a positive multiple of 4, x or
// x_stride not 16-byte aligned, out_stride < dim + pairs, missing pointers,
// or rows too wide to stage (UnitBagDotFits false). lookup.fp32_tables_only
// selects a variant compiled for fp32 rows and SUM / MEAN pooling (wrong
// results where set without TablesFitFp32Kernel holding, as for the lookup).
// With bottom.h set, x_r is computed from h_r (UnitBagDotBottomLayer) and x,
// x_stride are not read; refused: bottom.in outside UnitBagDotBottomFits,
// h_ld < in or not a multiple of 4, h or the weights not 16-byte aligned or
// null.
cudaError_t LaunchUnitBagDotInteraction(const PooledLookupArgs& lookup, const float* x,
                                        int64_t x_stride, int64_t rows, int dim,
                                        bool self_interaction, float* out, int64_t out_stride,
                                        cudaStream_t stream,
                                        const UnitBagDotBottomLayer& bottom = {});

}  // namespace rankd::kernels::cuda

#endif  // RANKD_KERNELS_CUDA_UNIT_BAG_DOT_H_
