// Table-batched pooled embedding lookup on the GPU: every bag of every
// feature of a batch in one launch, written straight into the interaction
// input rows. CPU twin: kernels/cpu/embedding_pool.h (PoolEmbeddings, one
// table at a time); semantics are identical (fp32 accumulation, SUM / MEAN /
// MAX, per-id weights, unresolved ids -> default vector, empty bag -> zeros).
//
// Bags. Feature f owns bags [bag_begin, bag_begin + num_bags) of the global
// bag arrays, which hold num_bags + 1 entries per feature (a sentinel):
//   ids of bag b:   ids[bag_ids[b] .. bag_ids[b + 1])        (absolute indices)
//   rows of bag b:  output rows [bag_rows[b], bag_rows[b + 1])
// A per-candidate bag covers one row; a request-level (shared) bag covers all
// of its request's candidates, which are consecutive rows: it is pooled once
// and its vector written to each of them. The last sentinel of a feature's
// bag_rows is the number of rows it covers (the batch size).
#ifndef RANKD_KERNELS_CUDA_EMBEDDING_LOOKUP_H_
#define RANKD_KERNELS_CUDA_EMBEDDING_LOOKUP_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cpu/hash_table.h"
#include "kernels/cpu/types.h"

namespace rankd::kernels::cuda {

// One table in device memory, or in mapped pinned host memory (placement
// HOST) optionally behind an HBM cache of hot rows.
//
// HOST tables ("indirect"): `rows` is the device alias of the pinned host
// rows. With a cache, cache_slot[row] is the row's slot in cache_rows (same
// row layout) or -1, and the kernel reads the cached copy when there is one;
// the arithmetic is the same either way, so results never depend on the
// cache. Cache contents only change between a reader's batches (see
// engine/cuda/embedding_cache.h), so a slot read by a running kernel is never
// rewritten under it.
struct DeviceTable {
  const void* rows = nullptr;  // [num_rows, dim] of row_type (device or mapped host)
  RowType row_type = RowType::kFp32;
  Pooling pooling = Pooling::kSum;
  int dim = 0;                 // multiple of 4 for 16-byte loads, or any (slower path)
  int64_t num_rows = 0;
  HashTableView hash;          // DYNAMIC: device arrays; num_buckets == 0: STATIC
  const float* default_vector = nullptr;  // device, dim floats, or nullptr = zeros
  // HOST placement: rows not in the cache are read from host memory; such
  // reads are counted in PooledLookupArgs::host_reads.
  int32_t host = 0;
  int32_t score_policy = 0;  // see `scores` below: static_cast<int32_t>(EvictionPolicy)
  const int32_t* cache_slot = nullptr;  // device [num_rows]: slot or -1; nullptr = no cache
  const void* cache_rows = nullptr;     // device [capacity, dim] of row_type
  // Access sampling (HOST tables): about one resolved id in 2^sample_shift
  // (chosen by a hash of its position in the batch) has its row appended to
  // access_log[(*access_head)++ & access_log_mask]. The log feeds the cache's
  // hot-set refresh; entries may be overwritten before they are read.
  int64_t* access_log = nullptr;                 // device; nullptr = no sampling
  unsigned long long* access_head = nullptr;     // device counter
  uint32_t access_log_mask = 0;                  // entries - 1 (power of two)
  int32_t sample_shift = 4;
  // HOST placement: where this table's rows start in the concatenation of
  // all HOST tables' rows (HostStaging::host_span_bytes long). Staged rows
  // are fetched in this order (see HostStaging).
  int64_t host_offset = 0;
  // DYNAMIC tables with eviction scores (kernels/cpu/dynamic_table.h): each
  // resolved id touches scores[row] (device [num_rows]) as the CPU twin does
  // (PoolTable::scores): LRU (score_policy 1) atomicMax(score, now), LFU (2)
  // atomicAdd 1; now = PooledLookupArgs::score_now. nullptr or policy 0 =
  // off (ignored for STATIC tables). Touches are relaxed atomics: several
  // launches may touch one table at once.
  // (score_policy sits after `host`, in what was padding, so the struct
  // grows by one pointer only: tiny_dlrm passes 26 of them as kernel
  // parameters, limited to 4 KB.)
  unsigned long long* scores = nullptr;
};

// One feature of the batch.
struct DeviceFeature {
  int32_t table = 0;       // index into the tables array
  int32_t out_col = 0;     // first column of its vector in each output row
  int64_t bag_begin = 0;   // first entry of this feature in bag_ids / bag_rows
  int64_t num_bags = 0;
  int32_t weighted = 0;    // 1: weights[] holds one weight per id of this feature
  // 1: this feature's ids are read from PooledLookupArgs::ids (int64) even
  // when ids32 is set (DYNAMIC tables' 64-bit keys).
  int32_t wide_ids = 0;
  // 1: every bag holds exactly one id and covers one row, in order: entry
  // bag_begin + j (0 <= j <= num_bags, the sentinel included) is id
  // id_begin + j and row j. Whoever packs the batch may leave those entries
  // unwritten; LaunchExpandUnitBags writes them on the device before a lookup
  // reads them (a batch of one-id bags then copies its ids only).
  int32_t unit_bags = 0;
  int64_t id_begin = 0;  // with unit_bags: the absolute index of its first id
};

// Per-launch scratch of the HOST-table path (device memory owned by the
// caller, one per stream: a launch uses it from start to end). The launch
// resolves every id of a HOST feature first: cached rows are read from the
// HBM cache, and each distinct missed row is copied once from host memory
// into `rows` (deduplicated through a hash set of (table, row)), so the
// pooling kernel reads HBM only. Misses beyond `capacity` distinct rows are
// read from host memory directly (correct, slower). Lay it out with
// HostStagingBytes / CarveHostStaging.
//
// Fetch order: the staged rows are copied in (approximate) address order,
// bucketed by DeviceTable::host_offset + row * row_bytes into kStagingBuckets
// buckets over host_span_bytes. The GPU reads random rows of a large pinned
// buffer markedly faster in address order (bench/gpu/host_read_bench;
// figures in docs/benchmarks.md): fewer distinct translations in flight.
inline constexpr int32_t kStagingBuckets = 32768;
struct HostStaging {
  // [ids] one per id of the batch: its row's device address, 0 = unresolved
  // (written for the ids of HOST features only).
  int64_t* locations = nullptr;
  int64_t* set_keys = nullptr;    // [set_capacity] (table << 40 | row) or -1
  int32_t* set_slots = nullptr;   // [set_capacity] staging slot, -1 pending, -2 overflow
  int64_t set_capacity = 0;       // power of two, >= 2 * capacity
  unsigned int* count = nullptr;  // [1] distinct missed rows so far
  int64_t* sources = nullptr;     // [capacity] device address of each staged row's source
  int32_t* source_bytes = nullptr;  // [capacity] its bytes
  void* rows = nullptr;           // [capacity, stride] staged rows
  int64_t stride = 0;             // bytes, multiple of 16
  int64_t capacity = 0;           // rows
  // Fetch order (see above).
  unsigned int* bucket_counts = nullptr;  // [kStagingBuckets] -> exclusive offsets
  int32_t* bucket_of = nullptr;           // [capacity] bucket of each staged row
  int32_t* rank_in_bucket = nullptr;      // [capacity]
  int32_t* order = nullptr;               // [capacity] staged rows in fetch order
  int32_t bucket_shift = 0;               // bucket = offset >> bucket_shift
  // Optional device value read at launch: rows this launch may stage (min
  // with capacity); 0 = read every miss from host memory directly, inside
  // the pooling kernel (cheaper when few ids miss: the host reads then
  // overlap the HBM work instead of running as a pass of their own).
  // nullptr = capacity. The owner sets it per batch (CudaWorker: from the
  // previous batch's miss rate), also under CUDA graphs.
  const unsigned int* limit = nullptr;
};

// Bytes of one HostStaging block for `ids` ids and `capacity` rows of at
// most `max_row_bytes` bytes.
int64_t HostStagingBytes(int64_t ids, int64_t capacity, int64_t max_row_bytes);
// Lays a HostStaging out in `block` (device memory of HostStagingBytes bytes,
// 256-byte aligned, as cudaMalloc returns).
// `host_span_bytes`: bytes of all HOST tables' rows together (what the
// tables' host_offset values span).
HostStaging CarveHostStaging(void* block, int64_t ids, int64_t capacity, int64_t max_row_bytes,
                             int64_t host_span_bytes);

// 16-byte chunks in a row of `table` when the unit-bag kernel can pool it
// (PooledLookupArgs::unit_bag_chunks): a STATIC table in HBM whose rows are
// 16-byte aligned and a whole number of 16-byte chunks (fp32 dim % 4 == 0,
// fp16 / bf16 dim % 8 == 0); 0 otherwise. Any pooling: a bag of one id pools
// to the id's row times its weight under SUM, MEAN and MAX alike.
#if defined(__CUDACC__)
__host__ __device__
#endif
inline int32_t UnitBagRowChunks(const DeviceTable& table) {
  const int64_t elem = table.row_type == RowType::kFp32 ? 4 : 2;
  const int64_t bytes = elem * table.dim;
  const bool aligned = (reinterpret_cast<uintptr_t>(table.rows) & 15u) == 0;
  if (table.hash.num_buckets != 0 || table.host != 0 || table.dim <= 0 || bytes % 16 != 0 ||
      !aligned) {
    return 0;
  }
  return static_cast<int32_t>(bytes / 16);
}

struct PooledLookupArgs {
  const DeviceTable* tables = nullptr;      // device array [num_tables]
  // Set only when TablesFitFp32Kernel holds for the tables (and no HOST
  // table is read): the launch then uses a kernel compiled for fp32 rows with
  // 16-byte loads and SUM / MEAN pooling only, with fewer registers and less
  // code; its results are the same. Wrong when set otherwise.
  bool fp32_tables_only = false;
  const DeviceFeature* features = nullptr;  // device array [num_features]
  int32_t num_features = 0;
  const int64_t* ids = nullptr;             // all features' ids
  const float* weights = nullptr;           // parallel to ids (read only where weighted)
  const int64_t* bag_ids = nullptr;         // see above
  const int32_t* bag_rows = nullptr;        // see above
  // 32-bit ids and bag offsets (half the bytes to copy in): when set, read
  // instead of `ids` / `bag_ids`, except that features with
  // DeviceFeature::wide_ids read `ids` (both index the same id positions).
  // For tables whose keys are row indices below 2^31 only (a DYNAMIC table's
  // features must be wide_ids): an id outside [0, 2^31) is passed as -1,
  // which resolves to no row like every out-of-range id.
  const int32_t* ids32 = nullptr;
  const int32_t* bag_ids32 = nullptr;
  // Total bags over all features (sum of num_bags), an upper bound is fine:
  // the launch covers this many bag slots.
  int64_t total_bags = 0;
  // > 0: every feature has at most this many bags (the CUDA worker passes
  // its padded rows), and warps are laid out feature by feature: each takes
  // up to 8 consecutive bags of one feature (the last warp of a feature any
  // bags past the bound too, so an understated bound costs time, never
  // bags). A batch of a few rows then pools its features in parallel, where
  // the slot order below would hand one warp the single bags of up to 8
  // features in turn. 0: warps take 8 consecutive slots of all features'
  // bags in order (bag_prefix), total_bags sizing the launch.
  int64_t max_bags_per_feature = 0;
  // > 0 (needs max_bags_per_feature > 0): every DeviceFeature::unit_bags
  // feature whose table has UnitBagRowChunks > 0 is pooled by a kernel of its
  // own, one thread per (bag, 16-byte chunk of the row), without the general
  // kernel's bag entries, segments and shuffles; its bag entries are never
  // read, so they may be left unexpanded (LaunchExpandUnitBags) when every
  // unit feature qualifies. The results are the general kernel's bit for bit.
  // The value is the most chunks in a row of such a table: it sizes that
  // kernel's grid (an understated value costs time, never rows). 0: every
  // feature takes the general kernel.
  int32_t unit_bag_chunks = 0;
  // With unit_bag_chunks: every feature is unit_bags on a qualifying table,
  // so the general kernel is not launched at all (a batch's launch then
  // costs one kernel). Wrong when set otherwise; refused with any_host.
  bool unit_bags_only = false;
  float* out = nullptr;                     // [rows, out_stride]
  int64_t out_stride = 0;                   // floats
  // Device counters [num_tables]: unresolved ids per table are added here
  // (atomicAdd); nullptr = not counted.
  unsigned long long* unresolved = nullptr;
  // Device counters [num_tables]: ids of HOST tables whose row was not in
  // the cache (cache misses) are added here; nullptr = not counted.
  unsigned long long* host_reads = nullptr;
  // Device counters [num_tables]: rows read from host memory (each distinct
  // staged row once, plus every direct read past the staging capacity);
  // nullptr = not counted. <= host_reads.
  unsigned long long* host_rows_read = nullptr;
  // Some table has `host` set: the launch runs the staging passes (which
  // need `staging`) before pooling. Without it HOST tables' rows are still
  // read correctly from host memory but neither caches nor counters are used.
  bool any_host = false;
  HostStaging staging;  // required when any_host; `locations` covers every id
  // LRU "now" of the score touches (DeviceTable::scores). score_now_ptr
  // (device), when set, is read at launch instead, so a captured CUDA graph
  // can advance time without being re-captured.
  unsigned long long score_now = 0;
  const unsigned long long* score_now_ptr = nullptr;
};

// Host-side copy of the features array is needed by the launcher to map a
// global bag slot to its feature; it is passed as the device array plus the
// per-feature prefix of bag counts in `bag_prefix` (device, num_features + 1
// entries: bag_prefix[f] = sum of num_bags of features before f).
cudaError_t LaunchPooledLookup(const PooledLookupArgs& args, const int64_t* bag_prefix,
                               cudaStream_t stream);

// Writes the bag entries of every DeviceFeature::unit_bags feature of
// `features` (device array [num_features]): entry bag_begin + j, for j in
// [0, num_bags], gets id offset id_begin + j (into bag_ids, or bag_ids32 when
// set: exactly one of the two) and row j (bag_rows). Other features' entries
// are left alone. `max_bags` (>= 0) sizes the grid; a feature with more bags
// is still written in full. Twin: engine/cuda/batch_packer.h, ExpandUnitBags.
cudaError_t LaunchExpandUnitBags(const DeviceFeature* features, int32_t num_features,
                                 int64_t max_bags, int64_t* bag_ids, int32_t* bag_ids32,
                                 int32_t* bag_rows, cudaStream_t stream);

// Whether every table (host copies of the descriptors the launch reads) has
// fp32 rows, a dim that is a multiple of 4, 16-byte aligned rows, SUM or
// MEAN pooling and no HOST placement (PooledLookupArgs::fp32_tables_only).
bool TablesFitFp32Kernel(const DeviceTable* tables, int num_tables);

// keys -> rows through a device hash table (kMissingRow when absent). Twin of
// kernels::HashLookupBatch.
cudaError_t LaunchHashLookup(const HashTableView& table, const int64_t* keys, int64_t n,
                             int64_t* rows_out, cudaStream_t stream);

}  // namespace rankd::kernels::cuda

#endif  // RANKD_KERNELS_CUDA_EMBEDDING_LOOKUP_H_
