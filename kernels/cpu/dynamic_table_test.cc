// Dynamic tables (kernels/cpu/dynamic_table.h) on the CPU: LRU / LFU eviction
// with explicit `now` values, score touches by serving lookups
// (PoolEmbeddings), ties by key, erase + reinsert, tombstones and rehash
// against a std::unordered_map model on random streams, counters; and the
// row-scatter twins (kernels/cpu/row_scatter.h).
#include "kernels/cpu/dynamic_table.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/embedding_pool.h"
#include "kernels/cpu/hash_table.h"
#include "kernels/cpu/row_scatter.h"
#include "kernels/cpu/types.h"

namespace rankd::kernels {
namespace {

constexpr int kDim = 4;
constexpr int64_t kRowBytes = kDim * sizeof(float);

// Row of key k written at "version" ver: distinct per (key, version).
std::vector<float> RowFor(int64_t key, int ver) {
  std::vector<float> r(kDim);
  for (int d = 0; d < kDim; ++d) r[d] = static_cast<float>((key % 1000003) * 7 + ver * 13 + d);
  return r;
}

std::vector<float> Rows(const std::vector<int64_t>& keys, int ver) {
  std::vector<float> out;
  for (int64_t k : keys) {
    std::vector<float> r = RowFor(k, ver);
    out.insert(out.end(), r.begin(), r.end());
  }
  return out;
}

DynamicStats Upsert(const DynamicTableView& v, const std::vector<int64_t>& keys, int ver,
                    EvictionPolicy policy, uint64_t now, std::vector<int64_t>* evicted = nullptr) {
  EXPECT_TRUE(CheckUpsertKeys(keys, v.max_keys).ok());
  std::vector<float> src = Rows(keys, ver);
  std::vector<int64_t> ev(keys.size() + 1, 777);  // poisoned
  DynamicStats s = DynamicUpsert(v, keys, src.data(), policy, now, ev.data());
  EXPECT_EQ(ev[s.evicted], 777) << "wrote past the evicted keys";
  if (evicted != nullptr) evicted->assign(ev.begin(), ev.begin() + s.evicted);
  EXPECT_TRUE(ValidateDynamicTable(v).ok()) << ValidateDynamicTable(v);
  return s;
}

std::set<int64_t> StoredKeys(const DynamicTableView& v) {
  std::set<int64_t> s;
  for (int64_t r = 0; r < v.max_keys; ++r) {
    if (v.row_keys[r] != kEmptyKey) s.insert(v.row_keys[r]);
  }
  return s;
}

const float* RowOf(const DynamicTableView& v, int64_t key) {
  const HashTableView hv = AsHashTableView(v);
  const int64_t row = HashLookup(hv, key);
  if (row < 0) return nullptr;
  return reinterpret_cast<const float*>(static_cast<const char*>(v.rows) + row * v.row_bytes);
}

uint64_t ScoreOf(const DynamicTableView& v, int64_t key) {
  const int64_t row = HashLookup(AsHashTableView(v), key);
  EXPECT_GE(row, 0) << key;
  return row >= 0 ? v.scores[row] : ~0ull;
}

// Pools one bag of `keys` through PoolEmbeddings with scoring on.
void Lookup(const DynamicTableView& v, const std::vector<int64_t>& keys, EvictionPolicy policy,
            uint64_t now) {
  const HashTableView hv = AsHashTableView(v);
  PoolTable t;
  t.rows = v.rows;
  t.row_type = RowType::kFp32;
  t.num_rows = v.max_keys;
  t.dim = kDim;
  t.hash = &hv;
  t.scores = v.scores;
  t.score_policy = policy;
  t.score_now = now;
  std::vector<int64_t> offsets = {0, static_cast<int64_t>(keys.size())};
  PoolBags bags;
  bags.ids = keys.data();
  bags.offsets = offsets.data();
  bags.num_bags = 1;
  std::vector<float> out(kDim);
  PoolEmbeddings(t, bags, out.data(), kDim);
}

TEST(DynamicTableTest, InitAndErrors) {
  DynamicTableStorage st;
  ASSERT_TRUE(DynamicTableStorage::Create(10, 0, kRowBytes, &st).ok());
  const DynamicTableView& v = st.view();
  EXPECT_EQ(v.counters->free_count, 10);
  EXPECT_FALSE(InitDynamicTable(v, {1, 2, 1}).ok());
  EXPECT_FALSE(InitDynamicTable(v, {1, kDeletedKey}).ok());
  EXPECT_FALSE(InitDynamicTable(v, {kEmptyKey}).ok());
  EXPECT_FALSE(InitDynamicTable(v, std::vector<int64_t>(11, 5)).ok());
  ASSERT_TRUE(InitDynamicTable(v, {5, -7, 9}).ok());
  ASSERT_TRUE(ValidateDynamicTable(v).ok());
  EXPECT_EQ(v.counters->size, 3);
  EXPECT_EQ(HashLookup(AsHashTableView(v), -7), 1);
  // Pops give rows 3, 4, ... in order.
  Upsert(v, {100, 101}, 0, EvictionPolicy::kLru, 1);
  EXPECT_EQ(HashLookup(AsHashTableView(v), 100), 3);
  EXPECT_EQ(HashLookup(AsHashTableView(v), 101), 4);
  EXPECT_FALSE(CheckUpsertKeys({1, 2, 1}, 10).ok());
  EXPECT_FALSE(CheckUpsertKeys({kDeletedKey}, 10).ok());
  EXPECT_FALSE(CheckUpsertKeys({1, 2, 3}, 2).ok());
}

TEST(DynamicTableTest, LruEvictsLeastRecentlyUsed) {
  constexpr int64_t kCap = 64;
  DynamicTableStorage st;
  ASSERT_TRUE(DynamicTableStorage::Create(kCap, 0, kRowBytes, &st).ok());
  const DynamicTableView& v = st.view();
  std::mt19937_64 rng(1);
  std::vector<int64_t> order;  // keys in insertion (= recency) order
  for (int64_t i = 0; i < kCap; ++i) {
    const int64_t key = static_cast<int64_t>(rng());
    order.push_back(key);
    DynamicStats s = Upsert(v, {key}, 0, EvictionPolicy::kLru, 100 + i);
    EXPECT_EQ(s.inserted, 1);
    EXPECT_EQ(s.evicted, 0);
  }
  // k new keys at later times: exactly the k oldest are evicted.
  constexpr int kNew = 5;
  std::vector<int64_t> fresh;
  for (int i = 0; i < kNew; ++i) fresh.push_back(-1000 - i);
  std::vector<int64_t> evicted;
  DynamicStats s = Upsert(v, fresh, 1, EvictionPolicy::kLru, 1000, &evicted);
  EXPECT_EQ(s.inserted, kNew);
  EXPECT_EQ(s.evicted, kNew);
  EXPECT_EQ(evicted, std::vector<int64_t>(order.begin(), order.begin() + kNew));
  for (int i = 0; i < kNew; ++i) {
    EXPECT_EQ(RowOf(v, order[i]), nullptr);
    ASSERT_NE(RowOf(v, fresh[i]), nullptr);
    EXPECT_EQ(std::memcmp(RowOf(v, fresh[i]), RowFor(fresh[i], 1).data(), kRowBytes), 0);
    EXPECT_EQ(ScoreOf(v, fresh[i]), 1000u);
  }
  EXPECT_EQ(v.counters->size, kCap);
}

TEST(DynamicTableTest, LookupsRefreshLruScores) {
  constexpr int64_t kCap = 32;
  DynamicTableStorage st;
  ASSERT_TRUE(DynamicTableStorage::Create(kCap, 0, kRowBytes, &st).ok());
  const DynamicTableView& v = st.view();
  std::vector<int64_t> keys;
  for (int64_t i = 0; i < kCap; ++i) {
    keys.push_back(i * 31 + 5);
    Upsert(v, {keys.back()}, 0, EvictionPolicy::kLru, 10 + i);
  }
  // Serving reads the three oldest keys (and a missing one) at time 500.
  Lookup(v, {keys[0], keys[1], keys[2], 999999}, EvictionPolicy::kLru, 500);
  EXPECT_EQ(ScoreOf(v, keys[0]), 500u);
  // An older `now` never moves a score back.
  Lookup(v, {keys[0]}, EvictionPolicy::kLru, 400);
  EXPECT_EQ(ScoreOf(v, keys[0]), 500u);
  std::vector<int64_t> evicted;
  Upsert(v, {-1, -2, -3}, 0, EvictionPolicy::kLru, 600, &evicted);
  EXPECT_EQ(evicted, (std::vector<int64_t>{keys[3], keys[4], keys[5]}));
  for (int i = 0; i < 3; ++i) EXPECT_NE(RowOf(v, keys[i]), nullptr);
  // Scoring off: no touch.
  Lookup(v, {keys[6]}, EvictionPolicy::kNone, 5000);
  EXPECT_EQ(ScoreOf(v, keys[6]), 16u);
}

TEST(DynamicTableTest, LfuEvictsLeastFrequentlyUsed) {
  constexpr int64_t kCap = 16;
  DynamicTableStorage st;
  ASSERT_TRUE(DynamicTableStorage::Create(kCap, 0, kRowBytes, &st).ok());
  const DynamicTableView& v = st.view();
  std::vector<int64_t> keys;
  for (int64_t i = 0; i < kCap; ++i) keys.push_back(1000 - i * 3);
  Upsert(v, keys, 0, EvictionPolicy::kLfu, 0);
  for (int64_t k : keys) EXPECT_EQ(ScoreOf(v, k), 1u);
  // Key i is used i times more (upserts and lookups both count).
  for (int64_t i = 0; i < kCap; ++i) {
    std::vector<int64_t> bag(i / 2, keys[i]);
    Lookup(v, bag, EvictionPolicy::kLfu, 0);
    for (int64_t j = 0; j < i - i / 2; ++j) Upsert(v, {keys[i]}, 1, EvictionPolicy::kLfu, 0);
    EXPECT_EQ(ScoreOf(v, keys[i]), static_cast<uint64_t>(1 + i));
  }
  std::vector<int64_t> evicted;
  DynamicStats s = Upsert(v, {1, 2, 3, 4}, 2, EvictionPolicy::kLfu, 0, &evicted);
  EXPECT_EQ(s.evicted, 4);
  EXPECT_EQ(evicted, (std::vector<int64_t>{keys[0], keys[1], keys[2], keys[3]}));
  EXPECT_EQ(ScoreOf(v, 3), 1u);
  // Existing key updated: +1.
  Upsert(v, {keys[10]}, 3, EvictionPolicy::kLfu, 0);
  EXPECT_EQ(ScoreOf(v, keys[10]), 12u);
}

TEST(DynamicTableTest, TiesBrokenBySmallerKey) {
  constexpr int64_t kCap = 40;
  DynamicTableStorage st;
  ASSERT_TRUE(DynamicTableStorage::Create(kCap, 0, kRowBytes, &st).ok());
  const DynamicTableView& v = st.view();
  std::vector<int64_t> keys;
  std::mt19937_64 rng(7);
  for (int64_t i = 0; i < kCap; ++i) keys.push_back(static_cast<int64_t>(rng()));
  Upsert(v, keys, 0, EvictionPolicy::kLru, 5);  // one call: all scores equal
  std::vector<int64_t> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> evicted;
  Upsert(v, {1, 2, 3, 4, 5, 6, 7}, 0, EvictionPolicy::kLru, 6, &evicted);
  EXPECT_EQ(evicted, std::vector<int64_t>(sorted.begin(), sorted.begin() + 7));
}

TEST(DynamicTableTest, UpdatedKeyIsNotEvictedByItsOwnCall) {
  constexpr int64_t kCap = 8;
  DynamicTableStorage st;
  ASSERT_TRUE(DynamicTableStorage::Create(kCap, 0, kRowBytes, &st).ok());
  const DynamicTableView& v = st.view();
  for (int64_t i = 0; i < kCap; ++i) Upsert(v, {i}, 0, EvictionPolicy::kLru, i);
  // Key 0 is the oldest, but this call assigns it: key 1 goes instead.
  std::vector<int64_t> evicted;
  DynamicStats s = Upsert(v, {50, 0, 51}, 9, EvictionPolicy::kLru, 100, &evicted);
  EXPECT_EQ(s.updated, 1);
  EXPECT_EQ(s.inserted, 2);
  EXPECT_EQ(evicted, (std::vector<int64_t>{1, 2}));
  ASSERT_NE(RowOf(v, 0), nullptr);
  EXPECT_EQ(std::memcmp(RowOf(v, 0), RowFor(0, 9).data(), kRowBytes), 0);
  EXPECT_EQ(ScoreOf(v, 0), 100u);
  // A call of max_keys keys, all but one new: everything else goes.
  std::vector<int64_t> big = {3};
  for (int64_t i = 0; i < kCap - 1; ++i) big.push_back(200 + i);
  s = Upsert(v, big, 1, EvictionPolicy::kLru, 200, &evicted);
  EXPECT_EQ(s.evicted, kCap - 1);
  EXPECT_EQ(StoredKeys(v), std::set<int64_t>(big.begin(), big.end()));
}

TEST(DynamicTableTest, EraseThenReinsertAndTombstonesAreProbedPast) {
  // One bucket: every key shares the probe path.
  DynamicTableStorage st;
  ASSERT_TRUE(DynamicTableStorage::Create(12, 16, kRowBytes, &st).ok());
  const DynamicTableView& v = st.view();
  ASSERT_EQ(v.num_buckets, 1);
  std::vector<int64_t> keys = {10, 11, 12, 13, 14, 15};
  Upsert(v, keys, 0, EvictionPolicy::kLru, 1);
  DynamicStats e = DynamicErase(v, {10, 12, 99, 10, kEmptyKey, kDeletedKey});
  EXPECT_EQ(e.deleted, 2);
  EXPECT_EQ(e.not_found, 4);
  ASSERT_TRUE(ValidateDynamicTable(v).ok());
  EXPECT_EQ(v.counters->tombstones, 2);
  EXPECT_EQ(v.counters->size, 4);
  EXPECT_EQ(v.slot_keys[0], kDeletedKey);
  // Keys after the tombstones are still found; erased ones miss.
  for (int64_t k : {11, 13, 14, 15}) {
    ASSERT_NE(RowOf(v, k), nullptr) << k;
    EXPECT_EQ(std::memcmp(RowOf(v, k), RowFor(k, 0).data(), kRowBytes), 0);
  }
  EXPECT_EQ(RowOf(v, 10), nullptr);
  EXPECT_EQ(RowOf(v, 12), nullptr);
  // A lookup of the tombstone value itself resolves to missing.
  EXPECT_EQ(HashLookup(AsHashTableView(v), kDeletedKey), kMissingRow);
  // Reinsert: the first tombstone is reused, the row holds the new bytes.
  DynamicStats s = Upsert(v, {12}, 5, EvictionPolicy::kLru, 2);
  EXPECT_EQ(s.inserted, 1);
  EXPECT_EQ(v.slot_keys[0], 12);
  EXPECT_EQ(v.counters->tombstones, 1);
  EXPECT_EQ(std::memcmp(RowOf(v, 12), RowFor(12, 5).data(), kRowBytes), 0);
  // Filling past 3/4 of the slots with a tombstone around rehashes.
  s = Upsert(v, {20, 21, 22, 23, 24, 25, 26}, 0, EvictionPolicy::kLru, 3);
  EXPECT_EQ(s.rehashes, 1);
  EXPECT_EQ(v.counters->tombstones, 0);
  for (int64_t k : {11, 12, 13, 14, 15, 20, 26}) EXPECT_NE(RowOf(v, k), nullptr) << k;
}

// Model of a table: key -> (row bytes version, score).
struct Model {
  std::map<int64_t, std::pair<int, uint64_t>> entries;
};

void RandomStream(int64_t cap, int64_t min_slots, EvictionPolicy policy, uint64_t seed,
                  bool expect_rehash = true) {
  DynamicTableStorage st;
  ASSERT_TRUE(DynamicTableStorage::Create(cap, min_slots, kRowBytes, &st).ok());
  const DynamicTableView& v = st.view();
  Model m;
  std::mt19937_64 rng(seed);
  const int64_t key_space = cap * 3;
  uint64_t now = 1;
  int64_t total_evicted = 0, total_rehashes = 0;
  for (int step = 0; step < 400; ++step) {
    const int op = static_cast<int>(rng() % 10);
    std::uniform_int_distribution<int64_t> key_dist(-key_space, key_space);
    if (op < 3) {  // erase
      std::vector<int64_t> keys(1 + rng() % 8);
      for (int64_t& k : keys) k = key_dist(rng);
      int64_t expect_deleted = 0;
      std::set<int64_t> seen;
      for (int64_t k : keys) {
        if (seen.insert(k).second && m.entries.erase(k) > 0) ++expect_deleted;
      }
      DynamicStats s = DynamicErase(v, keys);
      ASSERT_EQ(s.deleted, expect_deleted);
      ASSERT_EQ(s.not_found, static_cast<int64_t>(keys.size()) - expect_deleted);
    } else if (op < 5) {  // lookups touch scores
      std::vector<int64_t> keys(1 + rng() % 16);
      for (int64_t& k : keys) k = key_dist(rng);
      ++now;
      Lookup(v, keys, policy, now);
      for (int64_t k : keys) {
        auto it = m.entries.find(k);
        if (it == m.entries.end()) continue;
        if (policy == EvictionPolicy::kLru) it->second.second = std::max(it->second.second, now);
        if (policy == EvictionPolicy::kLfu) it->second.second += 1;
      }
    } else {  // upsert
      std::set<int64_t> kset;
      const int64_t want = 1 + static_cast<int64_t>(rng() % std::min<int64_t>(cap, 24));
      while (static_cast<int64_t>(kset.size()) < want) kset.insert(key_dist(rng));
      std::vector<int64_t> keys(kset.begin(), kset.end());
      std::shuffle(keys.begin(), keys.end(), rng);
      ++now;
      const int ver = step;
      // Model: evict the smallest (score, key) not in the call.
      int64_t new_count = 0;
      for (int64_t k : keys) new_count += m.entries.count(k) == 0;
      const int64_t need =
          std::max<int64_t>(0, new_count - (cap - static_cast<int64_t>(m.entries.size())));
      std::vector<std::tuple<uint64_t, int64_t>> cands;
      for (const auto& [k, e] : m.entries) {
        if (!kset.count(k)) cands.emplace_back(e.second, k);
      }
      std::sort(cands.begin(), cands.end());
      std::vector<int64_t> expect_evicted;
      for (int64_t j = 0; j < need; ++j) {
        expect_evicted.push_back(std::get<1>(cands[j]));
        m.entries.erase(std::get<1>(cands[j]));
      }
      for (int64_t k : keys) {
        auto it = m.entries.find(k);
        uint64_t score = 0;
        if (it == m.entries.end()) {
          score = policy == EvictionPolicy::kLru ? now : policy == EvictionPolicy::kLfu ? 1 : 0;
        } else {
          score = policy == EvictionPolicy::kLru   ? now
                  : policy == EvictionPolicy::kLfu ? it->second.second + 1
                                                   : it->second.second;
        }
        m.entries[k] = {ver, score};
      }
      std::vector<int64_t> evicted;
      DynamicStats s = Upsert(v, keys, ver, policy, now, &evicted);
      ASSERT_EQ(s.inserted, new_count);
      ASSERT_EQ(s.updated, static_cast<int64_t>(keys.size()) - new_count);
      ASSERT_EQ(evicted, expect_evicted) << "step " << step;
      ASSERT_EQ(s.failed, 0);
      total_evicted += s.evicted;
      total_rehashes += s.rehashes;
    }
    ASSERT_TRUE(ValidateDynamicTable(v).ok()) << ValidateDynamicTable(v) << " step " << step;
    ASSERT_EQ(v.counters->size, static_cast<int64_t>(m.entries.size()));
    // Every model key found with its bytes and score; others miss.
    for (int64_t k = -key_space; k <= key_space; ++k) {
      auto it = m.entries.find(k);
      const float* row = RowOf(v, k);
      if (it == m.entries.end()) {
        ASSERT_EQ(row, nullptr) << "key " << k << " step " << step;
        continue;
      }
      ASSERT_NE(row, nullptr) << "key " << k << " step " << step;
      ASSERT_EQ(std::memcmp(row, RowFor(k, it->second.first).data(), kRowBytes), 0);
      ASSERT_EQ(ScoreOf(v, k), it->second.second) << "key " << k;
    }
  }
  EXPECT_GT(total_evicted, 0);
  if (expect_rehash) {
    EXPECT_GT(total_rehashes, 0) << "the stream should have crossed the rehash threshold";
  }
}

TEST(DynamicTableTest, RandomStreamLruMatchesModel) {
  RandomStream(100, 128, EvictionPolicy::kLru, 11);
}
TEST(DynamicTableTest, RandomStreamLfuMatchesModel) {
  RandomStream(100, 128, EvictionPolicy::kLfu, 12);
}
TEST(DynamicTableTest, RandomStreamFullSlotsMatchesModel) {
  // max_keys == num_slots: probes end by their bound, not an empty slot.
  RandomStream(64, 64, EvictionPolicy::kLru, 13);
}
TEST(DynamicTableTest, RandomStreamNoPolicyEvictsSmallestKeys) {
  RandomStream(50, 0, EvictionPolicy::kNone, 14, /*expect_rehash=*/false);
}

TEST(RowScatterTest, ScatterRowsAndCacheWriteThrough) {
  constexpr int64_t kRows = 50, kBytes = 24;
  std::mt19937_64 rng(3);
  std::vector<uint8_t> table(kRows * kBytes);
  for (auto& b : table) b = static_cast<uint8_t>(rng());
  std::vector<uint8_t> expect = table;
  std::vector<int64_t> ids = {7, 0, 49, 13};
  std::vector<uint8_t> src(ids.size() * kBytes);
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  for (size_t i = 0; i < ids.size(); ++i) {
    std::memcpy(&expect[ids[i] * kBytes], &src[i * kBytes], kBytes);
  }
  ScatterRows(table.data(), kBytes, ids.data(), static_cast<int64_t>(ids.size()), src.data());
  EXPECT_EQ(table, expect);

  // Cache of 4 slots: rows 7 -> 2, 13 -> 0, 20 -> 1 cached.
  std::vector<int32_t> slot(kRows, -1);
  slot[7] = 2;
  slot[13] = 0;
  slot[20] = 1;
  std::vector<uint8_t> cache(4 * kBytes, 0xcd);  // poisoned
  std::vector<uint8_t> expect_cache = cache;
  std::memcpy(&expect_cache[2 * kBytes], &src[0 * kBytes], kBytes);
  std::memcpy(&expect_cache[0 * kBytes], &src[3 * kBytes], kBytes);
  CacheWriteThrough(slot.data(), cache.data(), kBytes, ids.data(),
                    static_cast<int64_t>(ids.size()), src.data());
  EXPECT_EQ(cache, expect_cache);
}

}  // namespace
}  // namespace rankd::kernels
