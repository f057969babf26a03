// Open-addressing hash table that maps unbounded int64 keys to row indices of a
// DYNAMIC embedding table. The layout is plain arrays so the CUDA lookup kernel
// reads a copy of the very same bytes (no rebuild on the GPU).
//
// Layout: `num_buckets` (a power of two) buckets of kBucketSlots slots each;
// keys[slot] holds a key or kEmptyKey, rows[slot] its row. A key starts at
// bucket HashKey(key) & (num_buckets - 1) and probes following buckets
// (wrapping) until it finds the key or an empty slot. Tables are built once at
// load time and never delete, so an empty slot ends a probe.
#ifndef RANKD_KERNELS_CPU_HASH_TABLE_H_
#define RANKD_KERNELS_CPU_HASH_TABLE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace rankd::kernels {

inline constexpr int kBucketSlots = 16;  // 16 x 8 B keys = one 128 B line
inline constexpr int64_t kEmptyKey = INT64_MIN;
inline constexpr int64_t kMissingRow = -1;

// splitmix64 finalizer: cheap and mixes every input bit into the low bits.
#if defined(__CUDACC__)
__host__ __device__
#endif
inline uint64_t HashKey(int64_t key) {
  uint64_t x = static_cast<uint64_t>(key);
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// Non-owning view of a built table (host or device memory).
struct HashTableView {
  const int64_t* keys = nullptr;  // [num_buckets * kBucketSlots]
  const int64_t* rows = nullptr;  // [num_buckets * kBucketSlots]
  int64_t num_buckets = 0;        // power of two, > 0
};

// Owning host table.
class HashTable {
 public:
  // Builds the table for keys[r] -> r. `min_slots` is the requested capacity
  // (0 = 2 * keys.size(), i.e. load factor <= 0.5); it is rounded up to a
  // power-of-two number of buckets and must be >= keys.size().
  // Errors: a duplicate key (names both rows), a key equal to kEmptyKey, or a
  // capacity smaller than the number of keys.
  static absl::Status Build(absl::Span<const int64_t> keys, int64_t min_slots,
                            HashTable* out);

  HashTableView view() const {
    return HashTableView{keys_.data(), rows_.data(), num_buckets_};
  }
  int64_t num_slots() const { return num_buckets_ * kBucketSlots; }
  int64_t size() const { return size_; }
  // Bytes of keys + rows arrays.
  int64_t bytes() const { return num_slots() * 16; }

 private:
  std::vector<int64_t> keys_;
  std::vector<int64_t> rows_;
  int64_t num_buckets_ = 0;
  int64_t size_ = 0;
};

// Row of `key`, or kMissingRow. CPU twin of the CUDA lookup kernel.
int64_t HashLookup(const HashTableView& table, int64_t key);

// Batched form: rows_out[i] = HashLookup(table, keys[i]).
void HashLookupBatch(const HashTableView& table, absl::Span<const int64_t> keys,
                     int64_t* rows_out);

}  // namespace rankd::kernels

#endif  // RANKD_KERNELS_CPU_HASH_TABLE_H_
