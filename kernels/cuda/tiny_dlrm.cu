// Fused forward of a tiny DOT DLRM (see tiny_dlrm.h for the contract).
//
// Block = one tile of 32 candidates (lane l of every warp works on candidate
// tile0 + l) and K = KB + KL warps:
//   warps [0, KB)   "bottom": cp.async the dense tile (transposed to
//                   [feature][lane]) and the bottom weights into shared
//                   memory, then run the bottom MLP, split by groups of 4
//                   outputs over the KB warps (named barrier 1 between
//                   layers); x goes to the interaction buffers.
//   warps [KB, K)   "lookup": cp.async the top weights, then pool features
//                   f = w, w + KL, ... (all 32 candidates of the tile at once:
//                   offsets -> ids -> rows, up to kChunk ids of a bag in
//                   flight), each pooled vector to shared memory.
// Both groups run at the same time, so the bottom MLP hides under the lookup
// latency. Then, after __syncthreads, all K warps compute the pairs (split by
// pair) and each top layer (split by groups of 4 outputs, __syncthreads
// between layers); warp 0 does the last, 1-wide layer and the sigmoid.
//
// Per-candidate buffers are [row][32 lanes] in shared memory (lane-contiguous:
// conflict-free); weights are read as float4 broadcasts (every lane reads the
// same address). Shared memory (floats, all offsets multiples of 32):
//   [packed weights][act_a][act_b][feats: (1 + F) * dim rows][top_in: dim + P rows]
// act_a first holds the dense tile; feats holds T = [x, e_0, .., e_{F-1}];
// top_in holds [x, pairs], the top MLP input.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/hash_table.h"
#include "kernels/cpu/types.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/tiny_dlrm.h"

namespace rankd::kernels::cuda {
namespace {

constexpr int kTile = kTinyDlrmTile;
static_assert(kTile == 32, "one candidate per lane");
constexpr int kMaxWarps = 16;
constexpr int kMaxDevices = 64;

struct LayerDesc {
  int in = 0;
  int out = 0;
  int out4 = 0;  // out rounded up to 4
  int w = 0;     // float offset of weight^T [in][out4]; bias [out4] follows
};

struct TinyParams {
  const float* dense;
  const float* weights;
  float* scores;
  unsigned long long* unresolved;
  int64_t rows;
  int num_dense;
  int dim;
  int num_features;
  int self_offset;  // 1 with self interaction
  int num_pairs;
  int num_bottom;
  int num_top;
  int bottom_floats;  // packed floats of the bottom layers (staged by bottom warps)
  int packed_floats;
  int off_act_a, off_act_b, off_feats, off_top_in;  // floats
  int bottom_warps, lookup_warps;
  LayerDesc bottom[kTinyDlrmMaxLayers];
  LayerDesc top[kTinyDlrmMaxLayers];
  TinyDlrmFeature features[kTinyDlrmMaxFeatures];
};
static_assert(sizeof(TinyParams) <= 4000, "kernel parameters are limited to 4 KB");

int Round4(int x) { return (x + 3) / 4 * 4; }

// Everything derived from a shape on the host: layer descriptors, packed
// size, shared-memory layout, warps.
struct Plan {
  LayerDesc bottom[kTinyDlrmMaxLayers];
  LayerDesc top[kTinyDlrmMaxLayers];
  int bottom_floats = 0;
  int packed_floats = 0;
  int act_rows = 0;
  int off_act_a = 0, off_act_b = 0, off_feats = 0, off_top_in = 0;
  int64_t shared_floats = 0;
  int bottom_warps = 1, lookup_warps = 1;
};

// No limit: the layout of a shape, whatever device it may run on.
constexpr int64_t kAnyShared = INT64_MAX;

// `max_shared_bytes`: the opt-in shared memory per block of the device the
// plan is for.
bool MakePlan(const TinyDlrmShape& s, Plan* plan, std::string* why,
              int64_t max_shared_bytes) {
  auto fail = [why](const std::string& m) {
    if (why != nullptr) *why = m;
    return false;
  };
  if (s.num_dense < 1 || s.num_dense > kTinyDlrmMaxWidth) return fail("num_dense not in [1, 64]");
  if (s.dim < 1 || s.dim > kTinyDlrmMaxDim) return fail("dim not in [1, 16]");
  if (s.num_features < 1 || s.num_features > kTinyDlrmMaxFeatures) {
    return fail("num_features not in [1, 26]");
  }
  if (s.num_bottom < 0 || s.num_bottom > kTinyDlrmMaxLayers) return fail("more than 4 bottom layers");
  if (s.num_top < 1 || s.num_top > kTinyDlrmMaxLayers) return fail("top layers not in [1, 4]");
  for (int l = 0; l < s.num_bottom; ++l) {
    if (s.bottom[l] < 1 || s.bottom[l] > kTinyDlrmMaxWidth) return fail("bottom width not in [1, 64]");
  }
  for (int l = 0; l < s.num_top; ++l) {
    if (s.top[l] < 1 || s.top[l] > kTinyDlrmMaxWidth) return fail("top width not in [1, 64]");
  }
  const int x_width = s.num_bottom > 0 ? s.bottom[s.num_bottom - 1] : s.num_dense;
  if (x_width != s.dim) return fail("bottom MLP output (x) width differs from dim");
  if (s.top[s.num_top - 1] != 1) return fail("last top layer is not 1 wide");

  Plan p;
  int offset = 0;
  int act_rows = s.num_dense;
  // Lays out `count` layers of `widths` after the floats packed so far (each
  // layer's weight^T and bias, `out` rounded up to 4), the first reading `in`
  // values; returns the layers' multiply-adds per candidate.
  auto lay_out = [&offset, &act_rows](LayerDesc* layers, int count, const int* widths, int in) {
    int64_t macs = 0;
    for (int l = 0; l < count; ++l) {
      LayerDesc& d = layers[l];
      d.in = in;
      d.out = widths[l];
      d.out4 = Round4(d.out);
      d.w = offset;
      offset += (d.in + 1) * d.out4;
      macs += static_cast<int64_t>(d.in) * d.out;
      if (d.out4 > act_rows) act_rows = d.out4;
      in = d.out;
    }
    return macs;
  };
  const int64_t bottom_macs = lay_out(p.bottom, s.num_bottom, s.bottom, s.num_dense);
  p.bottom_floats = offset;
  lay_out(p.top, s.num_top, s.top, s.interaction_width());
  p.packed_floats = offset;  // a multiple of 4: every term is
  p.act_rows = act_rows;
  p.off_act_a = Round4(p.packed_floats);
  p.off_act_b = p.off_act_a + act_rows * kTile;
  p.off_feats = p.off_act_b + act_rows * kTile;
  p.off_top_in = p.off_feats + (1 + s.num_features) * s.dim * kTile;
  p.shared_floats = p.off_top_in + static_cast<int64_t>(s.interaction_width()) * kTile;
  if (p.shared_floats * 4 > max_shared_bytes) {
    return fail("needs " + std::to_string(p.shared_floats * 4) +
                " bytes of shared memory per block, over the device's " +
                std::to_string(max_shared_bytes));
  }
  // One bottom warp per ~1k MACs per candidate (at most 4), one lookup warp
  // per feature while warps last.
  p.bottom_warps = static_cast<int>((bottom_macs + 1023) / 1024);
  if (p.bottom_warps < 1) p.bottom_warps = 1;
  if (p.bottom_warps > 4) p.bottom_warps = 4;
  p.lookup_warps = s.num_features;
  if (p.lookup_warps > kMaxWarps - p.bottom_warps) p.lookup_warps = kMaxWarps - p.bottom_warps;
  *plan = p;
  return true;
}

// ---------------------------------------------------------------- device ---

__device__ __forceinline__ void CpAsync16(float* dst, const float* src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
}

// Copies 4 bytes, or writes zero when src_bytes == 0.
__device__ __forceinline__ void CpAsync4(float* dst, const float* src, int src_bytes) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src),
               "r"(src_bytes)
               : "memory");
}

__device__ __forceinline__ void CpAsyncWaitAll() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}

// Barrier among the first `warps` warps of the block (the bottom group).
__device__ __forceinline__ void BottomBarrier(int warps) {
  if (warps == 1) {
    __syncwarp();
  } else {
    asm volatile("bar.sync 1, %0;\n" ::"r"(warps * 32) : "memory");
  }
}

// One dense layer for the tile, this warp's share: output groups of 4
// q = first, first + step, ...; in_buf / out rows are [row][32].
// out_row(o) = y for o < d.out, after ReLU when relu.
template <typename Store>
__device__ __forceinline__ void DenseLayer(const float* w_s, const LayerDesc& d,
                                           const float* in_buf, int lane, int first, int step,
                                           bool relu, Store store) {
  const float* bias = w_s + d.w + d.in * d.out4;
  for (int q = first; 4 * q < d.out; q += step) {
    const float* wt = w_s + d.w + 4 * q;
    float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
#pragma unroll 4
    for (int i = 0; i < d.in; ++i) {
      const float v = in_buf[i * kTile + lane];
      const float4 w = *reinterpret_cast<const float4*>(wt + i * d.out4);
      a0 = fmaf(v, w.x, a0);
      a1 = fmaf(v, w.y, a1);
      a2 = fmaf(v, w.z, a2);
      a3 = fmaf(v, w.w, a3);
    }
    const float4 b = *reinterpret_cast<const float4*>(bias + 4 * q);
    float y[4] = {a0 + b.x, a1 + b.y, a2 + b.z, a3 + b.w};
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      if (4 * q + u < d.out) store(4 * q + u, relu ? fmaxf(y[u], 0.f) : y[u]);
    }
  }
}

// Row of `key` in a device hash table (kernels/cpu/hash_table.h layout), or
// kMissingRow. Same probe sequence as HashLookup.
__device__ __forceinline__ int64_t HashFind(const HashTableView& t, int64_t key) {
  if (key == kEmptyKey || t.num_buckets <= 0) return kMissingRow;
  const int64_t mask = t.num_buckets - 1;
  int64_t bucket = static_cast<int64_t>(HashKey(key) & static_cast<uint64_t>(mask));
  for (int64_t probe = 0; probe < t.num_buckets; ++probe) {
    const int64_t base = bucket * kBucketSlots;
    const longlong2* k2 = reinterpret_cast<const longlong2*>(t.keys + base);
    long long keys[kBucketSlots];
#pragma unroll
    for (int s = 0; s < kBucketSlots / 2; ++s) {
      const longlong2 v = __ldg(k2 + s);
      keys[2 * s] = v.x;
      keys[2 * s + 1] = v.y;
    }
    int hit = -1;      // first slot holding the key
    int empty = kBucketSlots;  // first empty slot
#pragma unroll
    for (int s = kBucketSlots - 1; s >= 0; --s) {
      if (keys[s] == key) hit = s;
      if (keys[s] == kEmptyKey) empty = s;
    }
    if (hit >= 0 && hit < empty) return __ldg(t.rows + base + hit);
    if (empty < kBucketSlots) return kMissingRow;
    bucket = (bucket + 1) & mask;
  }
  return kMissingRow;
}

__device__ __forceinline__ int64_t ResolveRow(const DeviceTable& t, int64_t id) {
  if (t.hash.num_buckets > 0) {
    const int64_t row = HashFind(t.hash, id);
    return (row >= 0 && row < t.num_rows) ? row : kMissingRow;
  }
  return (id >= 0 && id < t.num_rows) ? id : kMissingRow;
}

__device__ __forceinline__ float Bf16ToFloat(uint16_t b) {
  return __uint_as_float(static_cast<uint32_t>(b) << 16);
}

// v[0, dim) = row `row` of t as fp32 (default vector / zeros if missing).
// vec: dim % 4 == 0 and the rows pointer aligned for 4-element loads.
template <int kMaxDim>
__device__ __forceinline__ void LoadRow(const DeviceTable& t, int64_t row, int dim, bool vec,
                                        float (&v)[kMaxDim]) {
  if (row == kMissingRow) {
#pragma unroll
    for (int k = 0; k < kMaxDim; ++k) {
      if (k < dim) v[k] = t.default_vector != nullptr ? __ldg(t.default_vector + k) : 0.f;
    }
    return;
  }
  const int64_t base = row * dim;
  if (t.row_type == RowType::kFp32) {
    const float* src = static_cast<const float*>(t.rows) + base;
    if (vec) {
#pragma unroll
      for (int q = 0; q < kMaxDim / 4; ++q) {
        if (4 * q < dim) {
          const float4 x = __ldg(reinterpret_cast<const float4*>(src) + q);
          v[4 * q] = x.x;
          v[4 * q + 1] = x.y;
          v[4 * q + 2] = x.z;
          v[4 * q + 3] = x.w;
        }
      }
    } else {
#pragma unroll
      for (int k = 0; k < kMaxDim; ++k) {
        if (k < dim) v[k] = __ldg(src + k);
      }
    }
    return;
  }
  const uint16_t* src = static_cast<const uint16_t*>(t.rows) + base;
  const bool half = t.row_type == RowType::kFp16;
  if (vec) {
#pragma unroll
    for (int q = 0; q < kMaxDim / 4; ++q) {
      if (4 * q < dim) {
        const uint2 x = __ldg(reinterpret_cast<const uint2*>(src) + q);
        const uint16_t h[4] = {static_cast<uint16_t>(x.x & 0xffffu),
                               static_cast<uint16_t>(x.x >> 16),
                               static_cast<uint16_t>(x.y & 0xffffu),
                               static_cast<uint16_t>(x.y >> 16)};
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          v[4 * q + u] = half ? __half2float(__ushort_as_half(h[u])) : Bf16ToFloat(h[u]);
        }
      }
    }
  } else {
#pragma unroll
    for (int k = 0; k < kMaxDim; ++k) {
      if (k < dim) {
        const uint16_t h = __ldg(reinterpret_cast<const unsigned short*>(src) + k);
        v[k] = half ? __half2float(__ushort_as_half(h)) : Bf16ToFloat(h);
      }
    }
  }
}

// Pools feature f's bag of candidate `cand` into dst[k * 32], k < dim. All 32
// lanes of the warp call it together (inactive lanes with an empty bag).
// Arithmetic is PoolEmbeddings': acc += w * v (no FMA), MEAN divides, MAX
// starts at -inf, an empty bag gives zeros.
template <int kMaxDim>
__device__ __forceinline__ void PoolFeature(const TinyParams& p, int f, int64_t cand, bool active,
                                            float* dst) {
  constexpr int kChunk = kMaxDim <= 8 ? 4 : 2;  // ids of a bag in flight at once
  const TinyDlrmFeature& feat = p.features[f];
  const DeviceTable& t = feat.table;
  const int dim = p.dim;
  int64_t begin = 0, end = 0;
  if (active) {
    begin = __ldg(feat.offsets + cand);
    end = __ldg(feat.offsets + cand + 1);
  }
  const size_t align = t.row_type == RowType::kFp32 ? 16 : 8;
  const bool vec = (dim & 3) == 0 && (reinterpret_cast<uintptr_t>(t.rows) & (align - 1)) == 0;
  const Pooling pooling = t.pooling;
  float acc[kMaxDim];
#pragma unroll
  for (int k = 0; k < kMaxDim; ++k) acc[k] = pooling == Pooling::kMax ? -INFINITY : 0.f;
  unsigned missing = 0;
  for (int64_t i = begin; i < end; i += kChunk) {
    int64_t row[kChunk];
    float w[kChunk];
#pragma unroll
    for (int u = 0; u < kChunk; ++u) {
      row[u] = kMissingRow;
      w[u] = 1.f;
      if (i + u < end) {
        row[u] = __ldg(feat.ids + i + u);
        if (feat.weights != nullptr) w[u] = __ldg(feat.weights + i + u);
      }
    }
#pragma unroll
    for (int u = 0; u < kChunk; ++u) {
      if (i + u < end) row[u] = ResolveRow(t, row[u]);
    }
    float v[kChunk][kMaxDim];
#pragma unroll
    for (int u = 0; u < kChunk; ++u) {
      if (i + u < end) LoadRow<kMaxDim>(t, row[u], dim, vec, v[u]);
    }
#pragma unroll
    for (int u = 0; u < kChunk; ++u) {
      if (i + u < end) {
        missing += row[u] == kMissingRow ? 1u : 0u;
#pragma unroll
        for (int k = 0; k < kMaxDim; ++k) {
          if (k < dim) {
            const float x = __fmul_rn(w[u], v[u][k]);
            acc[k] = pooling == Pooling::kMax ? fmaxf(acc[k], x) : __fadd_rn(acc[k], x);
          }
        }
      }
    }
  }
  const int64_t n = end - begin;
#pragma unroll
  for (int k = 0; k < kMaxDim; ++k) {
    if (k < dim) {
      float y = acc[k];
      if (n <= 0) {
        y = 0.f;
      } else if (pooling == Pooling::kMean) {
        y = y / static_cast<float>(n);
      }
      dst[k * kTile] = y;
    }
  }
  if (p.unresolved != nullptr) {
    const unsigned total = __reduce_add_sync(0xffffffffu, missing);
    if (total != 0 && (threadIdx.x & 31) == 0) {
      atomicAdd(p.unresolved + f, static_cast<unsigned long long>(total));
    }
  }
}

// The dot interaction of one tile: top_in[dim + q] = <T_i, T_j> for the q-th
// pair (i > j, or i >= j with self-interaction), pairs dealt to the warps in
// turn; each lane is one candidate.
template <int kMaxDim>
__device__ __forceinline__ void InteractionPairs(const TinyParams& p, const float* feats,
                                                 float* top_in, int lane, int warp,
                                                 int num_warps) {
  const int dim = p.dim;
  const int off = p.self_offset;
  int i = 1 - off, j = warp;
  while (j >= i + off) {
    j -= i + off;
    ++i;
  }
  for (int q = warp; q < p.num_pairs; q += num_warps) {
    const float* a = feats + i * dim * kTile + lane;
    const float* b = feats + j * dim * kTile + lane;
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < kMaxDim; ++k) {
      if (k < dim) s = fmaf(a[k * kTile], b[k * kTile], s);
    }
    top_in[(dim + q) * kTile + lane] = s;
    j += num_warps;
    while (j >= i + off) {
      j -= i + off;
      ++i;
    }
  }
}

template <int kMaxDim>
__global__ void __launch_bounds__(kMaxWarps * 32)
    TinyDlrmKernel(const __grid_constant__ TinyParams p) {
  extern __shared__ float4 smem4[];
  float* const smem = reinterpret_cast<float*>(smem4);
  float* const w_s = smem;
  float* const act_a = smem + p.off_act_a;
  float* const act_b = smem + p.off_act_b;
  float* const feats = smem + p.off_feats;
  float* const top_in = smem + p.off_top_in;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int num_warps = blockDim.x >> 5;
  const int64_t tile0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int64_t cand = tile0 + lane;
  const bool active = cand < p.rows;
  const int dim = p.dim;

  if (warp < p.bottom_warps) {
    // ---- bottom group: stage dense tile + bottom weights, run the MLP.
    const int t = threadIdx.x;
    const int nt = p.bottom_warps * 32;
    for (int e = t; 4 * e < p.bottom_floats; e += nt) CpAsync16(w_s + 4 * e, p.weights + 4 * e);
    const int nd = p.num_dense;
    const int64_t left = p.rows - tile0;
    const int valid = left < kTile ? static_cast<int>(left) : kTile;
    // Element e of the tile: candidate c = e / nd, feature k = e % nd
    // (coalesced reads), written transposed to act_a[k][c].
    const int step_c = nt / nd, step_k = nt - step_c * nd;
    int c = t / nd, k = t - c * nd;
    for (int e = t; e < kTile * nd; e += nt) {
      const bool ok = c < valid;
      const float* src = ok ? p.dense + (tile0 + c) * nd + k : p.dense;
      CpAsync4(act_a + k * kTile + c, src, ok ? 4 : 0);
      c += step_c;
      k += step_k;
      if (k >= nd) {
        k -= nd;
        ++c;
      }
    }
    CpAsyncWaitAll();
    BottomBarrier(p.bottom_warps);
    const float* in = act_a;
    for (int l = 0; l < p.num_bottom; ++l) {
      const LayerDesc& d = p.bottom[l];
      if (l + 1 < p.num_bottom) {
        float* out = (in == act_a) ? act_b : act_a;
        DenseLayer(w_s, d, in, lane, warp, p.bottom_warps, true,
                   [&](int o, float y) { out[o * kTile + lane] = y; });
        in = out;
        BottomBarrier(p.bottom_warps);
      } else {
        DenseLayer(w_s, d, in, lane, warp, p.bottom_warps, true, [&](int o, float y) {
          feats[o * kTile + lane] = y;
          top_in[o * kTile + lane] = y;
        });
      }
    }
    if (p.num_bottom == 0) {  // x = dense (num_dense == dim)
      for (int o = warp; o < dim; o += p.bottom_warps) {
        const float y = act_a[o * kTile + lane];
        feats[o * kTile + lane] = y;
        top_in[o * kTile + lane] = y;
      }
    }
  } else {
    // ---- lookup group: stage top weights, pool features.
    const int t = threadIdx.x - p.bottom_warps * 32;
    const int nt = p.lookup_warps * 32;
    for (int e = p.bottom_floats / 4 + t; 4 * e < p.packed_floats; e += nt) {
      CpAsync16(w_s + 4 * e, p.weights + 4 * e);
    }
    for (int f = warp - p.bottom_warps; f < p.num_features; f += p.lookup_warps) {
      PoolFeature<kMaxDim>(p, f, cand, active, feats + (1 + f) * dim * kTile + lane);
    }
    CpAsyncWaitAll();
  }
  __syncthreads();

  // ---- interaction: pairs (i > j, or i >= j with self) of T, split by pair.
  InteractionPairs<kMaxDim>(p, feats, top_in, lane, warp, num_warps);
  __syncthreads();

  // ---- top MLP: hidden layers split by groups of 4 outputs, then the logit.
  const float* in = top_in;
  for (int l = 0; l + 1 < p.num_top; ++l) {
    float* out = (l % 2 == 0) ? act_a : act_b;
    DenseLayer(w_s, p.top[l], in, lane, warp, num_warps, true,
               [&](int o, float y) { out[o * kTile + lane] = y; });
    in = out;
    __syncthreads();
  }
  if (warp == 0) {
    const LayerDesc& d = p.top[p.num_top - 1];
    DenseLayer(w_s, d, in, lane, 0, 1, false, [&](int o, float y) {
      if (o == 0 && active) p.scores[cand] = 1.0f / (1.0f + expf(-y));
    });
  }
}

bool Aligned(const void* p, size_t a) { return (reinterpret_cast<uintptr_t>(p) & (a - 1)) == 0; }

template <int kMaxDim>
cudaError_t Launch(const TinyParams& params, int warps, size_t smem_bytes, cudaStream_t stream) {
  auto kernel = TinyDlrmKernel<kMaxDim>;
  if (smem_bytes > 48 * 1024) {
    // Raise the kernel's dynamic shared-memory limit once per device (to the
    // largest size seen so far).
    static std::atomic<size_t> configured[kMaxDevices];
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err != cudaSuccess) return err;
    if (device < 0 || device >= kMaxDevices) return cudaErrorInvalidDevice;
    if (configured[device].load(std::memory_order_acquire) < smem_bytes) {
      err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(smem_bytes));
      if (err != cudaSuccess) return err;
      size_t seen = configured[device].load();
      while (seen < smem_bytes && !configured[device].compare_exchange_weak(seen, smem_bytes)) {
      }
    }
  }
  const int64_t blocks = (params.rows + kTile - 1) / kTile;
  kernel<<<static_cast<unsigned>(blocks), warps * 32, smem_bytes, stream>>>(params);
  return cudaGetLastError();
}

// Opt-in shared memory per block of the current device (0 if unreadable:
// nothing launches).
int64_t LaunchDeviceSharedBytes() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  return MaxSharedBytesPerBlock(device);
}

}  // namespace

bool TinyDlrmSupported(const TinyDlrmShape& shape, int64_t max_shared_bytes,
                       std::string* why) {
  Plan plan;
  return MakePlan(shape, &plan, why, max_shared_bytes);
}

size_t TinyDlrmSharedBytes(const TinyDlrmShape& shape) {
  Plan plan;
  if (!MakePlan(shape, &plan, nullptr, kAnyShared)) return 0;
  return static_cast<size_t>(plan.shared_floats) * 4;
}

int TinyDlrmBlockThreads(const TinyDlrmShape& shape) {
  Plan plan;
  if (!MakePlan(shape, &plan, nullptr, kAnyShared)) return 0;
  return 32 * (plan.bottom_warps + plan.lookup_warps);
}

size_t TinyDlrmPackedFloats(const TinyDlrmShape& shape) {
  Plan plan;
  if (!MakePlan(shape, &plan, nullptr, kAnyShared)) return 0;
  return static_cast<size_t>(plan.packed_floats);
}

std::vector<float> PackTinyDlrmWeights(const TinyDlrmShape& shape, const LinearView* bottom,
                                       int num_bottom, const LinearView* top, int num_top) {
  Plan plan;
  if (!MakePlan(shape, &plan, nullptr, kAnyShared)) return {};
  if (num_bottom != shape.num_bottom || num_top != shape.num_top) return {};
  std::vector<float> packed(plan.packed_floats, 0.0f);
  auto pack = [&packed](const LayerDesc& d, const LinearView& v) {
    if (v.in != d.in || v.out != d.out || v.weight == nullptr) return false;
    float* w = packed.data() + d.w;
    for (int o = 0; o < d.out; ++o) {
      for (int i = 0; i < d.in; ++i) w[i * d.out4 + o] = v.weight[o * d.in + i];
    }
    if (v.bias != nullptr) std::memcpy(w + d.in * d.out4, v.bias, d.out * sizeof(float));
    return true;
  };
  for (int l = 0; l < num_bottom; ++l) {
    if (!pack(plan.bottom[l], bottom[l])) return {};
  }
  for (int l = 0; l < num_top; ++l) {
    if (!pack(plan.top[l], top[l])) return {};
  }
  return packed;
}

cudaError_t LaunchTinyDlrm(const TinyDlrmShape& shape, const TinyDlrmArgs& args,
                           cudaStream_t stream) {
  Plan plan;
  if (!MakePlan(shape, &plan, nullptr, LaunchDeviceSharedBytes()) || args.rows < 0) {
    return cudaErrorInvalidValue;
  }
  if (args.rows == 0) return cudaSuccess;
  if (args.dense == nullptr || args.weights == nullptr || args.scores == nullptr ||
      !Aligned(args.weights, 16)) {
    return cudaErrorInvalidValue;
  }
  if ((args.rows + kTile - 1) / kTile > 0x7fffffff) return cudaErrorInvalidValue;
  TinyParams p{};
  p.dense = args.dense;
  p.weights = args.weights;
  p.scores = args.scores;
  p.unresolved = args.unresolved;
  p.rows = args.rows;
  p.num_dense = shape.num_dense;
  p.dim = shape.dim;
  p.num_features = shape.num_features;
  p.self_offset = shape.self_interaction ? 1 : 0;
  const int n = 1 + shape.num_features;
  p.num_pairs = shape.self_interaction ? n * (n + 1) / 2 : n * (n - 1) / 2;
  p.num_bottom = shape.num_bottom;
  p.num_top = shape.num_top;
  p.bottom_floats = plan.bottom_floats;
  p.packed_floats = plan.packed_floats;
  p.off_act_a = plan.off_act_a;
  p.off_act_b = plan.off_act_b;
  p.off_feats = plan.off_feats;
  p.off_top_in = plan.off_top_in;
  p.bottom_warps = plan.bottom_warps;
  p.lookup_warps = plan.lookup_warps;
  for (int l = 0; l < kTinyDlrmMaxLayers; ++l) {
    p.bottom[l] = plan.bottom[l];
    p.top[l] = plan.top[l];
  }
  for (int f = 0; f < shape.num_features; ++f) {
    const TinyDlrmFeature& feat = args.features[f];
    const DeviceTable& t = feat.table;
    if (feat.offsets == nullptr || t.dim != shape.dim || t.num_rows < 0 ||
        (t.num_rows > 0 && t.rows == nullptr) ||
        (t.hash.num_buckets > 0 &&
         (t.hash.keys == nullptr || t.hash.rows == nullptr || !Aligned(t.hash.keys, 16) ||
          (t.hash.num_buckets & (t.hash.num_buckets - 1)) != 0))) {
      return cudaErrorInvalidValue;
    }
    p.features[f] = feat;
  }
  const int warps = plan.bottom_warps + plan.lookup_warps;
  const size_t smem = static_cast<size_t>(plan.shared_floats) * 4;
  if (shape.dim <= 4) return Launch<4>(p, warps, smem, stream);
  if (shape.dim <= 8) return Launch<8>(p, warps, smem, stream);
  return Launch<16>(p, warps, smem, stream);
}

}  // namespace rankd::kernels::cuda
