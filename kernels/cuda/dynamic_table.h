// Dynamic-table updates on the GPU: upsert (assign / insert / evict by LRU
// or LFU score), erase, tombstone rehash and init, on a DynamicTableView whose
// arrays and counters are all in device memory. CPU twins and the exact
// semantics: kernels/cpu/dynamic_table.h. After the same call on the same
// table contents, the GPU and the CPU agree on the stored key set, each key's
// row bytes, each key's score, the evicted key set and every DynamicStats
// field except `rehashes`; they may differ in which row / slot a key takes
// (rows are popped and slots claimed with atomics) and, as a consequence, in
// how many tombstones insertions reuse (counters->tombstones) and so in when
// a rehash runs. Neither changes what lookups return.
//
// Conventions: every launcher enqueues on `stream` (no synchronisation, no
// allocation: upserts take a caller-provided scratch buffer), checks its
// launches and returns the first error. `stats` (device memory) is ADDED to
// (zero it to read one call's figures); copy it back after the stream work.
// Calls on one table must be ordered (one stream, or events) and must not
// overlap lookups of that table (the engine applies updates between batches).
//
// Upsert (LaunchDynamicUpsert), as kernels in stream order:
//   find:    each key probes the hash; stored keys' rows are marked "touched"
//   plan:    need = max(0, new - free_count) keys must be evicted
//   select:  the need smallest (score, key) among stored, untouched rows:
//            a most-significant-digit radix select over the 128-bit
//            (score, key ^ 2^63) value, 8 bits a pass (<= 16 passes, each a
//            histogram over the rows plus a one-block scan; passes after the
//            threshold is exact return at once). Exactly `need` rows are <=
//            the threshold, so the selection is unique whatever the layout.
//   evict:   selected rows are erased (slot -> tombstone, row pushed on the
//            free stack, key to evicted_keys in no particular order)
//   rehash:  only when tombstones > 0 and size + tombstones + new >
//            DynamicMaxOccupied(num_slots): slots rebuilt from row_keys
//   insert:  stored keys' scores touched; new keys pop a free row (warp-
//            aggregated atomics) and claim the first empty / tombstone slot of
//            their probe path with a 64-bit CAS
//   copy:    one warp per key writes its source row (16-byte accesses when
//            aligned)
#ifndef RANKD_KERNELS_CUDA_DYNAMIC_TABLE_H_
#define RANKD_KERNELS_CUDA_DYNAMIC_TABLE_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cpu/dynamic_table.h"

namespace rankd::kernels::cuda {

// Bytes of the scratch buffer LaunchDynamicUpsert needs for a table of
// `max_keys` rows and calls of up to `n` keys.
int64_t DynamicUpsertScratchBytes(int64_t max_keys, int64_t n);

// GPU twin of InitDynamicTable for `n` device keys (rows [0, n) already hold
// their bytes): row_keys, free stack (max_keys - 1 .. n), scores = 0,
// counters, slots. Keys that are kEmptyKey / kDeletedKey or repeat an
// earlier-stored key are counted in stats->failed (the table is then unusable:
// the caller reports an error). n <= max_keys (else cudaErrorInvalidValue).
cudaError_t LaunchDynamicInit(const DynamicTableView& view, const int64_t* keys, int64_t n,
                              DynamicStats* stats, cudaStream_t stream);

// GPU twin of DynamicErase: device keys[n] (any values; repeats count as
// not_found). Adds deleted / not_found to *stats.
cudaError_t LaunchDynamicErase(const DynamicTableView& view, const int64_t* keys, int64_t n,
                               DynamicStats* stats, cudaStream_t stream);

// GPU twin of DynamicUpsert: device keys[n] (precondition as CheckUpsertKeys:
// unique, no sentinel, n <= max_keys; validated by the caller), device src
// rows [n, row_bytes]. `scratch`: device memory of at least
// DynamicUpsertScratchBytes(max_keys, n) bytes, 256-byte aligned, used
// from the first kernel of the call to the last (one per stream).
// `evicted_keys`: device [n] or nullptr; receives stats->evicted keys in no
// particular order. Adds inserted / updated / evicted / rehashes / failed.
cudaError_t LaunchDynamicUpsert(const DynamicTableView& view, const int64_t* keys, int64_t n,
                                const void* src, EvictionPolicy policy, uint64_t now,
                                void* scratch, int64_t scratch_bytes, DynamicStats* stats,
                                int64_t* evicted_keys, cudaStream_t stream);

// GPU twin of DynamicRehash: slots rebuilt from row_keys, tombstones = 0.
// Keys that find no slot are added to stats->failed (nullptr: not counted).
cudaError_t LaunchDynamicRehash(const DynamicTableView& view, DynamicStats* stats,
                                cudaStream_t stream);

}  // namespace rankd::kernels::cuda

#endif  // RANKD_KERNELS_CUDA_DYNAMIC_TABLE_H_
