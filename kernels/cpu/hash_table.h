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

#include <cstddef>
#include <cstdint>
#include <functional>
#include <new>
#include <utility>
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

// Bytes of an array of the table: arrays of at least 2 MiB are mapped
// directly, 2 MiB aligned and advised as transparent huge pages (inserts and
// lookups are random accesses: with 4 KiB pages nearly each one also misses
// the TLB); smaller ones come from operator new, 128 B (bucket) aligned.
void* AllocateTableBytes(size_t bytes);
void FreeTableBytes(void* p, size_t bytes);

// Leaves elements uninitialised on resize, so a multi-GB table is written
// once, by the threads that fill it, instead of first being zeroed by one.
template <typename T>
struct BucketAlignedAllocator {
  using value_type = T;
  BucketAlignedAllocator() = default;
  template <typename U>
  BucketAlignedAllocator(const BucketAlignedAllocator<U>&) {}  // NOLINT
  T* allocate(size_t n) {
    return static_cast<T*>(AllocateTableBytes(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) { FreeTableBytes(p, n * sizeof(T)); }
  template <typename U>
  void construct(U* p) {
    ::new (static_cast<void*>(p)) U;  // default-init: no zeroing
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <typename U>
  struct rebind {
    using other = BucketAlignedAllocator<U>;
  };
  friend bool operator==(const BucketAlignedAllocator&,
                         const BucketAlignedAllocator&) {
    return true;
  }
  friend bool operator!=(const BucketAlignedAllocator&,
                         const BucketAlignedAllocator&) {
    return false;
  }
};

struct HashBuildOptions {
  // Threads inserting keys (and initialising the arrays); 0 = every hardware
  // thread. With 1 the layout is exactly Build()'s.
  int num_threads = 0;
  // Keys each thread takes at a time; also the progress granularity.
  int64_t keys_per_chunk = int64_t{1} << 16;
  // Called after each chunk with the number of keys inserted so far (all
  // threads together). Called from build threads, possibly concurrently and
  // out of order (a later call may carry a smaller count): it must be
  // thread-safe. Empty = no reports.
  std::function<void(int64_t keys_done)> progress;
};

// Owning host table.
class HashTable {
 public:
  // Builds the table for keys[r] -> r. `min_slots` is the requested capacity
  // (0 = 2 * keys.size(), i.e. load factor <= 0.5); it is rounded up to a
  // power-of-two number of buckets and must be >= keys.size().
  // Errors: a duplicate key (names both rows), a key equal to kEmptyKey, or a
  // capacity smaller than the number of keys. Single-threaded: the reference
  // BuildParallel is tested against.
  static absl::Status Build(absl::Span<const int64_t> keys, int64_t min_slots,
                            HashTable* out);

  // Same table semantics as Build, built by several threads that claim empty
  // slots with a compare-and-swap on the 8-byte key. Lookups (HashLookup and
  // the CUDA kernel) give exactly Build()'s result for every key, stored or
  // not: each key still sits on its own probe path with no empty slot before
  // it, which is all a lookup relies on. Slot positions, however, depend on
  // which thread won each race, so they can differ between runs (and from
  // Build) when two keys compete for one bucket; nothing may depend on them.
  // Errors are Build()'s, deterministic whatever the thread count: the
  // lowest row that is INT64_MIN or repeats an earlier key is reported (for a
  // duplicate, with the row of its first occurrence), plus how many rows
  // repeat an earlier key. `out` is left untouched on error.
  static absl::Status BuildParallel(absl::Span<const int64_t> keys,
                                    int64_t min_slots,
                                    const HashBuildOptions& options,
                                    HashTable* out);

  // Slots a table built with `min_slots` (> 0) has: rounded up to a
  // power-of-two number of buckets. For memory planning before a build.
  static int64_t SlotsFor(int64_t min_slots);

  HashTableView view() const {
    return HashTableView{keys_.data(), rows_.data(), num_buckets_};
  }
  int64_t num_slots() const { return num_buckets_ * kBucketSlots; }
  int64_t size() const { return size_; }
  // Bytes of keys + rows arrays.
  int64_t bytes() const { return num_slots() * 16; }

 private:
  using Array = std::vector<int64_t, BucketAlignedAllocator<int64_t>>;
  Array keys_;
  Array rows_;
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
