#include "kernels/cpu/hash_table.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rankd::kernels {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMinUsable = std::numeric_limits<int64_t>::min() + 1;

// `n` distinct keys spread over the whole int64 range (negative ones too) plus
// the extremes, never kEmptyKey.
std::vector<int64_t> DistinctKeys(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> keys;
  std::unordered_set<int64_t> seen;
  for (int64_t k : {kMax, kMax - 1, kMinUsable, kMinUsable + 1, int64_t{0},
                    int64_t{-1}, int64_t{1}}) {
    if (static_cast<int64_t>(keys.size()) < n && seen.insert(k).second) {
      keys.push_back(k);
    }
  }
  while (static_cast<int64_t>(keys.size()) < n) {
    // Half small keys (dense id ranges, as real ids often are), half wide.
    int64_t k = (rng() & 1) ? static_cast<int64_t>(rng() % 100000) - 50000
                            : static_cast<int64_t>(rng());
    if (k == kEmptyKey || !seen.insert(k).second) continue;
    keys.push_back(k);
  }
  std::shuffle(keys.begin(), keys.end(), rng);
  return keys;
}

// Keys that are not in `present`.
std::vector<int64_t> MissingKeys(const std::vector<int64_t>& present, int64_t n,
                                 uint64_t seed) {
  std::unordered_set<int64_t> set(present.begin(), present.end());
  std::mt19937_64 rng(seed);
  std::vector<int64_t> out;
  for (int64_t k : {kMax, kMinUsable, int64_t{0}, int64_t{-1}, int64_t{7}}) {
    if (!set.count(k)) out.push_back(k);
  }
  while (static_cast<int64_t>(out.size()) < n) {
    int64_t k = (rng() & 1) ? static_cast<int64_t>(rng() % 200000) - 100000
                            : static_cast<int64_t>(rng());
    if (k != kEmptyKey && !set.count(k)) out.push_back(k);
  }
  return out;
}

// Checks the layout the CUDA kernel relies on: every key sits on its own probe
// path with no empty slot before it, and empty slots hold kMissingRow.
void ExpectValidLayout(const HashTable& table) {
  const HashTableView v = table.view();
  ASSERT_GT(v.num_buckets, 0);
  ASSERT_EQ(v.num_buckets & (v.num_buckets - 1), 0) << "not a power of two";
  int64_t occupied = 0;
  for (int64_t slot = 0; slot < table.num_slots(); ++slot) {
    if (v.keys[slot] == kEmptyKey) {
      EXPECT_EQ(v.rows[slot], kMissingRow);
      continue;
    }
    ++occupied;
    const int64_t home = HashKey(v.keys[slot]) & (v.num_buckets - 1);
    // Walk from the start of the home bucket to this slot: all occupied.
    int64_t s = home * kBucketSlots;
    while (s != slot) {
      ASSERT_NE(v.keys[s], kEmptyKey)
          << "empty slot on the probe path of key " << v.keys[slot];
      s = (s + 1) % table.num_slots();
    }
  }
  EXPECT_EQ(occupied, table.size());
}

void ExpectAllFound(const HashTable& table, const std::vector<int64_t>& keys) {
  for (int64_t r = 0; r < static_cast<int64_t>(keys.size()); ++r) {
    ASSERT_EQ(HashLookup(table.view(), keys[r]), r) << "key " << keys[r];
  }
}

TEST(HashTableTest, BucketCountIsSmallestPowerOfTwoCoveringCapacity) {
  struct Case {
    int64_t keys;
    int64_t min_slots;
    int64_t buckets;
  };
  for (const Case& c :
       {Case{0, 0, 1}, Case{1, 0, 1}, Case{8, 0, 1}, Case{9, 0, 2},
        Case{5, 16, 1}, Case{5, 17, 2}, Case{5, 32, 2}, Case{5, 33, 4},
        Case{100, 0, 16}, Case{1000, 1000, 64}, Case{1000, 1025, 128}}) {
    SCOPED_TRACE(testing::Message()
                 << "keys=" << c.keys << " min_slots=" << c.min_slots);
    HashTable t;
    ASSERT_TRUE(
        HashTable::Build(DistinctKeys(c.keys, 1), c.min_slots, &t).ok());
    EXPECT_EQ(t.view().num_buckets, c.buckets);
    EXPECT_EQ(t.num_slots(), c.buckets * kBucketSlots);
    EXPECT_EQ(t.bytes(), c.buckets * kBucketSlots * 16);
    EXPECT_EQ(t.size(), c.keys);
  }
}

// Load factors 0.5 (the default capacity) and 0.9 (explicit capacity).
TEST(HashTableTest, FindsEveryKeyAndNoMissingKey) {
  struct Case {
    int64_t keys;
    int64_t min_slots;
    double load;
  };
  for (const Case& c : {Case{8192, 0, 0.5}, Case{14746, 16384, 0.9},
                        Case{1843, 2048, 0.9}, Case{3, 0, 3.0 / 16}}) {
    SCOPED_TRACE(testing::Message() << "keys=" << c.keys);
    const std::vector<int64_t> keys = DistinctKeys(c.keys, c.keys);
    HashTable t;
    ASSERT_TRUE(HashTable::Build(keys, c.min_slots, &t).ok());
    EXPECT_NEAR(static_cast<double>(t.size()) / t.num_slots(), c.load, 1e-3);
    ExpectValidLayout(t);
    ExpectAllFound(t, keys);
    for (int64_t k : MissingKeys(keys, 5000, c.keys + 1)) {
      ASSERT_EQ(HashLookup(t.view(), k), kMissingRow) << "key " << k;
    }
    EXPECT_EQ(HashLookup(t.view(), kEmptyKey), kMissingRow);
  }
}

TEST(HashTableTest, ExtremeAndNegativeKeys) {
  const std::vector<int64_t> keys = {kMax,
                                     kMinUsable,
                                     -1,
                                     0,
                                     1,
                                     kMax - 1,
                                     kMinUsable + 1,
                                     -1234567,
                                     int64_t{1} << 62,
                                     -(int64_t{1} << 62)};
  HashTable t;
  ASSERT_TRUE(HashTable::Build(keys, 0, &t).ok());
  ExpectValidLayout(t);
  ExpectAllFound(t, keys);
  for (int64_t k : {kMax - 2, kMinUsable + 2, int64_t{-2}, int64_t{2}}) {
    EXPECT_EQ(HashLookup(t.view(), k), kMissingRow) << k;
  }
}

// Keys that all share a start bucket overflow into the following buckets
// (wrapping past the last one).
TEST(HashTableTest, OverflowingBucketsProbeOnAndWrap) {
  const int64_t num_buckets = 4;
  std::vector<int64_t> same_bucket;
  for (int64_t k = 1; same_bucket.size() < 40; ++k) {
    if ((HashKey(k) & (num_buckets - 1)) == num_buckets - 1) {
      same_bucket.push_back(k);
    }
  }
  HashTable t;
  ASSERT_TRUE(
      HashTable::Build(same_bucket, num_buckets * kBucketSlots, &t).ok());
  ASSERT_EQ(t.view().num_buckets, num_buckets);
  ExpectValidLayout(t);
  ExpectAllFound(t, same_bucket);
  // The first key fills bucket 3, the 17th wraps to bucket 0.
  EXPECT_EQ(t.view().keys[3 * kBucketSlots], same_bucket[0]);
  EXPECT_EQ(t.view().keys[0], same_bucket[16]);
  EXPECT_EQ(HashLookup(t.view(), -5), kMissingRow);
}

// Capacity == keys: no empty slot anywhere, a missing key must still end.
TEST(HashTableTest, FullTableLookupOfMissingKeyTerminates) {
  const std::vector<int64_t> keys = DistinctKeys(64, 3);
  HashTable t;
  ASSERT_TRUE(HashTable::Build(keys, 64, &t).ok());
  ASSERT_EQ(t.num_slots(), 64);
  ExpectValidLayout(t);
  ExpectAllFound(t, keys);
  for (int64_t k : MissingKeys(keys, 100, 4)) {
    ASSERT_EQ(HashLookup(t.view(), k), kMissingRow);
  }
}

TEST(HashTableTest, EmptyTable) {
  HashTable t;
  ASSERT_TRUE(HashTable::Build({}, 0, &t).ok());
  EXPECT_EQ(t.size(), 0);
  EXPECT_EQ(HashLookup(t.view(), 0), kMissingRow);
  EXPECT_EQ(HashLookup(t.view(), kMax), kMissingRow);
  EXPECT_EQ(HashLookup(HashTableView{}, 1), kMissingRow);
}

TEST(HashTableTest, DuplicateKeyNamesBothRows) {
  HashTable t;
  const absl::Status s =
      HashTable::Build({10, 42, 11, 12, 13, 14, 15, 42, 16}, 0, &t);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("duplicate key 42"));
  EXPECT_THAT(s.message(), HasSubstr("rows 1 and 7"));

  const absl::Status extreme = HashTable::Build({kMax, 0, kMax}, 0, &t);
  EXPECT_THAT(extreme.message(),
              HasSubstr("duplicate key 9223372036854775807 at rows 0 and 2"));
}

TEST(HashTableTest, RejectsEmptyKeySentinel) {
  HashTable t;
  const absl::Status s = HashTable::Build({1, 2, kEmptyKey}, 0, &t);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("row 2"));
  EXPECT_THAT(s.message(), HasSubstr("-9223372036854775808"));
}

TEST(HashTableTest, RejectsCapacityBelowKeyCount) {
  HashTable t;
  const absl::Status s = HashTable::Build(DistinctKeys(20, 5), 19, &t);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("19"));
  EXPECT_THAT(s.message(), HasSubstr("20"));
  EXPECT_FALSE(HashTable::Build({1}, -1, &t).ok());
}

TEST(HashTableTest, FailedBuildLeavesTableUntouched) {
  HashTable t;
  ASSERT_TRUE(HashTable::Build({5, 6, 7}, 0, &t).ok());
  ASSERT_FALSE(HashTable::Build({1, 1}, 0, &t).ok());
  EXPECT_EQ(t.size(), 3);
  EXPECT_EQ(HashLookup(t.view(), 7), 2);
}

TEST(HashTableTest, BatchMatchesSingleLookups) {
  const std::vector<int64_t> keys = DistinctKeys(3000, 11);
  HashTable t;
  ASSERT_TRUE(HashTable::Build(keys, 0, &t).ok());
  std::vector<int64_t> queries = MissingKeys(keys, 1500, 12);
  queries.insert(queries.end(), keys.begin(), keys.end());
  queries.push_back(kEmptyKey);
  std::shuffle(queries.begin(), queries.end(), std::mt19937_64(13));
  for (size_t n :
       {size_t{0}, size_t{1}, size_t{7}, size_t{9}, queries.size()}) {
    std::vector<int64_t> rows(n + 1, 12345);  // one guard element
    HashLookupBatch(t.view(), absl::MakeConstSpan(queries.data(), n),
                    rows.data());
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(rows[i], HashLookup(t.view(), queries[i])) << i;
    }
    EXPECT_EQ(rows[n], 12345) << "wrote past the end";
  }
}

// ---- BuildParallel: same lookups as Build, whatever the thread count ----

HashBuildOptions Threads(int n, int64_t chunk = 64) {
  HashBuildOptions o;
  o.num_threads = n;
  o.keys_per_chunk = chunk;  // small chunks: threads interleave on small inputs
  return o;
}

// With one thread the keys go in in row order, as in Build: same bytes.
TEST(HashTableParallelTest, OneThreadGivesBuildsExactLayout) {
  const std::vector<int64_t> keys = DistinctKeys(5000, 21);
  HashTable serial;
  HashTable parallel;
  ASSERT_TRUE(HashTable::Build(keys, 0, &serial).ok());
  ASSERT_TRUE(HashTable::BuildParallel(keys, 0, Threads(1), &parallel).ok());
  ASSERT_EQ(parallel.num_slots(), serial.num_slots());
  for (int64_t s = 0; s < serial.num_slots(); ++s) {
    ASSERT_EQ(parallel.view().keys[s], serial.view().keys[s]) << s;
    ASSERT_EQ(parallel.view().rows[s], serial.view().rows[s]) << s;
  }
}

// Several threads, load factors 0.5 and 0.9 and a table where every key
// shares one start bucket (maximal contention): every stored and missing key
// looks up exactly as in the serial table, and the layout invariant holds.
TEST(HashTableParallelTest, LookupsMatchSerialBuild) {
  std::vector<int64_t> same_bucket;
  for (int64_t k = 1; same_bucket.size() < 60; ++k) {
    if ((HashKey(k) & 3) == 2) same_bucket.push_back(k);
  }
  struct Case {
    std::vector<int64_t> keys;
    int64_t min_slots;
  };
  const std::vector<Case> cases = {{DistinctKeys(20000, 31), 0},
                                   {DistinctKeys(14746, 32), 16384},
                                   {same_bucket, 4 * kBucketSlots}};
  for (const Case& c : cases) {
    HashTable serial;
    ASSERT_TRUE(HashTable::Build(c.keys, c.min_slots, &serial).ok());
    std::vector<int64_t> queries = MissingKeys(c.keys, 3000, 33);
    queries.insert(queries.end(), c.keys.begin(), c.keys.end());
    for (int threads : {2, 3, 8}) {
      SCOPED_TRACE(testing::Message() << "keys=" << c.keys.size()
                                      << " threads=" << threads);
      HashTable t;
      ASSERT_TRUE(
          HashTable::BuildParallel(c.keys, c.min_slots, Threads(threads, 7), &t)
              .ok());
      EXPECT_EQ(t.num_slots(), serial.num_slots());
      EXPECT_EQ(t.size(), serial.size());
      ExpectValidLayout(t);
      for (int64_t q : queries) {
        ASSERT_EQ(HashLookup(t.view(), q), HashLookup(serial.view(), q))
            << "key " << q;
      }
    }
  }
}

// Random keys with repeats: the error names the first repeating row and
// the row of the key's first occurrence, as Build does, for any thread count.
TEST(HashTableParallelTest, DuplicatesGiveBuildsErrorDeterministically) {
  std::mt19937_64 rng(41);
  for (int trial = 0; trial < 5; ++trial) {
    std::vector<int64_t> keys = DistinctKeys(4000, 42 + trial);
    // Copy a few keys over later rows.
    for (int d = 0; d < 1 + trial; ++d) {
      const size_t from = rng() % keys.size();
      const size_t to = rng() % keys.size();
      if (from != to) keys[to] = keys[from];
    }
    HashTable t;
    const absl::Status serial = HashTable::Build(keys, 0, &t);
    if (serial.ok()) continue;  // the copies happened to land on themselves
    for (int threads : {1, 2, 5}) {
      for (int repeat = 0; repeat < 3; ++repeat) {
        HashTable p;
        const absl::Status s =
            HashTable::BuildParallel(keys, 0, Threads(threads, 13), &p);
        ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
        // Build's message, possibly followed by a count of repeating rows.
        EXPECT_THAT(std::string(s.message()),
                    ::testing::StartsWith(std::string(serial.message())))
            << "threads=" << threads;
      }
    }
  }
  HashTable p;
  const absl::Status s = HashTable::BuildParallel(
      {10, 42, 11, 42, 12, 42, 11}, 0, Threads(3, 1), &p);
  EXPECT_EQ(s.message(),
            "duplicate key 42 at rows 1 and 3 (3 rows in all repeat an "
            "earlier row's key)");
}

TEST(HashTableParallelTest, EmptyKeySentinelAndCapacityErrors) {
  HashTable t;
  // The sentinel at row 4 comes before the repeat at row 5: Build's order.
  const absl::Status s = HashTable::BuildParallel({1, 2, 3, 4, kEmptyKey, 1},
                                                  0, Threads(2, 1), &t);
  EXPECT_THAT(s.message(), HasSubstr("key at row 4"));
  const absl::Status later = HashTable::BuildParallel(
      {1, 2, 1, 4, kEmptyKey}, 0, Threads(2, 1), &t);
  EXPECT_THAT(later.message(), HasSubstr("duplicate key 1 at rows 0 and 2"));
  EXPECT_FALSE(
      HashTable::BuildParallel(DistinctKeys(20, 5), 19, Threads(2), &t).ok());
  ASSERT_TRUE(HashTable::BuildParallel({5, 6, 7}, 0, Threads(2), &t).ok());
  ASSERT_FALSE(HashTable::BuildParallel({1, 1}, 0, Threads(2), &t).ok());
  EXPECT_EQ(t.size(), 3);
  EXPECT_EQ(HashLookup(t.view(), 7), 2);
  ASSERT_TRUE(HashTable::BuildParallel({}, 0, Threads(2), &t).ok());
  EXPECT_EQ(t.size(), 0);
  EXPECT_EQ(HashLookup(t.view(), 7), kMissingRow);
}

TEST(HashTableParallelTest, ProgressCoversEveryKey) {
  const std::vector<int64_t> keys = DistinctKeys(1000, 51);
  std::atomic<int64_t> calls{0};
  std::atomic<int64_t> most{0};
  HashBuildOptions o = Threads(3, 100);
  o.progress = [&](int64_t done) {
    calls.fetch_add(1);
    int64_t cur = most.load();
    while (done > cur && !most.compare_exchange_weak(cur, done)) {
    }
  };
  HashTable t;
  ASSERT_TRUE(HashTable::BuildParallel(keys, 0, o, &t).ok());
  EXPECT_EQ(calls.load(), 10);
  EXPECT_EQ(most.load(), 1000);
}

TEST(HashTableParallelTest, SlotsFor) {
  EXPECT_EQ(HashTable::SlotsFor(1), kBucketSlots);
  EXPECT_EQ(HashTable::SlotsFor(33), 4 * kBucketSlots);
  EXPECT_EQ(HashTable::SlotsFor(int64_t{1} << 28), int64_t{1} << 28);
}

}  // namespace
}  // namespace rankd::kernels
