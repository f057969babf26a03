// The unit-bag lookup kernel (see unit_bag_lookup.h).
//
// UnitBagLookupKernel: block row y takes features y, y + gridDim.y, ... (a
// grid has at most 65,535 rows); a feature that is not unit_bags, or whose
// table has no UnitBagRowChunks, is skipped (the general kernel pools it). The feature's threads stride over its
// num_bags * chunks (bag, chunk) pairs; thread (j, c):
//   * reads id id_begin + j (int32 from ids32 unless the feature is
//     wide_ids) and, for a weighted feature, its weight;
//   * resolved (0 <= id < num_rows): loads the 16 bytes of chunk c of the
//     row (ld.global.nc, no L1 allocation: rows are gathered at random) and
//     converts them to 4 (fp32) or 8 (fp16 / bf16) floats; unresolved: the
//     default vector's columns (or zeros), counted once per bag (c == 0);
//   * pools them as the general kernel pools a bag of one id and writes
//     them to row j at the feature's columns (16-byte stores when the
//     output allows).
// The unresolved counts are summed per warp, one atomic per warp.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "kernels/cpu/hash_table.h"
#include "kernels/cpu/types.h"
#include "kernels/cuda/embedding_lookup.h"
#include "kernels/cuda/row_chunks.cuh"
#include "kernels/cuda/unit_bag_lookup.h"

namespace rankd::kernels::cuda {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kThreads = 256;
// Blocks per feature at most; larger batches stride.
constexpr int64_t kMaxBlocksPerFeature = 8192;
// A grid's y dimension; more features are strided over.
constexpr int64_t kMaxGridRows = 65535;

// One thread's (bag, chunk) pairs of feature `f` (table `t`, `chunks`
// 16-byte chunks a row); adds its unresolved bags to *misses.
template <RowType kType>
__device__ __forceinline__ void PoolUnitChunks(const PooledLookupArgs& args, const DeviceFeature& f,
                                               const DeviceTable& t, int chunks,
                                               unsigned* misses) {
  constexpr int kVec = kType == RowType::kFp32 ? 4 : 8;
  const bool wide = args.ids32 == nullptr || f.wide_ids != 0;
  const float* __restrict__ weights =
      (f.weighted != 0 && args.weights != nullptr) ? args.weights : nullptr;
  const char* __restrict__ rows = static_cast<const char*>(t.rows);
  const float* __restrict__ default_vector = t.default_vector;
  const int64_t row_bytes = static_cast<int64_t>(chunks) * 16;
  const int64_t num_rows = t.num_rows;
  const bool is_max = t.pooling == Pooling::kMax;
  float* __restrict__ out = args.out + f.out_col;
  const int64_t out_stride = args.out_stride;
  const bool out_vec = (reinterpret_cast<uintptr_t>(out) & 15) == 0 && out_stride % 4 == 0;
  const int64_t n = f.num_bags * chunks;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const int64_t bag = i / chunks;
    const int c = static_cast<int>(i - bag * chunks);
    const int64_t pos = f.id_begin + bag;
    const int64_t id = wide ? __ldg(args.ids + pos) : static_cast<int64_t>(__ldg(args.ids32 + pos));
    const float w = weights != nullptr ? __ldg(weights + pos) : 1.0f;
    float v[kVec];
    if (id >= 0 && id < num_rows) {
      uint32_t raw[4];
      LoadRaw<16>(rows + id * row_bytes + c * 16, raw);
      RawToFloat<kType, kVec>(raw, v);
    } else {
      if (c == 0) ++*misses;
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        v[k] = default_vector != nullptr ? __ldg(default_vector + c * kVec + k) : 0.0f;
      }
    }
    // The general kernel's arithmetic for a bag of one id (MEAN divides by 1).
#pragma unroll
    for (int k = 0; k < kVec; ++k) v[k] = is_max ? fmaxf(-INFINITY, w * v[k]) : fmaf(w, v[k], 0.0f);
    float* dst = out + bag * out_stride + c * kVec;
    if (out_vec) {
#pragma unroll
      for (int k = 0; k < kVec; k += 4) {
        *reinterpret_cast<float4*>(dst + k) = make_float4(v[k], v[k + 1], v[k + 2], v[k + 3]);
      }
    } else {
#pragma unroll
      for (int k = 0; k < kVec; ++k) dst[k] = v[k];
    }
  }
}

// Pools feature `f` with the block (every thread of it calls this).
__device__ __forceinline__ void PoolUnitFeature(const PooledLookupArgs& args,
                                                const DeviceFeature& f) {
  if (f.unit_bags == 0) return;
  const DeviceTable& t = args.tables[f.table];
  const int chunks = UnitBagRowChunks(t);
  if (chunks == 0) return;
  unsigned misses = 0;
  switch (t.row_type) {
    case RowType::kFp32:
      PoolUnitChunks<RowType::kFp32>(args, f, t, chunks, &misses);
      break;
    case RowType::kFp16:
      PoolUnitChunks<RowType::kFp16>(args, f, t, chunks, &misses);
      break;
    case RowType::kBf16:
      PoolUnitChunks<RowType::kBf16>(args, f, t, chunks, &misses);
      break;
  }
  // Every thread of the block took the same branch: the warp is converged.
  const unsigned total = __reduce_add_sync(kFullMask, misses);
  if ((threadIdx.x & 31) == 0 && total > 0 && args.unresolved != nullptr) {
    atomicAdd(args.unresolved + f.table, static_cast<unsigned long long>(total));
  }
}

__global__ void __launch_bounds__(kThreads) UnitBagLookupKernel(const PooledLookupArgs args) {
  for (int64_t fi = blockIdx.y; fi < args.num_features; fi += gridDim.y) {
    // A copy: the pooling loop's stores to `out` could alias the array, so
    // fields read through a reference would be loaded again each iteration.
    const DeviceFeature f = args.features[fi];
    PoolUnitFeature(args, f);
  }
}

}  // namespace

cudaError_t LaunchUnitBagLookup(const PooledLookupArgs& args, cudaStream_t stream) {
  if (args.unit_bag_chunks <= 0 || args.max_bags_per_feature <= 0 || args.num_features <= 0 ||
      args.features == nullptr || args.tables == nullptr || args.out == nullptr ||
      (args.ids == nullptr && args.ids32 == nullptr)) {
    return cudaErrorInvalidValue;
  }
  const int64_t pairs = args.max_bags_per_feature * static_cast<int64_t>(args.unit_bag_chunks);
  const int64_t blocks = std::min(kMaxBlocksPerFeature, (pairs + kThreads - 1) / kThreads);
  const unsigned rows = static_cast<unsigned>(std::min<int64_t>(args.num_features, kMaxGridRows));
  UnitBagLookupKernel<<<dim3(static_cast<unsigned>(blocks), rows), kThreads, 0, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace rankd::kernels::cuda
