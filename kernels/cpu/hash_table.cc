#include "kernels/cpu/hash_table.h"

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"

namespace rankd::kernels {
namespace {

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

}  // namespace

absl::Status HashTable::Build(absl::Span<const int64_t> keys, int64_t min_slots,
                              HashTable* out) {
  const int64_t n = static_cast<int64_t>(keys.size());
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
  const int64_t num_slots = num_buckets * kBucketSlots;
  std::vector<int64_t> table_keys(num_slots, kEmptyKey);
  std::vector<int64_t> table_rows(num_slots, kMissingRow);

  for (int64_t r = 0; r < n; ++r) {
    const int64_t key = keys[r];
    if (key == kEmptyKey) {
      return absl::InvalidArgumentError(absl::StrCat(
          "key at row ", r, " is ", key,
          " (INT64_MIN), which the hash table reserves for empty slots"));
    }
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
