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
cudaError_t LaunchUnitBagDotInteraction(const PooledLookupArgs& lookup, const float* x,
                                        int64_t x_stride, int64_t rows, int dim,
                                        bool self_interaction, float* out, int64_t out_stride,
                                        cudaStream_t stream);

}  // namespace rankd::kernels::cuda

#endif  // RANKD_KERNELS_CUDA_UNIT_BAG_DOT_H_
