// Dynamic-table update kernels (see dynamic_table.h; CPU twins in
// kernels/cpu/dynamic_table.cc).
#include <cub/block/block_scan.cuh>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "kernels/cpu/dynamic_table.h"
#include "kernels/cpu/hash_table.h"
#include "kernels/cuda/dynamic_table.h"
#include "kernels/cuda/warp_row_copy.cuh"

namespace rankd::kernels::cuda {
namespace {

using ull = unsigned long long;

constexpr int kThreads = 256;
constexpr int kWarp = 32;
constexpr unsigned kFull = 0xffffffffu;
constexpr int kDigits = 16;  // 128-bit (score, key) value, 8 bits a digit
constexpr int64_t kAlign = 256;
constexpr ull kSignBit = 1ull << 63;

int64_t AlignUp(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Per-call state of an upsert, at the start of the scratch buffer (zeroed by
// the first memset of the call).
struct UpsertState {
  ull existing;   // keys of the call already stored
  ull new_count;  // keys of the call not stored
  ull popped;     // free rows taken by inserts
  ull evict_out;  // rows evicted so far (index into evicted_keys / free stack)
  ull reclaimed;  // tombstone slots reused by inserts
  ull failed;     // inserts that found no slot
  long long need;       // keys to evict
  long long remaining;  // radix select: keys still to take from the current bucket
  long long free_base;  // free_count before the pops / evictions
  ull prefix_hi, prefix_lo;  // radix select: digits fixed so far
  int level;                 // digits fixed
  int done;                  // threshold exact (or nothing to evict)
  int rehash;                // this call rebuilds the slots
  int pad;
  unsigned int hist[256];
};

struct UpsertScratch {
  UpsertState* state;
  uint8_t* touched;   // [max_keys]
  int64_t* dst_rows;  // [n]
};

UpsertScratch CarveScratch(void* scratch, int64_t max_keys, int64_t n) {
  char* p = static_cast<char*>(scratch);
  UpsertScratch s;
  s.state = reinterpret_cast<UpsertState*>(p);
  p += AlignUp(sizeof(UpsertState));
  s.touched = reinterpret_cast<uint8_t*>(p);
  p += AlignUp(max_keys);
  s.dst_rows = reinterpret_cast<int64_t*>(p);
  return s;
}

unsigned int Grid(int64_t items, int64_t cap = int64_t{1} << 20) {
  const int64_t blocks = std::max<int64_t>(1, (items + kThreads - 1) / kThreads);
  return static_cast<unsigned int>(std::min(blocks, cap));
}

__host__ __device__ __forceinline__ ull* U(int64_t* p) { return reinterpret_cast<ull*>(p); }

// Adds the number of active lanes with `pred` to *counter (one atomic per warp).
__device__ __forceinline__ void CountLanes(bool pred, ull* counter) {
  const unsigned mask = __activemask();
  const unsigned bits = __ballot_sync(mask, pred);
  if (bits != 0 && (threadIdx.x & (kWarp - 1)) == __ffs(mask) - 1) {
    atomicAdd(counter, static_cast<ull>(__popc(bits)));
  }
}

// Warp-aggregated atomicAdd of 1 per lane with `pred`: each such lane gets a
// distinct index from *counter.
__device__ __forceinline__ ull AggregatedIndex(bool pred, ull* counter) {
  const unsigned mask = __activemask();
  const unsigned bits = __ballot_sync(mask, pred);
  const int lane = threadIdx.x & (kWarp - 1);
  const int leader = __ffs(mask) - 1;
  ull base = 0;
  if (lane == leader && bits != 0) base = atomicAdd(counter, static_cast<ull>(__popc(bits)));
  base = __shfl_sync(mask, base, leader);
  return base + __popc(bits & ((1u << lane) - 1));
}

__device__ __forceinline__ int64_t LoadKey(const int64_t* p) {
  return *reinterpret_cast<const volatile int64_t*>(p);
}

// Slot of a stored key (tombstones passed), or -1.
__device__ int64_t FindSlot(const int64_t* slot_keys, int64_t num_buckets, int64_t key) {
  const uint64_t mask = static_cast<uint64_t>(num_buckets) - 1;
  uint64_t bucket = HashKey(key) & mask;
  for (int64_t probe = 0; probe < num_buckets; ++probe) {
    const int64_t base = static_cast<int64_t>(bucket) * kBucketSlots;
    for (int s = 0; s < kBucketSlots; ++s) {
      const int64_t k = LoadKey(slot_keys + base + s);
      if (k == key) return base + s;
      if (k == kEmptyKey) return -1;
    }
    bucket = (bucket + 1) & mask;
  }
  return -1;
}

// Claims the first empty (or, with tombstones, deleted) slot on key's probe
// path with a CAS; stores the row. Returns the slot's previous key (kEmptyKey
// or kDeletedKey), or `key` when the key was found stored already (nothing
// written), or 0 when no slot is free (0 is a valid key, but then the caller
// checks `*claimed`).
__device__ int64_t ClaimSlot(int64_t* slot_keys, int64_t* slot_rows, int64_t num_buckets,
                             int64_t key, int64_t row, bool tombstones, bool* claimed) {
  *claimed = false;
  const uint64_t mask = static_cast<uint64_t>(num_buckets) - 1;
  uint64_t bucket = HashKey(key) & mask;
  for (int64_t probe = 0; probe < num_buckets; ++probe) {
    const int64_t base = static_cast<int64_t>(bucket) * kBucketSlots;
    for (int s = 0; s < kBucketSlots; ++s) {
      int64_t cur = LoadKey(slot_keys + base + s);
      while (cur == kEmptyKey || (tombstones && cur == kDeletedKey)) {
        const int64_t prev = static_cast<int64_t>(
            atomicCAS(U(slot_keys + base + s), static_cast<ull>(cur), static_cast<ull>(key)));
        if (prev == cur) {
          slot_rows[base + s] = row;
          *claimed = true;
          return cur;
        }
        cur = prev;  // taken meanwhile: by this very key (a duplicate) or another
      }
      if (cur == key) return key;
    }
    bucket = (bucket + 1) & mask;
  }
  return 0;
}

// ---------------------------------------------------------------------------
// Radix select helpers over the 128-bit value (hi = score, lo = key ^ 2^63).

__device__ __forceinline__ void Truncate(ull hi, ull lo, int level, ull* th, ull* tl) {
  if (level >= kDigits) {
    *th = hi;
    *tl = lo;
  } else if (level >= 8) {
    const int keep = 8 * (level - 8);
    *th = hi;
    *tl = keep == 0 ? 0 : (lo & (~0ull << (64 - keep)));
  } else {
    const int keep = 8 * level;
    *th = keep == 0 ? 0 : (hi & (~0ull << (64 - keep)));
    *tl = 0;
  }
}

__device__ __forceinline__ int Digit(ull hi, ull lo, int level) {
  return level < 8 ? static_cast<int>((hi >> (56 - 8 * level)) & 255)
                   : static_cast<int>((lo >> (56 - 8 * (level - 8))) & 255);
}

// Row r is an eviction candidate: stored and not touched by this call.
__device__ __forceinline__ bool Candidate(const DynamicTableView& v, const uint8_t* touched,
                                          int64_t r, ull* hi, ull* lo, int64_t* key) {
  *key = v.row_keys[r];
  if (*key == kEmptyKey || touched[r]) return false;
  *hi = v.scores[r];
  *lo = static_cast<ull>(*key) ^ kSignBit;
  return true;
}

// ---------------------------------------------------------------------------
// Kernels.

__global__ void FindKernel(const DynamicTableView v, const int64_t* __restrict__ keys, int64_t n,
                           UpsertScratch sc) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  bool found = false, is_new = false;
  if (i < n) {
    const int64_t slot = FindSlot(v.slot_keys, v.num_buckets, keys[i]);
    int64_t row = kMissingRow;
    if (slot >= 0) {
      row = v.slot_rows[slot];
      sc.touched[row] = 1;
      found = true;
    } else {
      is_new = true;
    }
    sc.dst_rows[i] = row;
  }
  CountLanes(found, &sc.state->existing);
  CountLanes(is_new, &sc.state->new_count);
}

__global__ void PlanKernel(const DynamicTableView v, UpsertState* st, DynamicStats* stats) {
  const long long free_count = v.counters->free_count;
  const long long fresh = static_cast<long long>(st->new_count);
  const long long need = fresh > free_count ? fresh - free_count : 0;
  st->need = need;
  st->remaining = need;
  st->done = need == 0;
  st->level = 0;
  st->free_base = free_count;
  atomicAdd(U(&stats->inserted), static_cast<ull>(fresh));
  atomicAdd(U(&stats->updated), st->existing);
  atomicAdd(U(&stats->evicted), static_cast<ull>(need));
}

__global__ void __launch_bounds__(kThreads)
    HistKernel(const DynamicTableView v, UpsertScratch sc, int level) {
  UpsertState* st = sc.state;
  if (*reinterpret_cast<volatile int*>(&st->done)) return;
  __shared__ unsigned int hist[256];
  hist[threadIdx.x] = 0;
  __syncthreads();
  const ull phi = st->prefix_hi, plo = st->prefix_lo;
  const int lane = threadIdx.x & (kWarp - 1);
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (kThreads / kWarp);
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * (kThreads / kWarp) + threadIdx.x / kWarp;
  for (int64_t base = warp * kWarp; base < v.max_keys; base += warps * kWarp) {
    const int64_t r = base + lane;
    int digit = -1;
    if (r < v.max_keys) {
      ull hi, lo;
      int64_t key;
      if (Candidate(v, sc.touched, r, &hi, &lo, &key)) {
        ull th, tl;
        Truncate(hi, lo, level, &th, &tl);
        if (th == phi && tl == plo) digit = Digit(hi, lo, level);
      }
    }
    const unsigned peers = __match_any_sync(kFull, digit);
    if (digit >= 0 && lane == __ffs(peers) - 1) atomicAdd(&hist[digit], __popc(peers));
  }
  __syncthreads();
  const unsigned int c = hist[threadIdx.x];
  if (c != 0) atomicAdd(&st->hist[threadIdx.x], c);
}

// One block of 256 threads: picks the bucket holding the remaining-th
// smallest value, fixes its digit, clears the histogram.
__global__ void __launch_bounds__(kThreads) ChooseKernel(UpsertState* st, int level) {
  if (*reinterpret_cast<volatile int*>(&st->done)) return;
  using Scan = cub::BlockScan<long long, kThreads>;
  __shared__ typename Scan::TempStorage temp;
  const int t = threadIdx.x;
  const long long c = st->hist[t];
  long long incl = 0;
  Scan(temp).InclusiveSum(c, incl);
  const long long excl = incl - c;
  const long long rem = st->remaining;
  if (excl < rem && rem <= incl) {
    const ull d = static_cast<ull>(t);
    if (level < 8) {
      st->prefix_hi |= d << (56 - 8 * level);
    } else {
      st->prefix_lo |= d << (56 - 8 * (level - 8));
    }
    st->level = level + 1;
    st->remaining = rem - excl;
    if (c == rem - excl) st->done = 1;  // the whole bucket is taken
  } else if (t == kThreads - 1 && incl < rem) {
    // Fewer candidates than needed (a broken precondition): take them all.
    st->level = level;
    st->done = 1;
    st->prefix_hi = ~0ull;
    st->prefix_lo = ~0ull;
  }
  __syncthreads();
  st->hist[t] = 0;
}

__global__ void __launch_bounds__(kThreads)
    EvictKernel(const DynamicTableView v, UpsertScratch sc, int64_t* evicted_keys) {
  UpsertState* st = sc.state;
  if (st->need <= 0) return;
  const int level = st->level;
  const ull phi = st->prefix_hi, plo = st->prefix_lo;
  const long long free_base = st->free_base;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kThreads; base < v.max_keys;
       base += stride) {
    const int64_t r = base + threadIdx.x;
    bool take = false;
    int64_t key = 0;
    if (r < v.max_keys) {
      ull hi, lo;
      if (Candidate(v, sc.touched, r, &hi, &lo, &key)) {
        ull th, tl;
        Truncate(hi, lo, level, &th, &tl);
        take = th < phi || (th == phi && tl <= plo);
      }
    }
    const ull j = AggregatedIndex(take, &st->evict_out);
    if (take) {
      const int64_t slot = FindSlot(v.slot_keys, v.num_buckets, key);
      if (slot >= 0) {
        v.slot_keys[slot] = kDeletedKey;
        v.slot_rows[slot] = kMissingRow;
      }
      v.row_keys[r] = kEmptyKey;
      v.free_rows[free_base + static_cast<long long>(j)] = r;
      if (evicted_keys != nullptr) evicted_keys[j] = key;
    }
  }
}

// Counters after the evictions; decides the rehash.
__global__ void DecideKernel(const DynamicTableView v, UpsertState* st, DynamicStats* stats) {
  DynamicTableCounters* c = v.counters;
  const long long evicted = static_cast<long long>(st->evict_out);
  c->free_count += evicted;
  c->size -= evicted;
  c->tombstones += evicted;
  st->free_base = c->free_count;
  const long long fresh = static_cast<long long>(st->new_count);
  if (fresh > 0 && c->tombstones > 0 &&
      c->size + c->tombstones + fresh > DynamicMaxOccupied(v.num_slots())) {
    st->rehash = 1;
    c->tombstones = 0;
    atomicAdd(U(&stats->rehashes), 1ull);
  }
}

// flag: nullptr = always, else run when *flag != 0.
__global__ void ClearSlotsKernel(const DynamicTableView v, const int* flag) {
  if (flag != nullptr && *flag == 0) return;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t s = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; s < v.num_slots();
       s += stride) {
    v.slot_keys[s] = kEmptyKey;
    v.slot_rows[s] = kMissingRow;
  }
}

// Inserts every stored row's key into cleared slots. Bad keys (sentinels,
// duplicates, no slot) are added to *failed.
__global__ void InsertRowsKernel(const DynamicTableView v, const int* flag, ull* failed) {
  if (flag != nullptr && *flag == 0) return;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; r < v.max_keys;
       r += stride) {
    const int64_t key = v.row_keys[r];
    if (key == kEmptyKey) continue;
    bool claimed = false;
    if (key != kDeletedKey) {
      ClaimSlot(v.slot_keys, v.slot_rows, v.num_buckets, key, r, /*tombstones=*/false, &claimed);
    }
    if (!claimed && failed != nullptr) atomicAdd(failed, 1ull);
  }
}

__global__ void __launch_bounds__(kThreads)
    InsertKernel(const DynamicTableView v, const int64_t* __restrict__ keys, int64_t n,
                 EvictionPolicy policy, ull now, UpsertScratch sc, DynamicStats* stats) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  UpsertState* st = sc.state;
  const int64_t row0 = i < n ? sc.dst_rows[i] : 0;
  const bool is_new = i < n && row0 < 0;
  const ull j = AggregatedIndex(is_new, &st->popped);
  if (i >= n) return;
  if (!is_new) {
    if (policy == EvictionPolicy::kLru) {
      v.scores[row0] = now;
    } else if (policy == EvictionPolicy::kLfu) {
      v.scores[row0] += 1;
    }
    return;
  }
  const long long top = st->free_base - 1 - static_cast<long long>(j);
  bool claimed = false;
  int64_t row = kMissingRow;
  if (top >= 0) {
    row = v.free_rows[top];
    const int64_t key = keys[i];
    const int64_t prev =
        ClaimSlot(v.slot_keys, v.slot_rows, v.num_buckets, key, row, /*tombstones=*/true, &claimed);
    if (claimed) {
      if (prev == kDeletedKey) atomicAdd(&st->reclaimed, 1ull);
      v.row_keys[row] = key;
      v.scores[row] = policy == EvictionPolicy::kLru ? now : policy == EvictionPolicy::kLfu ? 1 : 0;
    }
  }
  if (!claimed) {
    row = kMissingRow;
    atomicAdd(&st->failed, 1ull);
    atomicAdd(U(&stats->failed), 1ull);
    atomicAdd(U(&stats->inserted), ~0ull);  // -1
  }
  sc.dst_rows[i] = row;
}

__global__ void FinalizeKernel(const DynamicTableView v, UpsertState* st) {
  DynamicTableCounters* c = v.counters;
  const long long popped = static_cast<long long>(st->popped);
  const long long stored = popped - static_cast<long long>(st->failed);
  // Failed inserts (no slot; never with a valid table) leave their popped
  // row off the stack: counted in stats->failed.
  c->free_count = st->free_base - popped;
  c->size += stored;
  c->tombstones -= static_cast<long long>(st->reclaimed);
}

// One warp per key: rows[dst_rows[i]] = src row i (dst_rows[i] < 0: skipped).
__global__ void __launch_bounds__(kThreads)
    CopyRowsKernel(const int64_t* __restrict__ dst_rows, int64_t n, const char* __restrict__ src,
                   char* __restrict__ rows, int64_t row_bytes) {
  const int lane = threadIdx.x & (kWarp - 1);
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (kThreads / kWarp);
  const bool vec = RowsAligned16(src, rows, row_bytes);
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * (kThreads / kWarp) + threadIdx.x / kWarp;
       i < n; i += warps) {
    const int64_t row = dst_rows[i];
    if (row < 0) continue;
    WarpCopyRow(src + i * row_bytes, rows + row * row_bytes, row_bytes, vec, lane);
  }
}

__global__ void __launch_bounds__(kThreads)
    EraseKernel(const DynamicTableView v, const int64_t* __restrict__ keys, int64_t n,
                DynamicStats* stats) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  bool deleted = false;
  if (i < n) {
    const int64_t key = keys[i];
    if (key != kEmptyKey && key != kDeletedKey) {
      const uint64_t mask = static_cast<uint64_t>(v.num_buckets) - 1;
      uint64_t bucket = HashKey(key) & mask;
      bool end = false;
      for (int64_t probe = 0; probe < v.num_buckets && !end; ++probe) {
        const int64_t base = static_cast<int64_t>(bucket) * kBucketSlots;
        for (int s = 0; s < kBucketSlots; ++s) {
          const int64_t k = LoadKey(v.slot_keys + base + s);
          if (k == kEmptyKey) {
            end = true;
            break;
          }
          if (k != key) continue;
          const int64_t row = v.slot_rows[base + s];
          // A repeat of the key in this call may race for the slot: one wins.
          if (atomicCAS(U(v.slot_keys + base + s), static_cast<ull>(key),
                        static_cast<ull>(kDeletedKey)) == static_cast<ull>(key)) {
            v.slot_rows[base + s] = kMissingRow;
            v.row_keys[row] = kEmptyKey;
            const ull pos = atomicAdd(U(&v.counters->free_count), 1ull);
            v.free_rows[pos] = row;
            atomicAdd(U(&v.counters->size), ~0ull);
            atomicAdd(U(&v.counters->tombstones), 1ull);
            deleted = true;
          }
          end = true;
          break;
        }
        bucket = (bucket + 1) & mask;
      }
    }
  }
  if (i < n) {
    CountLanes(deleted, U(&stats->deleted));
    CountLanes(!deleted, U(&stats->not_found));
  }
}

__global__ void InitRowsKernel(const DynamicTableView v, const int64_t* __restrict__ keys,
                               int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  const int64_t free_count = v.max_keys - n;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; r < v.max_keys;
       r += stride) {
    // Sentinel keys are kept: InsertRowsKernel reports them as failed.
    v.row_keys[r] = r < n ? keys[r] : kEmptyKey;
    v.scores[r] = 0;
    if (r < free_count) v.free_rows[r] = v.max_keys - 1 - r;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    v.counters->size = n;
    v.counters->free_count = free_count;
    v.counters->tombstones = 0;
  }
}

__global__ void ZeroTombstonesKernel(const DynamicTableView v) { v.counters->tombstones = 0; }

bool ValidView(const DynamicTableView& v) {
  return v.num_buckets > 0 && (v.num_buckets & (v.num_buckets - 1)) == 0 && v.max_keys > 0 &&
         v.max_keys <= v.num_slots() && v.row_bytes > 0 && v.slot_keys != nullptr &&
         v.slot_rows != nullptr && v.row_keys != nullptr && v.scores != nullptr &&
         v.free_rows != nullptr && v.counters != nullptr && v.rows != nullptr;
}

cudaError_t Rebuild(const DynamicTableView& v, const int* flag, ull* failed,
                    cudaStream_t stream) {
  ClearSlotsKernel<<<Grid(v.num_slots(), 4096), kThreads, 0, stream>>>(v, flag);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  InsertRowsKernel<<<Grid(v.max_keys, 4096), kThreads, 0, stream>>>(v, flag, failed);
  return cudaGetLastError();
}

}  // namespace

int64_t DynamicUpsertScratchBytes(int64_t max_keys, int64_t n) {
  return AlignUp(sizeof(UpsertState)) + AlignUp(std::max<int64_t>(max_keys, 1)) +
         AlignUp(8 * std::max<int64_t>(n, 1));
}

cudaError_t LaunchDynamicInit(const DynamicTableView& view, const int64_t* keys, int64_t n,
                              DynamicStats* stats, cudaStream_t stream) {
  if (!ValidView(view) || n < 0 || n > view.max_keys || (n > 0 && keys == nullptr) ||
      stats == nullptr) {
    return cudaErrorInvalidValue;
  }
  InitRowsKernel<<<Grid(view.max_keys, 4096), kThreads, 0, stream>>>(view, keys, n);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  return Rebuild(view, nullptr, U(&stats->failed), stream);
}

cudaError_t LaunchDynamicErase(const DynamicTableView& view, const int64_t* keys, int64_t n,
                               DynamicStats* stats, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (!ValidView(view) || keys == nullptr || stats == nullptr) return cudaErrorInvalidValue;
  EraseKernel<<<Grid(n, INT_MAX), kThreads, 0, stream>>>(view, keys, n, stats);
  return cudaGetLastError();
}

cudaError_t LaunchDynamicRehash(const DynamicTableView& view, DynamicStats* stats,
                                cudaStream_t stream) {
  if (!ValidView(view)) return cudaErrorInvalidValue;
  const cudaError_t rebuilt =
      Rebuild(view, nullptr, stats != nullptr ? U(&stats->failed) : nullptr, stream);
  if (rebuilt != cudaSuccess) return rebuilt;
  ZeroTombstonesKernel<<<1, 1, 0, stream>>>(view);
  return cudaGetLastError();
}

cudaError_t LaunchDynamicUpsert(const DynamicTableView& view, const int64_t* keys, int64_t n,
                                const void* src, EvictionPolicy policy, uint64_t now,
                                void* scratch, int64_t scratch_bytes, DynamicStats* stats,
                                int64_t* evicted_keys, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (!ValidView(view) || keys == nullptr || src == nullptr || scratch == nullptr ||
      stats == nullptr || n > view.max_keys ||
      scratch_bytes < DynamicUpsertScratchBytes(view.max_keys, n) ||
      (reinterpret_cast<uintptr_t>(scratch) & (kAlign - 1)) != 0) {
    return cudaErrorInvalidValue;
  }
  const UpsertScratch sc = CarveScratch(scratch, view.max_keys, n);
  // State and touched flags are adjacent: one memset.
  const cudaError_t cleared =
      cudaMemsetAsync(scratch, 0, AlignUp(sizeof(UpsertState)) + view.max_keys, stream);
  if (cleared != cudaSuccess) return cleared;
  const unsigned int key_grid = Grid(n, INT_MAX);
  FindKernel<<<key_grid, kThreads, 0, stream>>>(view, keys, n, sc);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  PlanKernel<<<1, 1, 0, stream>>>(view, sc.state, stats);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  // Enough blocks to fill a 132-SM GPU at 8 blocks per SM and stream the rows.
  const unsigned int row_grid = Grid(view.max_keys, 1056);
  for (int level = 0; level < kDigits; ++level) {
    HistKernel<<<row_grid, kThreads, 0, stream>>>(view, sc, level);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    ChooseKernel<<<1, kThreads, 0, stream>>>(sc.state, level);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  EvictKernel<<<row_grid, kThreads, 0, stream>>>(view, sc, evicted_keys);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  DecideKernel<<<1, 1, 0, stream>>>(view, sc.state, stats);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  const cudaError_t rebuilt = Rebuild(view, &sc.state->rehash, U(&stats->failed), stream);
  if (rebuilt != cudaSuccess) return rebuilt;
  InsertKernel<<<key_grid, kThreads, 0, stream>>>(view, keys, n, policy, now, sc, stats);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  FinalizeKernel<<<1, 1, 0, stream>>>(view, sc.state);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  const int64_t copy_blocks = (n + kThreads / kWarp - 1) / (kThreads / kWarp);
  CopyRowsKernel<<<static_cast<unsigned int>(std::min<int64_t>(copy_blocks, 1 << 16)), kThreads, 0,
                   stream>>>(sc.dst_rows, n, static_cast<const char*>(src),
                             static_cast<char*>(view.rows), view.row_bytes);
  return cudaGetLastError();
}

}  // namespace rankd::kernels::cuda
