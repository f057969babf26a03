// Pooled embedding lookup and hash lookup kernels (see embedding_lookup.h).
// CPU twins: kernels/cpu/embedding_pool.cc (PoolEmbeddings) and
// kernels/cpu/hash_table.cc (HashLookup / HashLookupBatch).
//
// PooledLookupKernel: warp w takes bag slots [8w, 8w + 8) of the global slot
// space (all features' bags in one launch), splits them at feature
// boundaries (binary search over bag_prefix) and pools each run ("segment");
// with PooledLookupArgs::max_bags_per_feature the warps are laid out per
// feature instead (warp w: feature w / W, its bags from 8 (w % W), W warps a
// feature), one segment per warp; features left to the unit-bag kernel
// (PooledLookupArgs::unit_bag_chunks, unit_bag_lookup.h) get no warps.
// Each segment:
//   * A row is split into 16-byte chunks (4 fp32 or 8 fp16/bf16 values; 8-,
//     4- or 2-byte chunks when the dim or the table's alignment forbids 16),
//     one chunk per lane. A "group" of G lanes (G = chunks rounded up to a
//     power of two, at most 32) covers one row: dim 128 fp32 -> G = 32, dim 16
//     fp32 -> G = 4 (8 groups), dim 4 fp32 -> G = 1. Rows wider than 32 chunks
//     take several column passes.
//   * Short bags (at most 4 batches of G ids) are pooled one per group, 32 / G
//     bags at once (dim 16, bag 1: 8 bags per warp step instead of 1). Longer
//     bags are pooled by the whole warp, one at a time: the groups take every
//     (32 / G)-th id and are combined by xor-shuffles at the end. With G = 32
//     both are the same (one bag at a time, one row per warp step).
//   * Ids come in batches (32 per warp, or G per group): lane i loads id i
//     (coalesced), resolves it (bounds check, or a hash probe for DYNAMIC
//     tables), prefetches its row's bytes into L2 (no registers held), and the
//     groups fetch (row, weight) by shuffle and issue kUnroll 16-byte row loads
//     (ld.global.nc.L1::no_allocate) before using the first.
//   * Every lane ends with the pooled chunk of its columns; a bag's output
//     rows (several for a shared bag) are written with 16-byte stores when
//     the output is aligned.
//   * DYNAMIC tables with LRU / LFU scores: each resolved id touches its
//     row's score (TouchScoresWarp): a warp combines its touches of one row,
//     LRU skips rows already stamped with the batch's time, and LFU counts
//     are summed per block in shared memory (TouchAggregate) before they
//     reach the scores.
//   * Unresolved ids are not loaded: each lane keeps the count, weight sum
//     (SUM/MEAN) and weight max/min (MAX) of its unresolved ids, reduced once
//     per bag. sum_i w_i * d = (sum_i w_i) * d up to rounding, and
//     max_i w_i * d = (max w) * d for d >= 0, (min w) * d for d < 0 exactly
//     (rounding is monotonic), so MAX stays bit-identical to the CPU. Counts
//     go to args.unresolved with one atomic per segment.
//   * HOST tables (DeviceTable::host) take the kIndirect variant: their ids
//     were resolved beforehand by the staging passes below, and each id's
//     row is read from the device address in staging.locations (the HBM
//     cache, the HBM staging buffer, or host memory). The pooling arithmetic
//     is the same, so the results equal the all-in-HBM results exactly.
//
// Staging passes for HOST tables (launched before the pooling kernel):
//   ResolveHostIdsKernel: one thread per id of a HOST feature resolves it,
//     looks it up in the cache's slot map, and for a miss inserts (table,
//     row) into the launch's dedup set; the first thread to insert a row
//     takes the next staging slot. Each id's row address goes to
//     locations[]; about one id in 2^sample_shift is appended to the
//     table's access log for the cache's refresh.
//   GatherStagedRowsKernel: a few warps (kGatherMaxBlocks) walk the staged
//     rows in address order and copy them from host memory into the HBM
//     staging buffer, four rows in flight per lane, so each distinct missed
//     row crosses PCIe once, and the host addresses in flight at a time stay
//     close together (read inside the pooling loop, a miss stalls its bag's
//     warp instead). Rows beyond the staging capacity are read from host
//     memory by the pooling kernel directly.
//   * Registers: every row type / vector width / pooling is inlined into the
//     one kernel; the segment's description sits in shared memory and is read
//     where used, so the kernel stays at <= 128 registers (16 warps per SM)
//     without spilling.
//
// HashLookupKernel: one thread per key. A bucket is 16 keys = 128 bytes; the
// thread reads its first half (64 bytes, four 16-byte loads, issued together),
// and the second half only when the first has neither the key nor an empty
// slot. At load factor 0.5 most probes end in the first half, so a lookup
// moves about 64 bytes of keys + one 32-byte sector of rows, against 128 + 32
// for a half-warp reading the whole bucket.
#include <cub/block/block_scan.cuh>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/hash_table.h"
#include "kernels/cpu/types.h"
#include "kernels/cuda/embedding_lookup.h"
#include "kernels/cuda/row_chunks.cuh"
#include "kernels/cuda/unit_bag_lookup.h"

namespace rankd::kernels::cuda {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarpSize = 32;
constexpr int kPoolWarpsPerBlock = 4;
constexpr int kPoolThreads = kWarpSize * kPoolWarpsPerBlock;
// Bag slots per warp: 8 bags of dim <= 32 fp32 (G <= 4 lanes a row) in one
// pass; dim 128 fp32 (G = 32) takes them one after another.
constexpr int kSlotsPerWarp = 8;
// Row loads each lane issues before it uses the first. 8 would hold 32
// registers of loads; with every row type and pooling inlined into the one
// kernel that pushes it past 128 registers (or spills), so 4, and the rows of
// each batch are first prefetched into L2 (no registers held) to keep enough
// bytes in flight.
constexpr int kUnroll = 4;
constexpr int kHashThreads = 256;

// ---------------------------------------------------------------------------
// Hash probe (device twin of kernels::HashLookup).

// Checks 8 consecutive slots (keys k[0..7] at slot `slot0`). Returns true when
// the probe ends here, with *row set.
__device__ __forceinline__ bool CheckSlots(const int64_t (&k)[8], int64_t key,
                                           const int64_t* __restrict__ rows, int64_t slot0,
                                           int64_t* row) {
  unsigned match = 0, empty = 0;
#pragma unroll
  for (int s = 0; s < 8; ++s) {
    match |= static_cast<unsigned>(k[s] == key) << s;
    empty |= static_cast<unsigned>(k[s] == kEmptyKey) << s;
  }
  const unsigned stop = match | empty;
  if (stop == 0) return false;
  const int s = __ffs(stop) - 1;  // first slot that is the key or empty
  *row = ((match >> s) & 1u) ? __ldg(rows + slot0 + s) : kMissingRow;
  return true;
}

// kVector: keys is 16-byte aligned (every bucket then is: 128-byte buckets).
template <bool kVector>
__device__ __forceinline__ int64_t ProbeRow(const int64_t* __restrict__ keys,
                                            const int64_t* __restrict__ rows, int64_t num_buckets,
                                            int64_t key) {
  if (key == kEmptyKey || num_buckets <= 0) return kMissingRow;
  const uint64_t mask = static_cast<uint64_t>(num_buckets) - 1;
  uint64_t bucket = HashKey(key) & mask;
  // At most num_buckets buckets, like the CPU: a full table has no empty slot
  // to end the probe of a missing key.
  for (int64_t probe = 0; probe < num_buckets; ++probe) {
    const int64_t base = static_cast<int64_t>(bucket) * kBucketSlots;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t slot0 = base + half * 8;
      int64_t k[8];
      if constexpr (kVector) {
        const longlong2* p = reinterpret_cast<const longlong2*>(keys + slot0);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const longlong2 v = __ldg(p + j);
          k[2 * j] = v.x;
          k[2 * j + 1] = v.y;
        }
      } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) k[j] = __ldg(keys + slot0 + j);
      }
      int64_t row;
      if (CheckSlots(k, key, rows, slot0, &row)) return row;
    }
    bucket = (bucket + 1) & mask;
  }
  return kMissingRow;
}

__device__ __forceinline__ bool Aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

// ---------------------------------------------------------------------------
// Pooled lookup.

// LFU score touches of one block, summed in shared memory before they reach
// the scores: an open-addressing table keyed by the score's address (0 =
// empty slot), flushed with one global add per distinct address when the
// block ends. Under skewed traffic a hot key's counter then takes one atomic
// per block instead of one per warp step (those atomics, on one address,
// serialize in L2). An address that finds no slot within kAggProbes of its
// hash is added to the scores directly.
constexpr int kAggSlots = 512;
constexpr int kAggProbes = 8;
struct TouchAggregate {
  unsigned long long addr[kAggSlots];
  unsigned int count[kAggSlots];
};

// A run of consecutive bags of one feature that one warp pools (warp-uniform).
struct SegmentJob {
  const void* rows;
  int64_t num_rows;
  int dim;
  bool mean;
  bool dynamic;
  bool hash_vector;  // hash keys 16-byte aligned
  bool rows32;       // num_rows fits in int32: row indices shuffled as 32 bits
  bool prefetch;     // prefetch each batch's rows into L2 before loading them
  HashTableView hash;
  const float* default_vector;
  const int64_t* ids;
  const float* weights;  // nullptr: unweighted
  const int64_t* bag_ids;
  const int32_t* bag_rows;
  const int32_t* ids32;      // PooledLookupArgs::ids32: read instead of ids when set
  const int32_t* bag_ids32;  // likewise bag_ids
  int64_t first_bag;  // index into bag_ids / bag_rows
  int count;          // bags in the segment, 1..kSlotsPerWarp
  float* out;         // args.out + out_col
  int64_t out_stride;
  bool out_vec;                    // out and out_stride allow 16-byte stores at 4-aligned columns
  unsigned long long* unresolved;  // nullptr: not counted
  // HOST tables (PoolBags<..., kIndirect = true>): the device address of
  // each id's row, 0 when unresolved (HostStaging::locations).
  const int64_t* locations;
  // DYNAMIC tables with scores: touched by each resolved id (nullptr = off).
  unsigned long long* scores;
  int score_policy;
  unsigned long long score_now;
  TouchAggregate* agg;  // the block's LFU aggregate (shared memory), or nullptr
};

// Id i and bag offset b of a segment or a launch, from the 32-bit arrays
// when the launch has them (PooledLookupArgs::ids32).
__device__ __forceinline__ int64_t IdAt(const volatile SegmentJob& job, int64_t i) {
  const int32_t* ids32 = job.ids32;
  return ids32 != nullptr ? static_cast<int64_t>(__ldg(ids32 + i)) : __ldg(job.ids + i);
}
__device__ __forceinline__ int64_t BagIdAt(const volatile SegmentJob& job, int64_t b) {
  const int32_t* bag_ids32 = job.bag_ids32;
  return bag_ids32 != nullptr ? static_cast<int64_t>(__ldg(bag_ids32 + b))
                              : __ldg(job.bag_ids + b);
}
__device__ __forceinline__ int64_t IdAt(const PooledLookupArgs& args,
                                        const DeviceFeature& feature, int64_t i) {
  return args.ids32 != nullptr && feature.wide_ids == 0 ? static_cast<int64_t>(__ldg(args.ids32 + i))
                                                        : __ldg(args.ids + i);
}
__device__ __forceinline__ int64_t BagIdAt(const PooledLookupArgs& args, int64_t b) {
  return args.bag_ids32 != nullptr ? static_cast<int64_t>(__ldg(args.bag_ids32 + b))
                                   : __ldg(args.bag_ids + b);
}

// Adds n to *p through the block's aggregate (a global add when kAggProbes
// slots from the address's hash hold other addresses).
__device__ __forceinline__ void AggregateAdd(TouchAggregate* agg, unsigned long long* p,
                                             unsigned n) {
  const unsigned long long a = reinterpret_cast<unsigned long long>(p);
  unsigned s = static_cast<unsigned>((a >> 3) * 0x9E3779B97F4A7C15ull >> 40) & (kAggSlots - 1);
  for (int i = 0; i < kAggProbes; ++i) {
    const unsigned long long old = atomicCAS(&agg->addr[s], 0ull, a);
    if (old == 0ull || old == a) {
      atomicAdd(&agg->count[s], n);
      return;
    }
    s = (s + 1) & (kAggSlots - 1);
  }
  atomicAdd(p, static_cast<unsigned long long>(n));
}

// Score touches of a warp's resolved rows, one per id (twin of
// kernels::TouchScoreForLookup): every lane of the warp calls it, converged;
// `row` kMissingRow touches nothing. Lanes holding the same row are combined
// and the lowest of them issues one fire-and-forget reduction (LFU adds their
// count), so a hot key costs one atomic per warp rather than one per id
// (under skewed traffic those atomics contend for one address). LRU also
// skips a row whose score, read earlier by the caller (`seen`, through the
// read-only cache: maybe older than the truth, never newer), is already >=
// now; scores only grow during lookups, so the result is the same. With
// `agg` (the block's TouchAggregate), LFU counts go through it.
__device__ __forceinline__ void TouchScoresWarp(unsigned long long* scores, int64_t row,
                                                int policy, unsigned long long now,
                                                unsigned long long seen, int lane,
                                                TouchAggregate* agg = nullptr) {
  const bool want = row != kMissingRow && (policy == 2 || (policy == 1 && seen < now));
  if (__ballot_sync(kFullMask, want) == 0) return;
  const unsigned long long key = want ? static_cast<unsigned long long>(row) : ~0ull;
  const unsigned peers = __match_any_sync(kFullMask, key);
  if (!want || lane != __ffs(peers) - 1) return;
  if (policy == 1) {
    atomicMax(scores + row, now);
  } else if (agg != nullptr) {
    AggregateAdd(agg, scores + row, static_cast<unsigned>(__popc(peers)));
  } else {
    atomicAdd(scores + row, static_cast<unsigned long long>(__popc(peers)));
  }
}

// What a lane's touch reads before the row's loads (LRU: the current score,
// so the later compare does not wait on it).
__device__ __forceinline__ unsigned long long SeenScore(const unsigned long long* scores,
                                                        int64_t row, int policy) {
  return (policy == 1 && row != kMissingRow) ? __ldg(scores + row) : 0ull;
}

// Whether the id at position `pos` of the batch's id array is sampled into
// the access log (about one in 2^shift, by a multiplicative hash of pos).
__device__ __forceinline__ bool SampledPosition(int64_t pos, int shift) {
  return (static_cast<uint64_t>(pos) * 0x9E3779B97F4A7C15ull) >> (64 - shift) == 0;
}

// The feature owning global bag slot `slot`: the last feature whose prefix is
// <= slot (features without bags have equal prefixes and are skipped by
// taking the last).
__device__ __forceinline__ int FeatureOfBagSlot(const int64_t* __restrict__ bag_prefix,
                                                int num_features, int64_t slot) {
  int lo = 0, hi = num_features - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (__ldg(bag_prefix + mid) <= slot) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// How the warp's lanes split a row: groups of `lanes` lanes, one 16-byte
// (kVec-element) chunk each.
struct Groups {
  int lanes;  // G: power of two, 1..32
  int count;  // 32 / G
  int index;  // this lane's group
  int lane;   // this lane's index in its group
};

// Asks L2 for the line holding p (no register, no wait).
__device__ __forceinline__ void PrefetchL2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

__device__ __forceinline__ int64_t ResolveRow(const volatile SegmentJob& job, int64_t id) {
  int64_t row;
  if (job.dynamic) {
    row = job.hash_vector ? ProbeRow<true>(job.hash.keys, job.hash.rows, job.hash.num_buckets, id)
                          : ProbeRow<false>(job.hash.keys, job.hash.rows, job.hash.num_buckets, id);
  } else {
    row = id;
  }
  return (row >= 0 && row < job.num_rows) ? row : kMissingRow;
}

// Adds a batch's `slots` ids (slot j: the row and weight lane
// j * src_stride + src_base resolved) to this lane's chunk `acc`: kUnroll
// rows loaded before any is converted, so their loads are in flight
// together. Every lane of the warp calls it with the same `slots`.
template <RowType kType, int kVec, bool kMax, bool kIndirect>
__device__ __forceinline__ void AccumulateSlots(int slots, int src_stride, int src_base,
                                                int64_t my_row, float my_w, bool rows32,
                                                bool col_ok, const char* __restrict__ col_base,
                                                int64_t col_bytes, int64_t row_bytes,
                                                float (&acc)[kVec]) {
  constexpr int kElemBytes = kType == RowType::kFp32 ? 4 : 2;
  constexpr int kBytes = kVec * kElemBytes;
  constexpr int kWords = (kBytes + 3) / 4;
  for (int k = 0; k < slots; k += kUnroll) {
    uint32_t raw[kUnroll][kWords];
    float w[kUnroll];
    bool ok[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) ok[u] = false;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (k + u >= slots) break;                        // warp-uniform
      const int src = (k + u) * src_stride + src_base;  // < 32 since k + u < G
      const int64_t r =
          rows32
              ? static_cast<int64_t>(__shfl_sync(kFullMask, static_cast<int32_t>(my_row), src))
              : __shfl_sync(kFullMask, my_row, src);
      w[u] = __shfl_sync(kFullMask, my_w, src);
      if constexpr (kIndirect) {
        ok[u] = r != kMissingRow && col_ok;
        if (ok[u]) LoadRaw<kBytes>(reinterpret_cast<const char*>(r) + col_bytes, raw[u]);
      } else {
        ok[u] = r >= 0 && col_ok;
        if (ok[u]) LoadRaw<kBytes>(col_base + r * row_bytes, raw[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (!ok[u]) continue;
      float f[kVec];
      RawToFloat<kType, kVec>(raw[u], f);
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        acc[i] = kMax ? fmaxf(acc[i], w[u] * f[i]) : fmaf(w[u], f[i], acc[i]);
      }
    }
  }
}

// Adds a bag's unresolved ids to this lane's pooled chunk `acc`: the
// default vector (or zeros) times their weights (sum / max / min by the
// pooling). The ids of a bag were loaded by the whole warp (warp mode) or by
// its group, so the counts and weights are reduced over those lanes first.
template <int kVec, bool kMax, bool warp_mode>
__device__ __forceinline__ void AddUnresolved(const volatile SegmentJob& job, const Groups& grp,
                                              int col, int dim, unsigned miss, float miss_wsum,
                                              float miss_wmax, float miss_wmin,
                                              float (&acc)[kVec]) {
  unsigned bag_miss = miss;
  const int span = warp_mode ? kWarpSize : grp.lanes;
  for (int offset = 1; offset < span; offset <<= 1) {
    bag_miss += __shfl_xor_sync(kFullMask, bag_miss, offset);
    miss_wsum += __shfl_xor_sync(kFullMask, miss_wsum, offset);
    miss_wmax = fmaxf(miss_wmax, __shfl_xor_sync(kFullMask, miss_wmax, offset));
    miss_wmin = fminf(miss_wmin, __shfl_xor_sync(kFullMask, miss_wmin, offset));
  }
  if (bag_miss > 0) {
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      float d = 0.0f;
      const float* default_vector = job.default_vector;
      if (default_vector != nullptr && col + i < dim) d = __ldg(default_vector + col + i);
      if (kMax) {
        acc[i] = fmaxf(acc[i], (d >= 0.0f ? miss_wmax : miss_wmin) * d);
      } else {
        acc[i] = fmaf(miss_wsum, d, acc[i]);
      }
    }
  }
}

// Finishes this lane's pooled chunk of a bag of `bag_size` ids (an empty bag
// pools to zeros, mean divides) and writes it to every output row of the bag
// (in warp mode the groups write different rows).
template <int kVec, bool warp_mode>
__device__ __forceinline__ void StorePooled(const volatile SegmentJob& job, const Groups& grp,
                                            int64_t bag_size, int col, bool col_ok, int dim,
                                            int32_t row_begin, int32_t row_end,
                                            float (&acc)[kVec]) {
  if (bag_size == 0) {
    // torch: an empty bag pools to zeros in every mode.
#pragma unroll
    for (int i = 0; i < kVec; ++i) acc[i] = 0.0f;
  } else if (job.mean) {
    const float n = static_cast<float>(bag_size);
#pragma unroll
    for (int i = 0; i < kVec; ++i) acc[i] = acc[i] / n;
  }
  if (!col_ok) return;
  float* __restrict__ out_col = job.out + col;
  __builtin_assume(__isGlobal(out_col));  // read back from shared memory: say it is global
  const int64_t out_stride = job.out_stride;
  const bool out_vec = job.out_vec;
  const int row_step = warp_mode ? grp.count : 1;
  for (int32_t r = row_begin + (warp_mode ? grp.index : 0); r < row_end; r += row_step) {
    float* __restrict__ dst = out_col + static_cast<int64_t>(r) * out_stride;
    if constexpr (kVec % 4 == 0) {
      if (out_vec) {
#pragma unroll
        for (int i = 0; i < kVec; i += 4) {
          *reinterpret_cast<float4*>(dst + i) =
              make_float4(acc[i], acc[i + 1], acc[i + 2], acc[i + 3]);
        }
        continue;
      }
    }
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      if (col + i < dim) dst[i] = acc[i];
    }
  }
}

// Unresolved ids a lane loaded: count, weight sum, max and min of their weights.
struct UnresolvedIds {
  unsigned count = 0;
  float wsum = 0.0f, wmax = -INFINITY, wmin = INFINITY;
  __device__ __forceinline__ void Add(float w) {
    ++count;
    wsum += w;
    wmax = fmaxf(wmax, w);
    wmin = fminf(wmin, w);
  }
};

// Loads id `i` of the job for one lane: its row (*row: the row index, the
// row's device address for kIndirect, or kMissingRow) and weight. A missing
// row goes to *miss. Otherwise, on the first column pass (first_pass), reads
// the row's eviction score for the touch into *seen (not for kIndirect: HOST
// tables touch in the resolve pass), and with `prefetch` asks L2 for this
// pass's bytes [pass_begin, pass_begin + pass_bytes) of the row.
template <bool kIndirect>
__device__ __forceinline__ void LoadSlot(const volatile SegmentJob& job, int64_t i,
                                         bool first_pass, const char* __restrict__ table_rows,
                                         int64_t row_bytes, int64_t pass_begin, int64_t pass_bytes,
                                         bool prefetch, int64_t* row, float* w,
                                         unsigned long long* seen, UnresolvedIds* miss) {
  const float* weights = job.weights;
  if (weights != nullptr) *w = __ldg(weights + i);
  const char* row_start = nullptr;
  if constexpr (kIndirect) {
    // Resolved by the staging passes: the row's device address, or 0.
    const int64_t loc = __ldg(job.locations + i);
    *row = loc != 0 ? loc : kMissingRow;
    row_start = reinterpret_cast<const char*>(loc);
  } else {
    *row = ResolveRow(job, IdAt(job, i));
    row_start = table_rows + *row * row_bytes;
  }
  if (*row == kMissingRow) {
    miss->Add(*w);
    return;
  }
  if constexpr (!kIndirect) {
    // Once per id (first column pass), after this batch's loads.
    if (first_pass && job.scores != nullptr) *seen = SeenScore(job.scores, *row, job.score_policy);
  }
  if (prefetch) {
    // This pass's columns of the row, one request per 128-byte line.
    const char* first = row_start + pass_begin;
    for (int64_t offset = 0; offset < pass_bytes; offset += 128) PrefetchL2(first + offset);
  }
}

// Pools one bag per group (warp_mode false: ids [begin, end) and output rows
// [row_begin, row_end) differ between groups; a group without a bag has empty
// ranges) or one bag with the whole warp (warp_mode true: the ranges are
// warp-uniform, the groups take every num_groups-th id and are combined at the
// end). Adds this lane's unresolved ids to *miss_count. Every lane of the warp
// calls this with the same warp_mode.
template <RowType kType, int kVec, bool kMax, bool warp_mode, bool kIndirect>
__device__ __forceinline__ void PoolBags(const volatile SegmentJob& job, const Groups& grp,
                                         int64_t begin, int64_t end, int32_t row_begin,
                                         int32_t row_end, int lane, unsigned* miss_count) {
  constexpr int kElemBytes = kType == RowType::kFp32 ? 4 : 2;
  const float init = kMax ? -INFINITY : 0.0f;

  const int dim = job.dim;
  const int cols_per_pass = grp.lanes * kVec;
  // Ids come in batches: 32 (one per lane) in warp mode, G (one per lane of
  // the group) in group mode. Slot j (0..G-1) of a group's share of a batch
  // is the id loaded by lane j * src_stride + src_base.
  const int batch_width = warp_mode ? kWarpSize : grp.lanes;
  const int my_slot = warp_mode ? lane : grp.lane;
  const int src_stride = warp_mode ? grp.count : 1;
  const int src_base = warp_mode ? grp.index : grp.index * grp.lanes;
  const int64_t bag_size = end - begin;
  int batches = static_cast<int>((bag_size + batch_width - 1) / batch_width);
  if constexpr (!warp_mode)
    batches = static_cast<int>(__reduce_max_sync(kFullMask, static_cast<unsigned>(batches)));
  const char* __restrict__ table_rows = static_cast<const char*>(job.rows);
  // Indirect rows are 64-bit addresses.
  const bool rows32 = !kIndirect && job.rows32;
  const bool prefetch = job.prefetch;
  const int64_t row_bytes = static_cast<int64_t>(dim) * kElemBytes;

  for (int col0 = 0; col0 < dim; col0 += cols_per_pass) {
    const int col = col0 + grp.lane * kVec;
    const bool col_ok = col < dim;
    const char* __restrict__ col_base = table_rows + static_cast<int64_t>(col) * kElemBytes;
    // kIndirect: this lane's columns at offset col_bytes of each row's address.
    const int64_t col_bytes = static_cast<int64_t>(col) * kElemBytes;
    const int64_t pass_begin = static_cast<int64_t>(col0) * kElemBytes;
    const int64_t pass_bytes =
        min(row_bytes - pass_begin, static_cast<int64_t>(cols_per_pass) * kElemBytes);
    float acc[kVec];
#pragma unroll
    for (int i = 0; i < kVec; ++i) acc[i] = init;
    UnresolvedIds miss;  // this lane's, in this column pass

    for (int t = 0; t < batches; ++t) {
      const int64_t batch = begin + static_cast<int64_t>(t) * batch_width;
      int64_t my_row = kMissingRow;  // also for slots past the end: never loaded
      float my_w = 1.0f;
      unsigned long long seen = 0;  // score of my_row read for the touch (LRU)
      if (batch + my_slot < end) {
        LoadSlot<kIndirect>(job, batch + my_slot, col0 == 0, table_rows, row_bytes, pass_begin,
                            pass_bytes, prefetch, &my_row, &my_w, &seen, &miss);
      }
      // Slots of this batch any group needs (warp-uniform).
      const int valid =
          static_cast<int>(max(int64_t{0}, min(static_cast<int64_t>(batch_width), end - batch)));
      int slots;
      if constexpr (warp_mode) {
        slots = (valid + grp.count - 1) / grp.count;
      } else {
        slots = static_cast<int>(__reduce_max_sync(kFullMask, static_cast<unsigned>(valid)));
      }
      slots = min(slots, grp.lanes);
      AccumulateSlots<kType, kVec, kMax, kIndirect>(slots, src_stride, src_base, my_row, my_w,
                                                    rows32, col_ok, col_base, col_bytes,
                                                    row_bytes, acc);
      if constexpr (!kIndirect) {
        // Warp-uniform test of a shared-memory pointer; the warp is converged.
        if (col0 == 0 && job.scores != nullptr) {
          TouchScoresWarp(job.scores, my_row, job.score_policy, job.score_now, seen, lane,
                          job.agg);
        }
      }
    }

    if constexpr (warp_mode) {
      // Combine the groups (lanes with the same group lane hold the same columns).
      for (int offset = grp.lanes; offset < kWarpSize; offset <<= 1) {
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          const float other = __shfl_xor_sync(kFullMask, acc[i], offset);
          acc[i] = kMax ? fmaxf(acc[i], other) : acc[i] + other;
        }
      }
    }

    // Unresolved ids: default vector (or zeros) times their weights.
    if (col0 == 0) *miss_count += miss.count;
    AddUnresolved<kVec, kMax, warp_mode>(job, grp, col, dim, miss.count, miss.wsum, miss.wmax,
                                         miss.wmin, acc);
    StorePooled<kVec, warp_mode>(job, grp, bag_size, col, col_ok, dim, row_begin, row_end, acc);
  }
}

// Position of the (k+1)-th set bit of mask (k < popc(mask)).
__device__ __forceinline__ int NthSetBit(unsigned mask, int k) {
  for (int i = 0; i < k; ++i) mask &= mask - 1;
  return __ffs(mask) - 1;
}

// Pools the job's `count` consecutive bags with the warp. Short bags are
// pooled one per group, num_groups at a time; bags longer than
// kLongBagBatches batches of a group go to the whole warp, one at a time
// (with G = 32 both are the same: one bag at a time).
template <RowType kType, int kVec, bool kMax, bool kIndirect>
__device__ __forceinline__ void PoolSegment(const volatile SegmentJob& job, int lane) {
  constexpr int kLongBagBatches = 4;
  const int chunks = (job.dim + kVec - 1) / kVec;
  Groups grp;
  grp.lanes = 1;
  while (grp.lanes < chunks && grp.lanes < kWarpSize) grp.lanes <<= 1;
  const int log_lanes = __ffs(grp.lanes) - 1;
  grp.count = kWarpSize >> log_lanes;
  grp.index = lane >> log_lanes;
  grp.lane = lane & (grp.lanes - 1);

  // Bag first_bag + l is long when it has more than kLongBagBatches batches
  // of a group (never with one group: G = 32).
  bool is_long = false;
  if (lane < job.count && grp.count > 1) {
    const int64_t b = job.first_bag + lane;
    is_long =
        BagIdAt(job, b + 1) - BagIdAt(job, b) > kLongBagBatches * max(grp.lanes, 2);
  }
  const unsigned long_mask = __ballot_sync(kFullMask, is_long);
  const unsigned short_mask = __ballot_sync(kFullMask, lane < job.count && !is_long);

  unsigned miss_count = 0;
  const int num_short = __popc(short_mask);
  for (int base = 0; base < num_short; base += grp.count) {
    const int k = base + grp.index;
    int64_t begin = 0, end = 0;
    int32_t row_begin = 0, row_end = 0;  // empty: no bag for this group
    if (k < num_short) {
      const int64_t b = job.first_bag + NthSetBit(short_mask, k);
      begin = BagIdAt(job, b);
      end = BagIdAt(job, b + 1);
      row_begin = __ldg(job.bag_rows + b);
      row_end = __ldg(job.bag_rows + b + 1);
    }
    PoolBags<kType, kVec, kMax, /*warp_mode=*/false, kIndirect>(
        job, grp, begin, end, row_begin, row_end, lane, &miss_count);
  }
  for (unsigned m = long_mask; m != 0; m &= m - 1) {
    const int64_t b = job.first_bag + (__ffs(m) - 1);
    PoolBags<kType, kVec, kMax, /*warp_mode=*/true, kIndirect>(
        job, grp, BagIdAt(job, b), BagIdAt(job, b + 1), __ldg(job.bag_rows + b),
        __ldg(job.bag_rows + b + 1), lane, &miss_count);
  }

  // One atomic per segment for its unresolved ids.
  const unsigned total = __reduce_add_sync(kFullMask, miss_count);
  unsigned long long* unresolved = job.unresolved;
  if (lane == 0 && total > 0 && unresolved != nullptr) {
    // atomicAdd (relaxed, device scope) on a global address; spelled out
    // because a pointer read from shared memory is generic to the compiler.
    asm volatile("red.relaxed.gpu.global.add.u64 [%0], %1;" ::"l"(unresolved),
                 "l"(static_cast<unsigned long long>(total))
                 : "memory");
  }
}

template <RowType kType, int kVec, bool kAllowIndirect>
__device__ __forceinline__ void PoolSegmentDispatchMax(const volatile SegmentJob& job,
                                                       Pooling pooling, bool indirect, int lane) {
  if (kAllowIndirect && indirect) {
    if (pooling == Pooling::kMax) {
      PoolSegment<kType, kVec, true, true>(job, lane);
    } else {
      PoolSegment<kType, kVec, false, true>(job, lane);
    }
  } else if (pooling == Pooling::kMax) {
    PoolSegment<kType, kVec, true, false>(job, lane);
  } else {
    PoolSegment<kType, kVec, false, false>(job, lane);
  }
}

// Writes a segment's description (lane 0 of the warp; the others wait at
// the caller's __syncwarp).
__device__ __forceinline__ void FillSegmentJob(SegmentJob& job, const PooledLookupArgs& args,
                                               const DeviceFeature& feature,
                                               const DeviceTable& table, int dim,
                                               int64_t first_bag, int count, bool prefetch,
                                               TouchAggregate* agg) {
  job.rows = table.rows;
  job.num_rows = table.num_rows;
  job.rows32 = table.num_rows <= INT32_MAX;
  job.prefetch = prefetch;
  job.dim = dim;
  job.mean = table.pooling == Pooling::kMean;
  job.hash = table.hash;
  job.dynamic = table.hash.num_buckets > 0;
  job.hash_vector = Aligned16(table.hash.keys);
  job.default_vector = table.default_vector;
  job.ids = args.ids;
  job.weights = (feature.weighted && args.weights != nullptr) ? args.weights : nullptr;
  job.bag_ids = args.bag_ids;
  job.bag_rows = args.bag_rows;
  job.ids32 = feature.wide_ids == 0 ? args.ids32 : nullptr;
  job.bag_ids32 = args.bag_ids32;
  job.first_bag = first_bag;
  job.count = count;
  job.out = args.out + feature.out_col;
  job.out_stride = args.out_stride;
  job.out_vec = Aligned16(job.out) && (args.out_stride % 4) == 0;
  job.unresolved = args.unresolved != nullptr ? args.unresolved + feature.table : nullptr;
  job.locations = args.staging.locations;
  const bool scored = table.hash.num_buckets > 0 && table.scores != nullptr &&
                      (table.score_policy == 1 || table.score_policy == 2);
  job.scores = scored ? table.scores : nullptr;
  job.score_policy = table.score_policy;
  job.score_now = args.score_now_ptr != nullptr ? *args.score_now_ptr : args.score_now;
  job.agg = agg;
}

// Pools the segment in `job` with the kernel variant for its table's row
// type, vector width and alignment.
// kFp32Only: every table fits TablesFitFp32Kernel, so only the fp32, 16-byte,
// SUM / MEAN variant is compiled in (fewer registers and instructions).
template <bool kAllowIndirect, bool kFp32Only>
__device__ __forceinline__ void PoolSegmentOfTable(const SegmentJob& job, const DeviceTable& table,
                                                   int dim, int lane) {
  if (kFp32Only) {
    PoolSegment<RowType::kFp32, 4, /*kMax=*/false, /*kIndirect=*/false>(job, lane);
    return;
  }
  const Pooling pooling = table.pooling;
  const bool indirect = table.host != 0;
  const bool rows16 = Aligned16(table.rows);
  const bool rows8 = (reinterpret_cast<uintptr_t>(table.rows) & 7) == 0;
  switch (table.row_type) {
    case RowType::kFp32:
      if (dim % 4 == 0 && rows16) {
        PoolSegmentDispatchMax<RowType::kFp32, 4, kAllowIndirect>(job, pooling, indirect, lane);
      } else {
        PoolSegmentDispatchMax<RowType::kFp32, 1, kAllowIndirect>(job, pooling, indirect, lane);
      }
      break;
    case RowType::kFp16:
      if (dim % 8 == 0 && rows16) {
        PoolSegmentDispatchMax<RowType::kFp16, 8, kAllowIndirect>(job, pooling, indirect, lane);
      } else if (dim % 4 == 0 && rows8) {
        PoolSegmentDispatchMax<RowType::kFp16, 4, kAllowIndirect>(job, pooling, indirect, lane);
      } else {
        PoolSegmentDispatchMax<RowType::kFp16, 1, kAllowIndirect>(job, pooling, indirect, lane);
      }
      break;
    case RowType::kBf16:
      if (dim % 8 == 0 && rows16) {
        PoolSegmentDispatchMax<RowType::kBf16, 8, kAllowIndirect>(job, pooling, indirect, lane);
      } else if (dim % 4 == 0 && rows8) {
        PoolSegmentDispatchMax<RowType::kBf16, 4, kAllowIndirect>(job, pooling, indirect, lane);
      } else {
        PoolSegmentDispatchMax<RowType::kBf16, 1, kAllowIndirect>(job, pooling, indirect, lane);
      }
      break;
  }
}

// Whether feature f is left to the unit-bag kernel (unit_bag_lookup.h).
__device__ __forceinline__ bool PooledByUnitBagKernel(const PooledLookupArgs& args, int f) {
  if (args.unit_bag_chunks <= 0) return false;
  const DeviceFeature& feature = args.features[f];
  return feature.unit_bags != 0 && UnitBagRowChunks(args.tables[feature.table]) > 0;
}

// This warp's index in the launch.
__device__ __forceinline__ int64_t WarpChunk() {
  return static_cast<int64_t>(blockIdx.x) * kPoolWarpsPerBlock + threadIdx.x / kWarpSize;
}

// Warp w pools bag slots [w * kSlotsPerWarp, (w + 1) * kSlotsPerWarp), split
// into segments at feature boundaries, or (max_bags_per_feature) up to
// kSlotsPerWarp bags of one feature.
// kAllowIndirect: the batch has HOST tables. A separate instantiation, so
// the all-in-HBM kernel keeps its registers (the indirect path spills a
// little at the 128-register bound).
// kFp32Only: PooledLookupArgs::fp32_tables_only (PoolSegmentOfTable).
template <bool kAllowIndirect, bool kFp32Only>
__global__ void __launch_bounds__(kPoolThreads, 4)
    PooledLookupKernel(const PooledLookupArgs args, const int64_t* __restrict__ bag_prefix,
                       bool prefetch, bool aggregate) {
  const int lane = threadIdx.x & (kWarpSize - 1);
  // aggregate: the launch may touch scores (block-uniform, so the barriers
  // below are reached by every thread).
  __shared__ TouchAggregate touch_agg;
  if (aggregate) {
    for (int i = threadIdx.x; i < kAggSlots; i += blockDim.x) {
      touch_agg.addr[i] = 0;
      touch_agg.count[i] = 0;
    }
    __syncthreads();
  }
  const int num_features = args.num_features;
  __shared__ SegmentJob segment_jobs[kPoolWarpsPerBlock];
  // The warp's bag range [next, end): slots of all features' bags in order,
  // or bags of one feature (max_bags_per_feature). Kept in shared memory:
  // the pooling loops need every register, and a value live across them
  // would otherwise be spilled to local memory (the warp's chunk and feature
  // are recomputed from the thread index instead, for the same reason).
  __shared__ int64_t ranges[kPoolWarpsPerBlock][2];
  volatile int64_t* range = ranges[threadIdx.x / kWarpSize];
  const bool per_feature = args.max_bags_per_feature > 0;
  {
    const int64_t chunk = WarpChunk();
    int64_t first = 0, last = 0;
    if (per_feature) {
      const int64_t warps_per_feature =
          (args.max_bags_per_feature + kSlotsPerWarp - 1) / kSlotsPerWarp;
      const int64_t f = chunk / warps_per_feature;
      if (f < num_features && !PooledByUnitBagKernel(args, static_cast<int>(f))) {
        const int64_t c = chunk - f * warps_per_feature;
        const int64_t bags = args.features[f].num_bags;
        first = c * kSlotsPerWarp;
        // The feature's last warp also takes any bags past the bound.
        last = c + 1 == warps_per_feature ? bags : min(first + kSlotsPerWarp, bags);
      }
    } else {
      const int64_t num_bags = min(args.total_bags, __ldg(bag_prefix + num_features));
      first = chunk * kSlotsPerWarp;
      last = min(first + kSlotsPerWarp, num_bags);
    }
    range[0] = first;  // every lane writes the same values
    range[1] = last;
  }
  while (true) {
    const int64_t next = range[0];
    const int64_t last = range[1];
    if (next >= last) break;
    int lo;
    int64_t first_bag;
    int count;
    if (per_feature) {
      lo = static_cast<int>(WarpChunk() / ((args.max_bags_per_feature + kSlotsPerWarp - 1) /
                                           kSlotsPerWarp));
      first_bag = args.features[lo].bag_begin + next;
      count = static_cast<int>(min(static_cast<int64_t>(kSlotsPerWarp), last - next));
    } else {
      lo = FeatureOfBagSlot(bag_prefix, num_features, next);
      const int64_t feature_first = __ldg(bag_prefix + lo);
      count = static_cast<int>(min(last - next, __ldg(bag_prefix + lo + 1) - next));
      if (count <= 0) break;  // bag_prefix not non-decreasing: stop rather than spin
      first_bag = args.features[lo].bag_begin + (next - feature_first);
    }
    __syncwarp();  // every lane has read the range
    range[0] = next + count;
    const DeviceFeature& feature = args.features[lo];
    const DeviceTable& table = args.tables[feature.table];
    const int dim = table.dim;
    // The segment's description lives in shared memory and is read where it
    // is used, so that its ~20 pointer and size registers are not held
    // through the pooling loops (fewer registers, more warps per SM).
    SegmentJob& job = segment_jobs[threadIdx.x / kWarpSize];
    if (dim <= 0) continue;
    if (lane == 0) {
      FillSegmentJob(job, args, feature, table, dim, first_bag, count, prefetch,
                     aggregate ? &touch_agg : nullptr);
    }
    __syncwarp();
    PoolSegmentOfTable<kAllowIndirect, kFp32Only>(job, table, dim, lane);
    __syncwarp();  // every lane is done with the segment before the next fill
  }
  if (aggregate) {
    __syncthreads();
    for (int i = threadIdx.x; i < kAggSlots; i += blockDim.x) {
      const unsigned long long a = touch_agg.addr[i];
      if (a != 0) {
        atomicAdd(reinterpret_cast<unsigned long long*>(a),
                  static_cast<unsigned long long>(touch_agg.count[i]));
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Staging passes for HOST tables (see the top of the file).

constexpr int kStageThreads = 256;
constexpr int kStageWarpsPerBlock = kStageThreads / kWarpSize;
// Bag slots per warp of the resolve pass (ids of consecutive bags of one
// feature are contiguous, so a warp walks them 32 at a time).
constexpr int kResolveSlotsPerWarp = 32;
// Rows each warp of the gather pass copies at once (one 16-byte load per
// lane and row in flight before the first store).
constexpr int kGatherRows = 4;
// One wave of 256-thread blocks on a 132-SM GPU at 8 blocks per SM: the
// grid of the ordering pass; larger batches loop.
constexpr int kOrderMaxBlocks = 1056;
// The gather's grid: 32 blocks x 8 warps x kGatherRows = 1024 rows (512 KiB
// of 512-byte rows) in flight, walking the rows in address order. What limits
// a gather from a large pinned buffer is how many address translations the
// GPU misses per second, not bytes in flight: the fewer blocks, the narrower
// the span of host addresses in flight and the more of it each translation
// serves, down to the point where too few rows are in flight and the gather
// becomes latency-bound. 32 blocks sit on the plateau of cache_bench's sweep
// of the grid, with a cache per table and with the shared cache (the sweep:
// docs/benchmarks.md, host-row gathers).
// RANKD_GATHER_BLOCKS=N overrides it (A/B timing).
constexpr int kGatherMaxBlocks = 16;
// Longest probe run in the staging set before a miss is read directly.
constexpr int kMaxStagingProbes = 64;

__device__ __forceinline__ uint64_t MixStagingKey(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

// Staging slot of (table, row): >= 0 when staged, -1 when the row must be
// read from host memory directly (staging full). *first: this thread
// inserted the row (exactly one thread per distinct row gets true).
__device__ __forceinline__ int32_t StageRow(const HostStaging& st, int table, int64_t row,
                                            const char* src, int32_t bytes, int64_t host_offset,
                                            bool* first) {
  const unsigned long long key = (static_cast<unsigned long long>(table) << 40) |
                                 static_cast<unsigned long long>(row);
  const uint64_t mask = static_cast<uint64_t>(st.set_capacity) - 1;
  uint64_t h = MixStagingKey(key) & mask;
  auto* keys = reinterpret_cast<unsigned long long*>(st.set_keys);
  // Once the staging buffer is full, misses go to host memory without
  // touching the set, so the set (>= 2x the capacity) stays at most about
  // half full and probes stay short; kMaxStagingProbes bounds them anyway.
  if (*reinterpret_cast<volatile unsigned int*>(st.count) >= st.capacity) return -1;
  if (st.limit != nullptr && *reinterpret_cast<volatile unsigned int*>(st.count) >= *st.limit) {
    return -1;
  }
  for (int probe = 0; probe < kMaxStagingProbes; ++probe, h = (h + 1) & mask) {
    const unsigned long long prev = atomicCAS(keys + h, ~0ull, key);
    if (prev == ~0ull) {
      *first = true;
      const unsigned int n = atomicAdd(st.count, 1u);
      int32_t slot = -2;  // overflow: every reader goes to host memory
      const unsigned long long limit =
          st.limit != nullptr ? min(static_cast<unsigned long long>(*st.limit),
                                    static_cast<unsigned long long>(st.capacity))
                              : static_cast<unsigned long long>(st.capacity);
      if (n < limit) {
        st.sources[n] = reinterpret_cast<int64_t>(src);
        st.source_bytes[n] = bytes;
        const int32_t bucket = static_cast<int32_t>(
            min(static_cast<uint64_t>(kStagingBuckets - 1),
                static_cast<uint64_t>(max(host_offset, int64_t{0})) >> st.bucket_shift));
        st.bucket_of[n] = bucket;
        st.rank_in_bucket[n] = static_cast<int32_t>(atomicAdd(st.bucket_counts + bucket, 1u));
        slot = static_cast<int32_t>(n);
      }
      atomicExch(st.set_slots + h, slot);  // releases the readers spinning below
      return slot >= 0 ? slot : -1;
    }
    if (prev == key) {
      // Inserted by another thread, which publishes the slot right after its
      // atomicAdd (independent thread scheduling lets it progress even when
      // it is in this warp).
      int32_t slot;
      do {
        slot = *reinterpret_cast<volatile int32_t*>(st.set_slots + h);
      } while (slot == -1);
      return slot >= 0 ? slot : -1;
    }
  }
  return -1;  // a long probe run: read it directly
}

// Row of `id` in `table` (bounds-checked, hash-probed for DYNAMIC tables),
// or kMissingRow.
__device__ __forceinline__ int64_t ResolveTableRow(const DeviceTable& table, int64_t id) {
  int64_t row = id;
  if (table.hash.num_buckets > 0) {
    row = Aligned16(table.hash.keys)
              ? ProbeRow<true>(table.hash.keys, table.hash.rows, table.hash.num_buckets, id)
              : ProbeRow<false>(table.hash.keys, table.hash.rows, table.hash.num_buckets, id);
  }
  return (row >= 0 && row < table.num_rows) ? row : kMissingRow;
}

__global__ void __launch_bounds__(kStageThreads)
    ResolveHostIdsKernel(const PooledLookupArgs args, const int64_t* __restrict__ bag_prefix) {
  const int lane = threadIdx.x & (kWarpSize - 1);
  const int num_features = args.num_features;
  const int64_t num_bags = min(args.total_bags, __ldg(bag_prefix + num_features));
  const int64_t warp =
      static_cast<int64_t>(blockIdx.x) * kStageWarpsPerBlock + threadIdx.x / kWarpSize;
  const int64_t chunk_first = warp * kResolveSlotsPerWarp;
  const int chunk_count = static_cast<int>(
      max(int64_t{0}, min(static_cast<int64_t>(kResolveSlotsPerWarp), num_bags - chunk_first)));
  const HostStaging& st = args.staging;
  for (int done = 0; done < chunk_count;) {
    const int64_t slot = chunk_first + done;
    const int lo = FeatureOfBagSlot(bag_prefix, num_features, slot);
    const int64_t feature_first = __ldg(bag_prefix + lo);
    const int count = static_cast<int>(
        min(static_cast<int64_t>(chunk_count - done), __ldg(bag_prefix + lo + 1) - slot));
    if (count <= 0) break;  // bag_prefix not non-decreasing: stop rather than spin
    done += count;
    const DeviceFeature& feature = args.features[lo];
    const int t = feature.table;
    const DeviceTable& table = args.tables[t];
    if (table.host == 0 || table.dim <= 0) continue;
    const int64_t first_bag = feature.bag_begin + (slot - feature_first);
    const int64_t id_begin = BagIdAt(args, first_bag);
    const int64_t id_end = BagIdAt(args, first_bag + count);
    const int32_t row_bytes =
        table.dim * (table.row_type == RowType::kFp32 ? 4 : 2);
    const char* host_rows = static_cast<const char*>(table.rows);
    const char* cache_rows = static_cast<const char*>(table.cache_rows);
    unsigned misses = 0, reads = 0;
    for (int64_t base = id_begin; base < id_end; base += kWarpSize) {
      const int64_t pos = base + lane;
      const bool active = pos < id_end;
      int64_t row = kMissingRow;
      int64_t loc = 0;
      if (active) {
        row = ResolveTableRow(table, IdAt(args, feature, pos));
        if (row != kMissingRow) {
          const int32_t cached = table.cache_slot != nullptr ? __ldg(table.cache_slot + row) : -1;
          if (cached >= 0) {
            loc = reinterpret_cast<int64_t>(cache_rows + static_cast<int64_t>(cached) * row_bytes);
          } else {
            ++misses;
            const char* src = host_rows + row * row_bytes;
            bool first = false;
            const int32_t staged =
                StageRow(st, t, row, src, row_bytes, table.host_offset + row * row_bytes, &first);
            if (staged >= 0) {
              reads += first ? 1 : 0;
              loc = reinterpret_cast<int64_t>(static_cast<const char*>(st.rows) +
                                              static_cast<int64_t>(staged) * st.stride);
            } else {
              ++reads;  // read from host memory by the pooling kernel
              loc = reinterpret_cast<int64_t>(src);
            }
          }
        }
        st.locations[pos] = loc;
      }
      // Warp-uniform (per table); the warp is converged here.
      if (table.scores != nullptr && table.hash.num_buckets > 0) {
        TouchScoresWarp(table.scores, row, table.score_policy,
                        args.score_now_ptr != nullptr ? *args.score_now_ptr : args.score_now,
                        SeenScore(table.scores, row, table.score_policy), lane);
      }
      // Sample resolved accesses into the access log (one atomic per warp).
      int64_t* access_log = table.access_log;
      if (access_log != nullptr) {
        const bool sample =
            row != kMissingRow && SampledPosition(pos, table.sample_shift);
        const unsigned sampled = __ballot_sync(kFullMask, sample);
        if (sampled != 0) {
          unsigned long long first = 0;
          const int leader = __ffs(sampled) - 1;
          if (lane == leader) first = atomicAdd(table.access_head, __popc(sampled));
          first = __shfl_sync(kFullMask, first, leader);
          if (sample) {
            const unsigned rank = __popc(sampled & ((1u << lane) - 1));
            access_log[(first + rank) & table.access_log_mask] = row;
          }
        }
      }
    }
    const unsigned total_misses = __reduce_add_sync(kFullMask, misses);
    const unsigned total_reads = __reduce_add_sync(kFullMask, reads);
    if (lane == 0) {
      if (total_misses > 0 && args.host_reads != nullptr) {
        atomicAdd(args.host_reads + t, static_cast<unsigned long long>(total_misses));
      }
      if (total_reads > 0 && args.host_rows_read != nullptr) {
        atomicAdd(args.host_rows_read + t, static_cast<unsigned long long>(total_reads));
      }
    }
  }
}

// Rows the resolve pass staged (the count runs past the limit on overflow).
__device__ __forceinline__ int64_t StagedRows(const HostStaging& st) {
  int64_t n = min(static_cast<int64_t>(*st.count), st.capacity);
  if (st.limit != nullptr) n = min(n, static_cast<int64_t>(*st.limit));
  return n;
}

// Bucket counts -> exclusive offsets, in place (one block).
constexpr int kScanThreads = 1024;
constexpr int kScanPerThread = kStagingBuckets / kScanThreads;
static_assert(kStagingBuckets % kScanThreads == 0, "buckets split evenly over the scan block");
__global__ void __launch_bounds__(kScanThreads) ScanStagingBucketsKernel(unsigned int* counts) {
  using BlockScan = cub::BlockScan<unsigned int, kScanThreads>;
  __shared__ typename BlockScan::TempStorage temp;
  unsigned int* mine = counts + threadIdx.x * kScanPerThread;
  unsigned int local[kScanPerThread];
  unsigned int sum = 0;
#pragma unroll
  for (int i = 0; i < kScanPerThread; ++i) {
    local[i] = mine[i];
    sum += local[i];
  }
  unsigned int offset = 0;
  BlockScan(temp).ExclusiveSum(sum, offset);
#pragma unroll
  for (int i = 0; i < kScanPerThread; ++i) {
    mine[i] = offset;
    offset += local[i];
  }
}

// order[offset of its bucket + its rank] = staged row.
__global__ void __launch_bounds__(kStageThreads) OrderStagedRowsKernel(const HostStaging st) {
  const int64_t n = StagedRows(st);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kStageThreads;
  for (int64_t s = static_cast<int64_t>(blockIdx.x) * kStageThreads + threadIdx.x; s < n;
       s += stride) {
    st.order[st.bucket_counts[st.bucket_of[s]] + st.rank_in_bucket[s]] = static_cast<int32_t>(s);
  }
}

// Copies the staged rows from host memory into the staging buffer, in fetch
// order. Rows are taken kGatherRows per warp at a time, all their loads
// issued before the first store.
// ordered false: slot order (for A/B timing, RANKD_STAGING_ORDER=0).
__global__ void __launch_bounds__(kStageThreads) GatherStagedRowsKernel(const HostStaging st,
                                                                        bool ordered) {
  const int lane = threadIdx.x & (kWarpSize - 1);
  const int64_t n = StagedRows(st);
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kStageWarpsPerBlock;
  const int64_t warp =
      static_cast<int64_t>(blockIdx.x) * kStageWarpsPerBlock + threadIdx.x / kWarpSize;
  char* const staging = static_cast<char*>(st.rows);
  for (int64_t first = warp * kGatherRows; first < n; first += warps * kGatherRows) {
    const char* src[kGatherRows];
    char* dst[kGatherRows];
    int32_t bytes[kGatherRows];
    bool vec = true;
    int32_t max_bytes = 0;
#pragma unroll
    for (int u = 0; u < kGatherRows; ++u) {
      const int64_t r = first + u >= n ? -1 : ordered ? __ldg(st.order + first + u) : first + u;
      src[u] = r >= 0 ? reinterpret_cast<const char*>(__ldg(st.sources + r)) : nullptr;
      bytes[u] = r >= 0 ? __ldg(st.source_bytes + r) : 0;
      dst[u] = staging + max(r, int64_t{0}) * st.stride;
      vec = vec && ((reinterpret_cast<uintptr_t>(src[u]) | static_cast<uintptr_t>(bytes[u])) & 15) == 0;
      max_bytes = max(max_bytes, bytes[u]);
    }
    if (vec) {
      for (int32_t offset = lane * 16; offset < max_bytes; offset += kWarpSize * 16) {
        uint32_t raw[kGatherRows][4];
#pragma unroll
        for (int u = 0; u < kGatherRows; ++u) {
          if (offset < bytes[u]) LoadRaw<16>(src[u] + offset, raw[u]);
        }
#pragma unroll
        for (int u = 0; u < kGatherRows; ++u) {
          if (offset < bytes[u]) {
            *reinterpret_cast<uint4*>(dst[u] + offset) =
                make_uint4(raw[u][0], raw[u][1], raw[u][2], raw[u][3]);
          }
        }
      }
    } else {
      // Rows of 2-byte elements at any 2-byte alignment (fp16 / bf16 with
      // an odd dim, fp32 with dim % 4 != 0).
#pragma unroll
      for (int u = 0; u < kGatherRows; ++u) {
        for (int32_t offset = lane * 2; offset < bytes[u]; offset += kWarpSize * 2) {
          uint32_t raw[1];
          LoadRaw<2>(src[u] + offset, raw);
          *reinterpret_cast<uint16_t*>(dst[u] + offset) = static_cast<uint16_t>(raw[0]);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Hash lookup.

template <bool kVector>
__global__ void __launch_bounds__(kHashThreads)
    HashLookupKernel(const HashTableView table, const int64_t* __restrict__ keys, int64_t n,
                     int64_t* __restrict__ rows_out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kHashThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kHashThreads + threadIdx.x; i < n;
       i += stride) {
    rows_out[i] = ProbeRow<kVector>(table.keys, table.rows, table.num_buckets, __ldg(keys + i));
  }
}

unsigned int GridFor(int64_t items, int per_block) {
  const int64_t blocks = (items + per_block - 1) / per_block;
  return static_cast<unsigned int>(blocks < INT_MAX ? blocks : INT_MAX);
}

}  // namespace

namespace {
constexpr int64_t kStagingAlign = 256;
int64_t AlignUp(int64_t n, int64_t a) { return (n + a - 1) / a * a; }
int64_t StagingStride(int64_t max_row_bytes) { return AlignUp(std::max<int64_t>(max_row_bytes, 16), 16); }
int64_t StagingSetCapacity(int64_t capacity) {
  int64_t c = 1024;
  while (c < 2 * capacity) c <<= 1;
  return c;
}
}  // namespace

int64_t HostStagingBytes(int64_t ids, int64_t capacity, int64_t max_row_bytes) {
  const int64_t set = StagingSetCapacity(capacity);
  return kStagingAlign + AlignUp(8 * set, kStagingAlign) + AlignUp(4 * set, kStagingAlign) +
         AlignUp(8 * capacity, kStagingAlign) + AlignUp(4 * capacity, kStagingAlign) +
         AlignUp(4 * int64_t{kStagingBuckets}, kStagingAlign) +
         3 * AlignUp(4 * capacity, kStagingAlign) +
         AlignUp(8 * std::max<int64_t>(ids, 1), kStagingAlign) +
         capacity * StagingStride(max_row_bytes);
}

HostStaging CarveHostStaging(void* block, int64_t ids, int64_t capacity, int64_t max_row_bytes,
                             int64_t host_span_bytes) {
  HostStaging st;
  char* p = static_cast<char*>(block);
  auto take = [&p](int64_t bytes) {
    char* at = p;
    p += AlignUp(bytes, kStagingAlign);
    return at;
  };
  st.set_capacity = StagingSetCapacity(capacity);
  st.capacity = capacity;
  st.stride = StagingStride(max_row_bytes);
  st.count = reinterpret_cast<unsigned int*>(take(sizeof(unsigned int)));
  st.set_keys = reinterpret_cast<int64_t*>(take(8 * st.set_capacity));
  st.set_slots = reinterpret_cast<int32_t*>(take(4 * st.set_capacity));
  st.sources = reinterpret_cast<int64_t*>(take(8 * capacity));
  st.source_bytes = reinterpret_cast<int32_t*>(take(4 * capacity));
  st.locations = reinterpret_cast<int64_t*>(take(8 * std::max<int64_t>(ids, 1)));
  st.bucket_counts = reinterpret_cast<unsigned int*>(take(4 * int64_t{kStagingBuckets}));
  st.bucket_of = reinterpret_cast<int32_t*>(take(4 * capacity));
  st.rank_in_bucket = reinterpret_cast<int32_t*>(take(4 * capacity));
  st.order = reinterpret_cast<int32_t*>(take(4 * capacity));
  while (st.bucket_shift < 62 && (host_span_bytes >> st.bucket_shift) >= kStagingBuckets) {
    ++st.bucket_shift;
  }
  st.rows = p;
  return st;
}

// ExpandUnitBagsKernel: block row y takes features y, y + gridDim.y, ... (a
// grid has at most 65,535 rows); its threads stride over each feature's
// entries (num_bags + 1 of them) and write each unit bag's id offset and row;
// a feature without unit_bags is skipped.
__global__ void ExpandUnitBagsKernel(const DeviceFeature* __restrict__ features,
                                     int32_t num_features, int64_t* __restrict__ bag_ids,
                                     int32_t* __restrict__ bag_ids32,
                                     int32_t* __restrict__ bag_rows) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t fi = blockIdx.y; fi < num_features; fi += gridDim.y) {
    const DeviceFeature& f = features[fi];
    if (f.unit_bags == 0) continue;
    const int64_t begin = f.bag_begin;
    const int64_t first_id = f.id_begin;
    const int64_t entries = f.num_bags + 1;
    for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < entries;
         j += stride) {
      if (bag_ids32 != nullptr) {
        bag_ids32[begin + j] = static_cast<int32_t>(first_id + j);
      } else {
        bag_ids[begin + j] = first_id + j;
      }
      bag_rows[begin + j] = static_cast<int32_t>(j);
    }
  }
}

cudaError_t LaunchExpandUnitBags(const DeviceFeature* features, int32_t num_features,
                                 int64_t max_bags, int64_t* bag_ids, int32_t* bag_ids32,
                                 int32_t* bag_rows, cudaStream_t stream) {
  if (num_features < 0 || max_bags < 0) return cudaErrorInvalidValue;
  if (num_features == 0) return cudaSuccess;
  if (features == nullptr || bag_rows == nullptr ||
      (bag_ids == nullptr) == (bag_ids32 == nullptr)) {
    return cudaErrorInvalidValue;
  }
  constexpr int kThreads = 256;
  constexpr int64_t kMaxBlocks = 1024;    // per feature; more entries are strided over
  constexpr int32_t kMaxGridRows = 65535;  // a grid's y dimension; more features are strided over
  const int64_t blocks = std::min<int64_t>(kMaxBlocks, (max_bags + 1 + kThreads - 1) / kThreads);
  const unsigned rows = static_cast<unsigned>(std::min(num_features, kMaxGridRows));
  ExpandUnitBagsKernel<<<dim3(static_cast<unsigned>(blocks), rows), kThreads, 0, stream>>>(
      features, num_features, bag_ids, bag_ids32, bag_rows);
  return cudaGetLastError();
}

cudaError_t LaunchPooledLookup(const PooledLookupArgs& args, const int64_t* bag_prefix,
                               cudaStream_t stream) {
  if (args.total_bags <= 0 || args.num_features <= 0) return cudaSuccess;
  if (bag_prefix == nullptr || args.tables == nullptr || args.features == nullptr ||
      (args.bag_ids == nullptr && args.bag_ids32 == nullptr) || args.bag_rows == nullptr ||
      args.out == nullptr ||
      args.out_stride <= 0) {
    return cudaErrorInvalidValue;
  }
  // RANKD_LOOKUP_PREFETCH=0 turns the L2 prefetch of rows off (for A/B timing).
  static const bool prefetch = [] {
    const char* v = std::getenv("RANKD_LOOKUP_PREFETCH");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  // Score touches are possible (a scored table reads its clock from one of
  // these): LFU counts are then summed per block first.
  const bool aggregate = args.score_now_ptr != nullptr || args.score_now != 0;
  if (args.max_bags_per_feature < 0) return cudaErrorInvalidValue;
  if (args.unit_bags_only && (args.unit_bag_chunks <= 0 || args.any_host)) {
    return cudaErrorInvalidValue;
  }
  if (args.unit_bag_chunks > 0) {
    // Unit features first; the general kernel skips them.
    const cudaError_t e = LaunchUnitBagLookup(args, stream);
    if (e != cudaSuccess || args.unit_bags_only) return e;
  }
  const int64_t warps =
      args.max_bags_per_feature > 0
          ? args.num_features * ((args.max_bags_per_feature + kSlotsPerWarp - 1) / kSlotsPerWarp)
          : (args.total_bags + kSlotsPerWarp - 1) / kSlotsPerWarp;
  const int64_t blocks = (warps + kPoolWarpsPerBlock - 1) / kPoolWarpsPerBlock;
  if (blocks > INT_MAX) return cudaErrorInvalidValue;  // 6.9e10 bags
  if (args.any_host) {
    const HostStaging& st = args.staging;
    if (st.locations == nullptr || st.set_keys == nullptr || st.set_slots == nullptr ||
        st.count == nullptr || st.sources == nullptr || st.source_bytes == nullptr ||
        (st.capacity > 0 && (st.bucket_counts == nullptr || st.bucket_of == nullptr ||
                             st.rank_in_bucket == nullptr || st.order == nullptr)) ||
        (st.capacity > 0 && st.rows == nullptr) || st.capacity < 0 || st.stride % 16 != 0 ||
        st.set_capacity < 2 * st.capacity || (st.set_capacity & (st.set_capacity - 1)) != 0 ||
        st.set_capacity <= 0) {
      return cudaErrorInvalidValue;
    }
    // Empty set and no staged rows (keys -1 and slots -1 are all-ones bytes;
    // the two arrays are adjacent when laid out by CarveHostStaging).
    cudaError_t e = cudaMemsetAsync(st.set_keys, 0xff, sizeof(int64_t) * st.set_capacity, stream);
    if (e == cudaSuccess) {
      e = cudaMemsetAsync(st.set_slots, 0xff, sizeof(int32_t) * st.set_capacity, stream);
    }
    if (e == cudaSuccess) e = cudaMemsetAsync(st.count, 0, sizeof(unsigned int), stream);
    if (e == cudaSuccess && st.capacity > 0) {
      e = cudaMemsetAsync(st.bucket_counts, 0, sizeof(unsigned int) * kStagingBuckets, stream);
    }
    if (e != cudaSuccess) return e;
    const int64_t resolve_warps = (args.total_bags + kResolveSlotsPerWarp - 1) / kResolveSlotsPerWarp;
    const int64_t resolve_blocks = (resolve_warps + kStageWarpsPerBlock - 1) / kStageWarpsPerBlock;
    if (resolve_blocks > INT_MAX) return cudaErrorInvalidValue;
    ResolveHostIdsKernel<<<static_cast<unsigned int>(resolve_blocks), kStageThreads, 0, stream>>>(
        args, bag_prefix);
    // RANKD_STAGING_ORDER=0 fetches staged rows in slot order (A/B timing).
    static const bool ordered = [] {
      const char* v = std::getenv("RANKD_STAGING_ORDER");
      return v == nullptr || std::strcmp(v, "0") != 0;
    }();
    if (st.capacity > 0) {
      if (ordered) {
        ScanStagingBucketsKernel<<<1, kScanThreads, 0, stream>>>(st.bucket_counts);
        const int64_t order_blocks =
            std::min<int64_t>(kOrderMaxBlocks, (st.capacity + kStageThreads - 1) / kStageThreads);
        OrderStagedRowsKernel<<<static_cast<unsigned int>(order_blocks), kStageThreads, 0, stream>>>(
            st);
      }
      // RANKD_GATHER_BLOCKS=N replaces kGatherMaxBlocks (A/B timing).
      static const int64_t max_gather_blocks = [] {
        const char* v = std::getenv("RANKD_GATHER_BLOCKS");
        const long n = v == nullptr ? 0 : std::strtol(v, nullptr, 10);
        return n > 0 ? static_cast<int64_t>(n) : static_cast<int64_t>(kGatherMaxBlocks);
      }();
      const int64_t gather_blocks =
          std::min(max_gather_blocks,
              (st.capacity + kGatherRows * kStageWarpsPerBlock - 1) / (kGatherRows * kStageWarpsPerBlock));
      GatherStagedRowsKernel<<<static_cast<unsigned int>(gather_blocks), kStageThreads, 0, stream>>>(
          st, ordered);
    }
    PooledLookupKernel<true, false><<<static_cast<unsigned int>(blocks), kPoolThreads, 0, stream>>>(
        args, bag_prefix, prefetch, aggregate);
  } else if (args.fp32_tables_only) {
    PooledLookupKernel<false, true><<<static_cast<unsigned int>(blocks), kPoolThreads, 0, stream>>>(
        args, bag_prefix, prefetch, aggregate);
  } else {
    PooledLookupKernel<false, false><<<static_cast<unsigned int>(blocks), kPoolThreads, 0, stream>>>(
        args, bag_prefix, prefetch, aggregate);
  }
  return cudaGetLastError();
}

bool TablesFitFp32Kernel(const DeviceTable* tables, int num_tables) {
  for (int t = 0; t < num_tables; ++t) {
    const DeviceTable& d = tables[t];
    if (d.row_type != RowType::kFp32 || d.dim % 4 != 0 ||
        (reinterpret_cast<uintptr_t>(d.rows) & 15u) != 0 ||
        d.pooling == Pooling::kMax || d.host != 0) {
      return false;
    }
  }
  return true;
}

cudaError_t LaunchHashLookup(const HashTableView& table, const int64_t* keys, int64_t n,
                             int64_t* rows_out, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (keys == nullptr || rows_out == nullptr) return cudaErrorInvalidValue;
  if (table.num_buckets > 0 && (table.keys == nullptr || table.rows == nullptr)) {
    return cudaErrorInvalidValue;
  }
  const unsigned int grid = GridFor(n, kHashThreads);
  if ((reinterpret_cast<uintptr_t>(table.keys) & 15) == 0) {
    HashLookupKernel<true><<<grid, kHashThreads, 0, stream>>>(table, keys, n, rows_out);
  } else {
    HashLookupKernel<false><<<grid, kHashThreads, 0, stream>>>(table, keys, n, rows_out);
  }
  return cudaGetLastError();
}

}  // namespace rankd::kernels::cuda
