#include "kernels/cpu/hash_table.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "kernels/cpu/parallel.h"

namespace rankd::kernels {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr std::align_val_t kBucketAlign{128};

size_t RoundToHugePages(size_t bytes) {
  return (bytes + kHugePage - 1) / kHugePage * kHugePage;
}

// Smallest power-of-two bucket count whose slots cover `min_slots` (at least
// one bucket, so lookups in an empty table still have a bucket to read).
int64_t BucketsFor(int64_t min_slots) {
  int64_t buckets = 1;
  while (buckets * kBucketSlots < min_slots) buckets <<= 1;
  return buckets;
}

int64_t StartBucket(int64_t key, int64_t num_buckets) {
  return static_cast<int64_t>(HashKey(key) &
                              static_cast<uint64_t>(num_buckets - 1));
}

// A table's size: num_buckets buckets of kBucketSlots slots each.
struct Layout {
  int64_t num_buckets = 0;
  int64_t num_slots = 0;
};

// The layout for `n` keys and a requested capacity (0 = 2n), or why not.
absl::StatusOr<Layout> ResolveLayout(int64_t n, int64_t min_slots) {
  if (min_slots < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("hash table capacity must be >= 0, got ", min_slots));
  }
  if (min_slots == 0) min_slots = 2 * n;
  if (min_slots < n) {
    return absl::InvalidArgumentError(
        absl::StrCat("hash table capacity ", min_slots,
                     " is smaller than the number of keys ", n));
  }
  // Guards the doubling loop in BucketsFor against overflow.
  if (min_slots > (int64_t{1} << 56)) {
    return absl::InvalidArgumentError(
        absl::StrCat("hash table capacity ", min_slots, " is too large"));
  }
  const int64_t num_buckets = BucketsFor(min_slots);
  return Layout{num_buckets, num_buckets * kBucketSlots};
}

absl::Status EmptyKeyError(int64_t row) {
  return absl::InvalidArgumentError(absl::StrCat(
      "key at row ", row, " is ", kEmptyKey,
      " (INT64_MIN), which the hash table reserves for empty slots"));
}

// Slot holding `key` (not kEmptyKey) in a table without concurrent writers,
// or -1.
int64_t FindSlot(const int64_t* keys, int64_t num_buckets, int64_t key) {
  int64_t bucket = StartBucket(key, num_buckets);
  for (int64_t probe = 0; probe < num_buckets; ++probe) {
    const int64_t base = bucket * kBucketSlots;
    for (int s = 0; s < kBucketSlots; ++s) {
      if (keys[base + s] == key) return base + s;
      if (keys[base + s] == kEmptyKey) return -1;
    }
    bucket = (bucket + 1) & (num_buckets - 1);
  }
  return -1;
}

void AtomicMin(int64_t* target, int64_t value) {
  int64_t cur = __atomic_load_n(target, __ATOMIC_RELAXED);
  while (value < cur &&
         !__atomic_compare_exchange_n(target, &cur, value, /*weak=*/true,
                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

// Inserts key -> row while other threads insert too. Slots only ever change
// from kEmptyKey to a key, so per-slot atomicity (relaxed: no other memory
// is published through the slot; the build's thread joins order the row
// writes before any reader) is enough for the two properties lookups and
// error reporting need:
//  - no empty slot precedes a key on its probe path (a slot is passed only
//    after it was seen holding another key, and it keeps that key);
//  - of two inserts of one key, the later to reach the first one's slot sees
//    the key there (or loses the CAS to it), so every repeat is detected.
// Returns false if the key was already present.
bool InsertConcurrent(int64_t* keys, int64_t* rows, int64_t num_buckets,
                      int64_t key, int64_t row) {
  int64_t bucket = StartBucket(key, num_buckets);
  for (;;) {
    int64_t* base = keys + bucket * kBucketSlots;
    for (int s = 0; s < kBucketSlots; ++s) {
      int64_t cur = __atomic_load_n(base + s, __ATOMIC_RELAXED);
      if (cur == key) return false;
      if (cur != kEmptyKey) continue;
      if (__atomic_compare_exchange_n(base + s, &cur, key, /*weak=*/false,
                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        rows[bucket * kBucketSlots + s] = row;  // only this thread writes it
        return true;
      }
      if (cur == key) return false;  // lost the race to the same key
      // Another key took the slot: keep probing.
    }
    bucket = (bucket + 1) & (num_buckets - 1);
  }
}

// After a parallel build that saw a bad key: the error Build() would give
// (its first bad row in row order), computed from the built table so it does
// not depend on which thread won which race. Reuses `rows` as scratch.
absl::Status DescribeBadKeys(absl::Span<const int64_t> keys, const int64_t* tk,
                             int64_t* tr, int64_t num_buckets, int threads,
                             int64_t chunk) {
  const int64_t n = static_cast<int64_t>(keys.size());
  // Every distinct key is in the table (only repeats were turned away), so
  // a min over all its rows leaves its first occurrence in its slot.
  ParallelChunks(n, chunk, threads, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      if (keys[r] == kEmptyKey) continue;
      const int64_t slot = FindSlot(tk, num_buckets, keys[r]);
      if (slot >= 0) AtomicMin(&tr[slot], r);
    }
  });
  int64_t first_empty = std::numeric_limits<int64_t>::max();
  int64_t first_repeat = std::numeric_limits<int64_t>::max();
  std::atomic<int64_t> repeats{0};
  ParallelChunks(n, chunk, threads, [&](int64_t begin, int64_t end) {
    int64_t local = 0;
    for (int64_t r = begin; r < end; ++r) {
      if (keys[r] == kEmptyKey) {
        AtomicMin(&first_empty, r);
        continue;
      }
      const int64_t slot = FindSlot(tk, num_buckets, keys[r]);
      if (slot >= 0 && tr[slot] != r) {
        ++local;
        AtomicMin(&first_repeat, r);
      }
    }
    repeats.fetch_add(local, std::memory_order_relaxed);
  });
  if (first_empty < first_repeat) return EmptyKeyError(first_empty);
  const int64_t key = keys[first_repeat];
  std::string message =
      absl::StrCat("duplicate key ", key, " at rows ",
                   tr[FindSlot(tk, num_buckets, key)], " and ", first_repeat);
  if (repeats.load() > 1) {
    absl::StrAppend(&message, " (", repeats.load(),
                    " rows in all repeat an earlier row's key)");
  }
  return absl::InvalidArgumentError(message);
}

}  // namespace

void* AllocateTableBytes(size_t bytes) {
  if (bytes < kHugePage) return ::operator new(bytes, kBucketAlign);
  // Over-map by one huge page and trim, so the array starts on a 2 MiB
  // boundary and FreeTableBytes can unmap exactly [p, p + rounded bytes).
  const size_t length = RoundToHugePages(bytes);
  void* map = mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t start = reinterpret_cast<uintptr_t>(map);
  const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > start) munmap(map, aligned - start);
  const size_t tail = kHugePage - (aligned - start);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + length), tail);
  void* p = reinterpret_cast<void*>(aligned);
  madvise(p, length, MADV_HUGEPAGE);  // advice: without THP, 4 KiB pages
  return p;
}

void FreeTableBytes(void* p, size_t bytes) {
  if (p == nullptr) return;
  if (bytes < kHugePage) {
    ::operator delete(p, kBucketAlign);
  } else {
    munmap(p, RoundToHugePages(bytes));
  }
}

int64_t HashTable::SlotsFor(int64_t min_slots) {
  return BucketsFor(min_slots) * kBucketSlots;
}

absl::Status HashTable::BuildParallel(absl::Span<const int64_t> keys,
                                      int64_t min_slots,
                                      const HashBuildOptions& options,
                                      HashTable* out) {
  const int64_t n = static_cast<int64_t>(keys.size());
  absl::StatusOr<Layout> layout = ResolveLayout(n, min_slots);
  if (!layout.ok()) return layout.status();
  const int64_t num_buckets = layout->num_buckets;
  const int threads = ResolveThreads(options.num_threads);
  const int64_t chunk = std::max<int64_t>(1, options.keys_per_chunk);

  Array table_keys;
  Array table_rows;
  // Uninitialised: filled below, in parallel.
  table_keys.resize(layout->num_slots);
  table_rows.resize(layout->num_slots);
  int64_t* tk = table_keys.data();
  int64_t* tr = table_rows.data();
  ParallelChunks(layout->num_slots, int64_t{1} << 20, threads,
                 [&](int64_t begin, int64_t end) {
                   std::fill(tk + begin, tk + end, kEmptyKey);
                   std::fill(tr + begin, tr + end, kMissingRow);
                 });

  std::atomic<bool> bad{false};
  std::atomic<int64_t> done{0};
  ParallelChunks(n, chunk, threads, [&](int64_t begin, int64_t end) {
    // The start bucket is a cache miss on any table bigger than the caches,
    // in both arrays; prefetching them (for writing) a few keys ahead keeps
    // several misses in flight. Without the row prefetch each CAS (a full
    // barrier on x86) would also wait for the previous key's row store.
    constexpr int64_t kPrefetch = 16;
    bool local_bad = false;
    for (int64_t r = begin; r < end; ++r) {
      if (r + kPrefetch < end) {
        const int64_t base =
            StartBucket(keys[r + kPrefetch], num_buckets) * kBucketSlots;
#if defined(__GNUC__)
        __builtin_prefetch(tk + base, 1);
        __builtin_prefetch(tr + base, 1);
#endif
      }
      const int64_t key = keys[r];
      if (key == kEmptyKey || !InsertConcurrent(tk, tr, num_buckets, key, r)) {
        local_bad = true;
      }
    }
    if (local_bad) bad.store(true, std::memory_order_relaxed);
    const int64_t total =
        done.fetch_add(end - begin, std::memory_order_relaxed) + (end - begin);
    if (options.progress) options.progress(total);
  });
  if (bad.load()) {
    return DescribeBadKeys(keys, tk, tr, num_buckets, threads, chunk);
  }

  out->keys_ = std::move(table_keys);
  out->rows_ = std::move(table_rows);
  out->num_buckets_ = num_buckets;
  out->size_ = n;
  return absl::OkStatus();
}

absl::Status HashTable::Build(absl::Span<const int64_t> keys, int64_t min_slots,
                              HashTable* out) {
  const int64_t n = static_cast<int64_t>(keys.size());
  absl::StatusOr<Layout> layout = ResolveLayout(n, min_slots);
  if (!layout.ok()) return layout.status();
  const int64_t num_buckets = layout->num_buckets;
  Array table_keys(layout->num_slots, kEmptyKey);
  Array table_rows(layout->num_slots, kMissingRow);

  for (int64_t r = 0; r < n; ++r) {
    const int64_t key = keys[r];
    if (key == kEmptyKey) return EmptyKeyError(r);
    // Same probe sequence as HashLookup; min_slots >= n guarantees a free slot.
    int64_t bucket = StartBucket(key, num_buckets);
    bool placed = false;
    while (!placed) {
      const int64_t base = bucket * kBucketSlots;
      for (int s = 0; s < kBucketSlots; ++s) {
        const int64_t slot_key = table_keys[base + s];
        if (slot_key == key) {
          return absl::InvalidArgumentError(
              absl::StrCat("duplicate key ", key, " at rows ",
                           table_rows[base + s], " and ", r));
        }
        if (slot_key == kEmptyKey) {
          table_keys[base + s] = key;
          table_rows[base + s] = r;
          placed = true;
          break;
        }
      }
      bucket = (bucket + 1) & (num_buckets - 1);
    }
  }

  out->keys_ = std::move(table_keys);
  out->rows_ = std::move(table_rows);
  out->num_buckets_ = num_buckets;
  out->size_ = n;
  return absl::OkStatus();
}

int64_t HashLookup(const HashTableView& table, int64_t key) {
  // kEmptyKey would "match" the first empty slot.
  if (key == kEmptyKey || table.num_buckets <= 0) return kMissingRow;
  const int64_t mask = table.num_buckets - 1;
  int64_t bucket = StartBucket(key, table.num_buckets);
  // At most num_buckets buckets: a completely full table (capacity == keys)
  // has no empty slot to end the probe of a missing key.
  for (int64_t probe = 0; probe < table.num_buckets; ++probe) {
    const int64_t base = bucket * kBucketSlots;
    for (int s = 0; s < kBucketSlots; ++s) {
      const int64_t slot_key = table.keys[base + s];
      if (slot_key == key) return table.rows[base + s];
      if (slot_key == kEmptyKey) return kMissingRow;
    }
    bucket = (bucket + 1) & mask;
  }
  return kMissingRow;
}

void HashLookupBatch(const HashTableView& table, absl::Span<const int64_t> keys,
                     int64_t* rows_out) {
  // Prefetching the start bucket a few keys ahead hides most of the cache miss
  // on large tables; probes rarely leave the first bucket at load <= 0.5.
  constexpr size_t kPrefetchDistance = 8;
  const size_t n = keys.size();
  const bool can_prefetch = table.num_buckets > 0;
  for (size_t i = 0; i < n; ++i) {
    if (can_prefetch && i + kPrefetchDistance < n) {
      const int64_t b =
          StartBucket(keys[i + kPrefetchDistance], table.num_buckets);
#if defined(__GNUC__)
      __builtin_prefetch(table.keys + b * kBucketSlots);
#endif
    }
    rows_out[i] = HashLookup(table, keys[i]);
  }
}

}  // namespace rankd::kernels
