// The unit-bag lookup fused with the dot interaction (see unit_bag_dot.h).
//
// UnitBagDotKernel: a block of kRowThreads threads owns one row at a time
// (the grid strides over rows). Staging the row's n = 1 + num_features
// vectors, dim / 4 float4 "items" each, gives each thread about one item
// (threads take items t, t + kRowThreads, ...):
//   item of vector 0: 16 bytes of x;
//   item q of feature f: the feature's descriptor, its id (position
//   id_begin + r) and weight, then 16 bytes (fp32) or 8 bytes (fp16 / bf16)
//   at float4 q of the id's row (ld.global.nc, no L1 allocation: rows are
//   gathered at random), or the default vector's floats (or zeros) for an
//   unresolved id, counted once per bag (q == 0) with one atomic.
// After a __syncthreads each thread takes pairs t, t + kRowThreads, ... with
// the dot kernel's own code (WriteStagedRowVec4). A block per row, rather
// than the dot kernel's lane group per row, keeps enough gathers in flight:
// each thread's chain (descriptor, id, row) is one item long, and a batch of
// 2,048 rows has 4,096 warps instead of 2,048 walking four items each.
//
// The kernel is instruction-bound more than memory-bound, so it is compiled
// for the common cases: a dim of 16, 32, 64 or 128 as a constant (shifts
// for the item arithmetic, unrolled dot products) and, when every table has
// fp32 rows and SUM / MEAN pooling (PooledLookupArgs::fp32_tables_only),
// without the row-type and MAX branches. Every variant does the same
// arithmetic in the same order, so the bits do not depend on the variant.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cpu/types.h"
#include "kernels/cuda/dot_pairs.cuh"
#include "kernels/cuda/embedding_lookup.h"
#include "kernels/cuda/row_chunks.cuh"
#include "kernels/cuda/unit_bag_dot.h"

namespace rankd::kernels::cuda {
namespace {

// Threads of the block that owns a row: the fastest of 32-256 (with 1-4
// items a thread in flight) on the kaggle shape (docs/benchmarks.md).
constexpr int kRowThreads = 64;

// Where one item's floats come from.
struct ItemSource {
  const char* row = nullptr;       // the id's row, or nullptr (unresolved or padding)
  const float* fallback = nullptr;  // unresolved: default vector (nullptr = zeros)
  float weight = 1.0f;
  int32_t vector = -1;  // shared-memory vector; -1: no item
  int32_t row_type = 0;
  int32_t is_max = 0;
};

// Item e of row r (e >= dim4: feature (e - dim4) / dim4): where its floats
// come from. Counts an unresolved bag (q == 0) in args.unresolved.
// kFp32Only: every table has fp32 rows and SUM / MEAN pooling.
template <bool kFp32Only>
__device__ __forceinline__ ItemSource ResolveItem(const PooledLookupArgs& args, int64_t r, int e,
                                                  int dim4, int n) {
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
  if (!kFp32Only) {
    src.row_type = static_cast<int32_t>(t.row_type);
    src.is_max = t.pooling == Pooling::kMax ? 1 : 0;
  }
  const int elem = kFp32Only || t.row_type == RowType::kFp32 ? 4 : 2;
  if (id >= 0 && id < t.num_rows) {
    src.row = static_cast<const char*>(t.rows) + (id * dim + q * 4) * elem;
  } else {
    src.fallback = t.default_vector != nullptr ? t.default_vector + q * 4 : nullptr;
    if (q == 0 && args.unresolved != nullptr) atomicAdd(args.unresolved + feat.table, 1ull);
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

// Stages row r's n vectors at s4 (vector v at v * pitch): thread t takes
// items t, t + kRowThreads, ...
template <bool kFp32Only>
__device__ __forceinline__ void StageUnitRow(const PooledLookupArgs& args, const float* x,
                                             int64_t x_stride, int64_t r, int n, int dim4,
                                             int pitch, float4* s4) {
  const int items = n * dim4;
  for (int e = threadIdx.x; e < items; e += kRowThreads) {
    if (e < dim4) {
      s4[e] = __ldg(reinterpret_cast<const float4*>(x + r * x_stride) + e);
      continue;
    }
    const ItemSource s = ResolveItem<kFp32Only>(args, r, e, dim4, n);
    if (s.vector < 0) continue;
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (s.row != nullptr) {
      uint32_t raw[4];
      if (kFp32Only || s.row_type == static_cast<int32_t>(RowType::kFp32)) {
        LoadRaw<16>(s.row, raw);
      } else {
        uint32_t half[2];
        LoadRaw<8>(s.row, half);
        raw[0] = half[0];
        raw[1] = half[1];
      }
      v = ItemFloats(s, raw);
    } else if (s.fallback != nullptr) {
      v = make_float4(__ldg(s.fallback), __ldg(s.fallback + 1), __ldg(s.fallback + 2),
                      __ldg(s.fallback + 3));
    }
    // Padding (weight 1, SUM) pools its zeros to zeros.
    v = make_float4(Pool1(s, v.x), Pool1(s, v.y), Pool1(s, v.z), Pool1(s, v.w));
    s4[s.vector * pitch + (e - (e / dim4) * dim4)] = v;
  }
}

// kDim: the vectors' width when compiled for one (16, 32, 64, 128), 0 for
// any other (then `dim`); kFp32Only: PooledLookupArgs::fp32_tables_only.
template <int kDim, bool kFp32Only>
__global__ void __launch_bounds__(kRowThreads)
    UnitBagDotKernel(const PooledLookupArgs args, const float* __restrict__ x, int64_t x_stride,
                     int64_t rows, int n, int dim_arg, int offset, int num_pairs, int pitch,
                     float* __restrict__ out, int64_t out_stride) {
  extern __shared__ float4 smem4[];
  const int dim = kDim != 0 ? kDim : dim_arg;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    StageUnitRow<kFp32Only>(args, x, x_stride, r, n, dim >> 2, pitch, smem4);
    __syncthreads();
    WriteStagedRowVec4(smem4, pitch, dim, threadIdx.x, kRowThreads, threadIdx.x, kRowThreads,
                       offset, num_pairs, out + r * out_stride);
    __syncthreads();  // the next row overwrites smem4
  }
}

}  // namespace

bool UnitBagDotFits(int num_features, int dim) {
  if (num_features < 1 || dim <= 0 || dim % 4 != 0) return false;
  return static_cast<int64_t>(1 + num_features) * Vec4Pitch(dim / 4) * 16 <= kDotStageLimitBytes;
}

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
  if (!UnitBagDotFits(lookup.num_features, dim)) return cudaErrorInvalidValue;
  const int pitch = Vec4Pitch(dim / 4);
  const size_t smem = static_cast<size_t>(n) * pitch * sizeof(float4);
  constexpr int64_t kMaxBlocks = int64_t{1} << 20;  // the grid strides over the rest
  const unsigned grid = static_cast<unsigned>(rows < kMaxBlocks ? rows : kMaxBlocks);
  const bool fp32 = lookup.fp32_tables_only;
  auto kernel = fp32 ? UnitBagDotKernel<0, true> : UnitBagDotKernel<0, false>;
  switch (dim) {
    case 16: kernel = fp32 ? UnitBagDotKernel<16, true> : UnitBagDotKernel<16, false>; break;
    case 32: kernel = fp32 ? UnitBagDotKernel<32, true> : UnitBagDotKernel<32, false>; break;
    case 64: kernel = fp32 ? UnitBagDotKernel<64, true> : UnitBagDotKernel<64, false>; break;
    case 128: kernel = fp32 ? UnitBagDotKernel<128, true> : UnitBagDotKernel<128, false>; break;
    default: break;
  }
  kernel<<<grid, kRowThreads, smem, stream>>>(lookup, x, x_stride, rows, n, dim,
                                               self_interaction ? 1 : 0, num_pairs, pitch, out,
                                               out_stride);
  return cudaGetLastError();
}

}  // namespace rankd::kernels::cuda
