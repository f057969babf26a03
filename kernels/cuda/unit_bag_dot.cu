// The unit-bag lookup fused with the dot interaction (see unit_bag_dot.h).
//
// The launch is laid out as the dot interaction's (PlanDotLaunch): a group of
// G lanes owns one row (or one slice of a row's pairs when there are few
// rows) at a time. Staging a row is the only difference: its n = 1 +
// num_features vectors are dim / 4 float4 "items" each, and the group's lanes
// take items g, g + G, ... in passes of kItemsPerPass, each pass issuing
// every id load of its items, then every row load, then converting and
// pooling into shared memory, so a lane's gathers are in flight together
// rather than one after the other:
//   item of vector 0: 16 bytes of x;
//   item q of feature f: its id (position id_begin + r), its weight, then
//   16 bytes (fp32) or 8 bytes (fp16 / bf16) at float4 q of the id's row
//   (ld.global.nc, no L1 allocation: rows are gathered at random), or the
//   default vector's floats (or zeros) for an unresolved id, counted once
//   per bag (q == 0) with one atomic.
// After a __syncwarp the pairs are written by WriteStagedRowVec4, the dot
// kernel's own code.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cpu/types.h"
#include "kernels/cuda/dot_pairs.cuh"
#include "kernels/cuda/embedding_lookup.h"
#include "kernels/cuda/interaction.h"
#include "kernels/cuda/row_chunks.cuh"
#include "kernels/cuda/unit_bag_dot.h"

namespace rankd::kernels::cuda {
namespace {

// Items a lane gathers at once, and blocks per SM the registers must allow
// (the fastest of 1-4 items and 1-16 blocks on the kaggle shape).
constexpr int kItemsPerPass = 2;
constexpr int kMinBlocksPerSm = 8;

// One item's source, resolved in the id phase of a pass.
struct ItemSource {
  const char* row = nullptr;       // the id's row, or nullptr (unresolved or padding)
  const float* fallback = nullptr;  // unresolved: default vector (nullptr = zeros)
  float weight = 1.0f;
  int32_t vector = -1;  // shared-memory vector; -1: no item
  int32_t row_type = 0;
  int32_t is_max = 0;
};

// Item e of row r (e >= dim4: feature (e - dim4) / dim4): where its floats
// come from. With `count` (the row's first slice: every slice stages the
// row), counts an unresolved bag (q == 0) in args.unresolved.
__device__ __forceinline__ ItemSource ResolveItem(const PooledLookupArgs& args, int64_t r, int e,
                                                  int dim4, int n, bool count) {
  ItemSource src;
  const int f = e / dim4 - 1;
  const int q = e - (f + 1) * dim4;
  const DeviceFeature& feat = args.features[f];
  const int dim = dim4 * 4;
  const int v = feat.out_col / dim;
  if (v < 1 || v >= n || feat.out_col != v * dim) return src;  // outside the layout: skipped
  src.vector = v;
  if (r >= feat.num_bags) return src;  // padding: zeros
  const DeviceTable& t = args.tables[feat.table];
  const int64_t pos = feat.id_begin + r;
  const bool wide = args.ids32 == nullptr || feat.wide_ids != 0;
  const int64_t id = wide ? __ldg(args.ids + pos) : static_cast<int64_t>(__ldg(args.ids32 + pos));
  src.weight = (feat.weighted != 0 && args.weights != nullptr) ? __ldg(args.weights + pos) : 1.0f;
  src.row_type = static_cast<int32_t>(t.row_type);
  src.is_max = t.pooling == Pooling::kMax ? 1 : 0;
  const int elem = t.row_type == RowType::kFp32 ? 4 : 2;
  if (id >= 0 && id < t.num_rows) {
    src.row = static_cast<const char*>(t.rows) + (id * dim + q * 4) * elem;
  } else {
    src.fallback = t.default_vector != nullptr ? t.default_vector + q * 4 : nullptr;
    if (q == 0 && count && args.unresolved != nullptr) atomicAdd(args.unresolved + feat.table, 1ull);
  }
  return src;
}

// The 4 floats of a resolved item from its raw words.
__device__ __forceinline__ float4 ItemFloats(const ItemSource& s, const uint32_t (&raw)[4]) {
  float v[4];
  switch (static_cast<RowType>(s.row_type)) {
    case RowType::kFp32: RawToFloat<RowType::kFp32, 4>(raw, v); break;
    case RowType::kFp16: RawToFloat<RowType::kFp16, 4>(raw, v); break;
    case RowType::kBf16: RawToFloat<RowType::kBf16, 4>(raw, v); break;
  }
  return make_float4(v[0], v[1], v[2], v[3]);
}

// The unit-bag kernel's arithmetic for a bag of one id.
__device__ __forceinline__ float Pool1(const ItemSource& s, float x) {
  return s.is_max != 0 ? fmaxf(-INFINITY, s.weight * x) : fmaf(s.weight, x, 0.0f);
}

// Stages row r's n vectors at s4 (vector v at v * pitch) with the group's lanes.
__device__ __forceinline__ void StageUnitRow(const PooledLookupArgs& args, const float* x,
                                             int64_t x_stride, int64_t r, int n, int dim4,
                                             int pitch, int g, int group_size, bool count,
                                             float4* s4) {
  const int items = n * dim4;
  const float4* x4 = reinterpret_cast<const float4*>(x + r * x_stride);
  for (int base = g; base < items; base += group_size * kItemsPerPass) {
    ItemSource src[kItemsPerPass];
#pragma unroll
    for (int k = 0; k < kItemsPerPass; ++k) {
      const int e = base + k * group_size;
      if (e >= dim4 && e < items) src[k] = ResolveItem(args, r, e, dim4, n, count);
    }
    uint32_t raw[kItemsPerPass][4];
    float4 xv[kItemsPerPass];
#pragma unroll
    for (int k = 0; k < kItemsPerPass; ++k) {
      const int e = base + k * group_size;
      if (e < dim4) {
        xv[k] = __ldg(x4 + e);
      } else if (src[k].row != nullptr) {
        if (src[k].row_type == static_cast<int32_t>(RowType::kFp32)) {
          LoadRaw<16>(src[k].row, raw[k]);
        } else {
          uint32_t half[2];
          LoadRaw<8>(src[k].row, half);
          raw[k][0] = half[0];
          raw[k][1] = half[1];
        }
      }
    }
#pragma unroll
    for (int k = 0; k < kItemsPerPass; ++k) {
      const int e = base + k * group_size;
      if (e >= items) continue;
      if (e < dim4) {
        s4[e] = xv[k];
        continue;
      }
      const ItemSource& s = src[k];
      if (s.vector < 0) continue;
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (s.row != nullptr) {
        v = ItemFloats(s, raw[k]);
      } else if (s.fallback != nullptr) {
        v = make_float4(__ldg(s.fallback), __ldg(s.fallback + 1), __ldg(s.fallback + 2),
                        __ldg(s.fallback + 3));
      }
      // Padding (weight 1, SUM) pools its zeros to zeros.
      v = make_float4(Pool1(s, v.x), Pool1(s, v.y), Pool1(s, v.z), Pool1(s, v.w));
      const int q = e - (e / dim4) * dim4;
      s4[s.vector * pitch + q] = v;
    }
  }
}

__global__ void __launch_bounds__(128, kMinBlocksPerSm)
    UnitBagDotKernel(const PooledLookupArgs args, const float* __restrict__ x, int64_t x_stride,
                     int64_t rows, int n, int dim, int offset, int num_pairs, int pitch,
                     int group_shift, int slices, float* __restrict__ out, int64_t out_stride) {
  extern __shared__ float4 smem4[];
  const int group_size = 1 << group_shift;
  const int g = threadIdx.x & (group_size - 1);
  const int group = threadIdx.x >> group_shift;
  const int groups_per_block = blockDim.x >> group_shift;
  const unsigned mask = GroupMask(group_size);
  float4* s4 = smem4 + static_cast<int64_t>(group) * n * pitch;
  const int64_t items = rows * slices;
  const int step = group_size * slices;
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * groups_per_block + group; w < items;
       w += static_cast<int64_t>(gridDim.x) * groups_per_block) {
    const int64_t r = w / slices;
    const int first = g + static_cast<int>(w - r * slices) * group_size;
    StageUnitRow(args, x, x_stride, r, n, dim >> 2, pitch, g, group_size,
                 /*count=*/first < group_size, s4);
    __syncwarp(mask);
    WriteStagedRowVec4(s4, pitch, dim, g, group_size, first, step, offset, num_pairs,
                       out + r * out_stride);
    __syncwarp(mask);  // the next row overwrites s4
  }
}

}  // namespace

cudaError_t LaunchUnitBagDotInteraction(const PooledLookupArgs& lookup, const float* x,
                                        int64_t x_stride, int64_t rows, int dim,
                                        bool self_interaction, float* out, int64_t out_stride,
                                        cudaStream_t stream) {
  const int n = 1 + lookup.num_features;
  if (rows < 0 || lookup.num_features < 1 || dim <= 0 || dim % 4 != 0 ||
      !lookup.unit_bags_only || lookup.any_host) {
    return cudaErrorInvalidValue;
  }
  const int num_pairs = self_interaction ? n * (n + 1) / 2 : n * (n - 1) / 2;
  if (x_stride < dim || x_stride % 4 != 0 || out_stride < dim + num_pairs) {
    return cudaErrorInvalidValue;
  }
  if (rows == 0) return cudaSuccess;
  if (x == nullptr || out == nullptr || lookup.features == nullptr || lookup.tables == nullptr ||
      (lookup.ids == nullptr && lookup.ids32 == nullptr) ||
      (reinterpret_cast<uintptr_t>(x) & 15u) != 0) {
    return cudaErrorInvalidValue;
  }
  const DotLaunch plan = PlanDotLaunch(rows, n, dim, self_interaction, /*vec4=*/true);
  if (!plan.staged) return cudaErrorInvalidValue;
  UnitBagDotKernel<<<plan.grid, plan.threads, plan.smem, stream>>>(
      lookup, x, x_stride, rows, n, dim, self_interaction ? 1 : 0, num_pairs, plan.pitch,
      plan.group_shift, plan.slices, out, out_stride);
  return cudaGetLastError();
}

}  // namespace rankd::kernels::cuda
