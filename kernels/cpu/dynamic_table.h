// Mutable ("dynamic") embedding tables: keys are inserted, assigned, erased
// and evicted by score (LRU / LFU) while the table serves lookups. This
// header holds the table's layout (a view of plain arrays, in host memory for
// the CPU functions below, in device memory for kernels/cuda/dynamic_table.h)
// and the CPU reference ("twin") of every update kernel. It compiles under
// nvcc too (the view and the inline helpers are used by the .cu files).
//
// Layout. The hash part is kernels/cpu/hash_table.h's: num_buckets (a power
// of two) buckets of kBucketSlots slots; slot_keys[s] is a key, kEmptyKey or
// kDeletedKey (a tombstone left by an erase), slot_rows[s] its row. Lookups
// (HashLookup, the CUDA pooled / hash lookup kernels) work unchanged on these
// arrays: a tombstone never equals a valid key, so a probe passes it, and
// only kEmptyKey ends a probe. An erased slot also gets slot_rows =
// kMissingRow, so even a lookup of the value kDeletedKey itself that stops on
// a tombstone resolves to "missing".
// Rows: row r of `rows` ([max_keys, row_bytes]) belongs to row_keys[r]
// (kEmptyKey: free); scores[r] is that key's eviction score; the free rows
// are a stack free_rows[0, counters->free_count) (pop from the top).
//
// Invariants (ValidateDynamicTable checks them on the CPU):
//   size + free_count == max_keys; every stored key (row_keys[r] !=
//   kEmptyKey) sits in exactly one slot, on its probe path with no empty slot
//   before it, and slot_rows of that slot is r; the free stack holds exactly
//   the rows whose row_keys is kEmptyKey; tombstones == number of slots
//   holding kDeletedKey.
//
// Tombstone upkeep: an upsert that is about to insert `new` keys rebuilds
// the slots from row_keys first (DynamicRehash; tombstones -> 0) when
//   tombstones > 0 && size + tombstones + new > DynamicMaxOccupied(num_slots)
// (3/4 of the slots), so probes stay short and, while max_keys <= 3/4 of the
// slots, an empty slot ends every probe. Probes are bounded by num_buckets
// buckets anyway (no loop can run forever, even with max_keys == num_slots).
// Insertion reuses the first tombstone or empty slot on the key's probe path
// (the key is known to be absent), which lowers `tombstones`.
//
// Scores. LRU: a touch sets score = now (lookups: max(score, now)). LFU: a
// touch adds 1 (a new key starts at 1). kNone: scores are never changed (a
// full table still evicts by the stored scores, i.e. by key when all are 0;
// callers that must never evict check capacity first).
//
// Threading: the update functions are not thread-safe against each other or
// against lookups of the same table (the engine applies an update between
// batches, "atomic with respect to scoring"). Score touches by lookups
// (PoolEmbeddings with PoolTable::scores) use relaxed atomics and may run on
// several threads at once. Nothing here allocates table memory: the caller
// owns every array (DynamicTableStorage below is an owning helper).
#ifndef RANKD_KERNELS_CPU_DYNAMIC_TABLE_H_
#define RANKD_KERNELS_CPU_DYNAMIC_TABLE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/cpu/hash_table.h"

namespace rankd::kernels {

#if defined(__CUDACC__)
#define RANKD_HD __host__ __device__
#else
#define RANKD_HD
#endif

// Tombstone; like kEmptyKey never a valid key.
inline constexpr int64_t kDeletedKey = INT64_MIN + 1;

enum class EvictionPolicy : int32_t { kNone = 0, kLru = 1, kLfu = 2 };

// In host memory (CPU functions) or device memory (CUDA launchers).
struct DynamicTableCounters {
  int64_t size = 0;        // stored keys
  int64_t free_count = 0;  // free rows (entries of the free stack)
  int64_t tombstones = 0;  // slots holding kDeletedKey
};

// Non-owning.
struct DynamicTableView {
  int64_t* slot_keys = nullptr;  // [num_slots]: key, kEmptyKey or kDeletedKey
  int64_t* slot_rows = nullptr;  // [num_slots]
  int64_t num_buckets = 0;       // power of two
  int64_t* row_keys = nullptr;   // [max_keys]: key of row r, or kEmptyKey (free)
  uint64_t* scores = nullptr;    // [max_keys]: eviction score of row r's key
  int64_t* free_rows = nullptr;  // [max_keys]: stack, [0, free_count) are free
  DynamicTableCounters* counters = nullptr;
  int64_t max_keys = 0;
  void* rows = nullptr;  // [max_keys, row_bytes]
  int64_t row_bytes = 0;

  RANKD_HD int64_t num_slots() const { return num_buckets * kBucketSlots; }
};

// What an update did. The CPU functions return it; the CUDA launchers ADD to
// a DynamicStats in device memory (zero it to read one call's figures).
// Every field except `rehashes` is the same on the CPU and the GPU for the
// same call on the same table contents.
struct DynamicStats {
  int64_t inserted = 0;   // upsert: new keys stored
  int64_t updated = 0;    // upsert: stored keys overwritten
  int64_t evicted = 0;    // upsert: stored keys erased to make room
  int64_t deleted = 0;    // erase: keys erased
  int64_t not_found = 0;  // erase: keys not stored (or repeated in the call)
  int64_t rehashes = 0;   // tombstone rebuilds run (layout-dependent)
  int64_t failed = 0;     // keys that found no slot / bad init keys (0 unless a bug or bad input)
};

// Slots an upsert may leave occupied (keys + tombstones) before it rehashes.
RANKD_HD inline int64_t DynamicMaxOccupied(int64_t num_slots) {
  return num_slots - num_slots / 4;
}

// Whether (score_a, key_a) evicts before (score_b, key_b).
RANKD_HD inline bool EvictsBefore(uint64_t score_a, int64_t key_a, uint64_t score_b,
                                  int64_t key_b) {
  return score_a < score_b || (score_a == score_b && key_a < key_b);
}

HashTableView AsHashTableView(const DynamicTableView& view);

// Checks the view's shape: num_buckets a power of two, num_slots >=
// max_keys > 0, row_bytes > 0, every pointer set.
absl::Status CheckDynamicTableView(const DynamicTableView& view);

// Initialises a table whose first keys.size() rows already hold the rows of
// `keys` (row r = keys[r]): row_keys, free stack (max_keys - 1 .. n, so pops
// give n, n + 1, ... in order), scores (0), slots, counters.
// Errors (view untouched but slots/row_keys possibly partly written): a bad
// view, more keys than max_keys, kEmptyKey / kDeletedKey among the keys, or a
// duplicate (names both rows), as HashTable::Build.
absl::Status InitDynamicTable(const DynamicTableView& view, absl::Span<const int64_t> keys);

// Checks an upsert's precondition (what callers validate before the CPU or
// GPU upsert): keys unique, none kEmptyKey / kDeletedKey, keys.size() <=
// max_keys.
absl::Status CheckUpsertKeys(absl::Span<const int64_t> keys, int64_t max_keys);

// Erases every stored key of `keys`: its slot becomes a tombstone (slot_rows
// kMissingRow), row_keys[row] = kEmptyKey, the row is pushed on the free
// stack, size--, tombstones++. Returns {deleted, not_found}. Row bytes and
// scores of freed rows are left as they are. Any keys (sentinels are simply
// not found).
DynamicStats DynamicErase(const DynamicTableView& view, absl::Span<const int64_t> keys);

// Upserts keys[i] -> src row i (src: [keys.size(), row_bytes]).
// Precondition (CheckUpsertKeys): unique keys, no sentinel, n <= max_keys.
//  - a stored key: its row's bytes are overwritten, its score touched
//    (LRU: now, LFU: +1);
//  - new keys take free rows (pops: the top of the stack first, in call
//    order); when fewer rows are free than new keys, the stored keys NOT in
//    this call with the smallest (score, key) pairs are evicted first (erased
//    as DynamicErase, their keys written to `evicted_keys` in ascending
//    (score, key) order when it is not nullptr; it needs room for n keys);
//    a new key gets score now (LRU) or 1 (LFU), 0 with kNone;
//  - the tombstone rebuild (see the top) may run before the inserts.
// Returns {inserted, updated, evicted, rehashes}.
DynamicStats DynamicUpsert(const DynamicTableView& view, absl::Span<const int64_t> keys,
                           const void* src, EvictionPolicy policy, uint64_t now,
                           int64_t* evicted_keys);

// Rebuilds the slots from row_keys (rows in ascending order, each into the
// first empty slot of its probe path); tombstones = 0. Returns the number of
// keys that found no slot (0 unless the table is corrupt).
int64_t DynamicRehash(const DynamicTableView& view);

// Full consistency check of the invariants listed at the top (O(num_slots +
// max_keys)); for tests and debugging.
absl::Status ValidateDynamicTable(const DynamicTableView& view);

// Touches a score as a serving lookup does (relaxed atomics: concurrent
// lookups may touch one row). LRU: score = max(score, now); LFU: score += 1.
inline void TouchScoreForLookup(uint64_t* scores, int64_t row, EvictionPolicy policy,
                                uint64_t now) {
  uint64_t* p = scores + row;
  if (policy == EvictionPolicy::kLru) {
    uint64_t cur = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (cur < now && !__atomic_compare_exchange_n(p, &cur, now, /*weak=*/true,
                                                     __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
  } else if (policy == EvictionPolicy::kLfu) {
    __atomic_fetch_add(p, uint64_t{1}, __ATOMIC_RELAXED);
  }
}

// Owning host storage for one dynamic table (CPU backend, tests, benches).
// Not thread-safe; arrays live as long as the object.
class DynamicTableStorage {
 public:
  DynamicTableStorage() = default;
  DynamicTableStorage(const DynamicTableStorage&) = delete;  // the view points into it
  DynamicTableStorage& operator=(const DynamicTableStorage&) = delete;

  // num_slots = HashTable::SlotsFor(min_slots) (0 = 2 * max_keys).
  static absl::Status Create(int64_t max_keys, int64_t min_slots, int64_t row_bytes,
                             DynamicTableStorage* out);
  const DynamicTableView& view() const { return view_; }
  char* row(int64_t r) { return bytes_.data() + r * view_.row_bytes; }

 private:
  std::vector<int64_t> slot_keys_, slot_rows_, row_keys_, free_rows_;
  std::vector<uint64_t> scores_;
  std::vector<char> bytes_;
  DynamicTableCounters counters_;
  DynamicTableView view_;
};

}  // namespace rankd::kernels

#endif  // RANKD_KERNELS_CPU_DYNAMIC_TABLE_H_
