// A cache shared by several HOST tables, on a GPU: its refresh gives the
// slots to the rows sampled most across all members, moves them when the
// traffic moves, and every slot map entry points at a slot holding exactly
// that row's bytes, each slot owned by one row of one member. Needs a CUDA
// device (tags "manual", "gpu"); skips itself without one.
#include "engine/cuda/embedding_cache.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/gpu_test_util.h"

namespace rankd::engine::cuda {
namespace {

using ::rankd::kernels::cuda::testing::TestSeed;
constexpr int64_t kRowBytes = 48;  // 12 floats

// Mapped pinned rows of one table, byte b of row r = (table, r, b) mixed.
struct HostTable {
  std::string name;
  int64_t rows = 0;
  char* host = nullptr;
  void* device = nullptr;
};

HostTable MakeTable(const std::string& name, int64_t rows, int salt) {
  HostTable t;
  t.name = name;
  t.rows = rows;
  EXPECT_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&t.host), rows * kRowBytes,
                          cudaHostAllocMapped));
  for (int64_t i = 0; i < rows * kRowBytes; ++i) {
    t.host[i] = static_cast<char>((i * 131 + salt * 7919) >> 3);
  }
  EXPECT_CUDA(cudaHostGetDevicePointer(&t.device, t.host, 0));
  return t;
}

// Writes `rows` as member m's sampled accesses (the lookup kernel's job).
void Sample(const EmbeddingCache& cache, int m, const std::vector<int64_t>& rows,
            uint64_t* head) {
  kernels::cuda::DeviceTable d;
  cache.Describe(m, &d);
  const uint64_t mask = d.access_log_mask;
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_CUDA(cudaMemcpy(d.access_log + ((*head + i) & mask), &rows[i], 8, cudaMemcpyHostToDevice));
  }
  *head += rows.size();
  ASSERT_CUDA(cudaMemcpy(d.access_head, head, 8, cudaMemcpyHostToDevice));
}

// Slot map of member m: row -> slot.
std::vector<int32_t> SlotMap(const EmbeddingCache& cache, int m, int64_t rows) {
  kernels::cuda::DeviceTable d;
  cache.Describe(m, &d);
  std::vector<int32_t> map(rows);
  EXPECT_CUDA(cudaMemcpy(map.data(), d.cache_slot, 4 * rows, cudaMemcpyDeviceToHost));
  return map;
}

// Every mapped row's slot holds its bytes, no slot is mapped twice, and the
// per-member counts add up to the occupancy. Returns (member, row) by slot.
std::map<int32_t, std::pair<int, int64_t>> CheckConsistent(const EmbeddingCache& cache,
                                                           const std::vector<HostTable>& tables) {
  kernels::cuda::DeviceTable d;
  cache.Describe(0, &d);
  const EmbeddingCache::Stats st = cache.stats();
  std::vector<char> slots(st.capacity * kRowBytes);
  EXPECT_CUDA(cudaMemcpy(slots.data(), d.cache_rows, slots.size(), cudaMemcpyDeviceToHost));
  std::map<int32_t, std::pair<int, int64_t>> owner;
  int64_t total = 0;
  for (int m = 0; m < static_cast<int>(tables.size()); ++m) {
    const std::vector<int32_t> map = SlotMap(cache, m, tables[m].rows);
    int64_t mapped = 0;
    for (int64_t r = 0; r < tables[m].rows; ++r) {
      const int32_t s = map[r];
      if (s < 0) continue;
      ++mapped;
      EXPECT_LT(s, st.capacity);
      EXPECT_TRUE(owner.emplace(s, std::make_pair(m, r)).second) << "slot " << s << " mapped twice";
      EXPECT_EQ(std::memcmp(slots.data() + s * kRowBytes, tables[m].host + r * kRowBytes, kRowBytes),
                0)
          << tables[m].name << " row " << r << " slot " << s;
    }
    EXPECT_EQ(mapped, cache.cached_rows(m)) << tables[m].name;
    total += mapped;
  }
  EXPECT_EQ(total, st.occupied);
  return owner;
}

class SharedCacheGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kernels::cuda::testing::HaveGpu()) GTEST_SKIP() << "no CUDA device on this machine";
    tables_ = {MakeTable("a", 1000, 1), MakeTable("b", 50, 2), MakeTable("c", 3000, 3)};
  }
  void TearDown() override {
    for (HostTable& t : tables_) cudaFreeHost(t.host);
  }
  std::unique_ptr<EmbeddingCache> Make(std::vector<int64_t> warm, int64_t capacity) {
    std::vector<EmbeddingCache::Member> members;
    for (size_t m = 0; m < tables_.size(); ++m) {
      members.push_back({tables_[m].name, tables_[m].rows, tables_[m].device, warm[m], 1 << 12});
    }
    EmbeddingCache::Options o;
    o.capacity_rows = capacity;
    o.max_changes = 1 << 12;
    auto c = EmbeddingCache::Create(std::move(members), kRowBytes, o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }
  std::vector<HostTable> tables_;
};

TEST_F(SharedCacheGpuTest, WarmStartThenSlotsFollowTheHottestRowsOfAnyTable) {
  auto cache = Make({10, 5, 10}, 25);
  ASSERT_NE(cache, nullptr);
  EXPECT_EQ(cache->stats().capacity, 25);
  EXPECT_EQ(cache->stats().occupied, 25);
  EXPECT_EQ(cache->cached_rows(0), 10);
  EXPECT_EQ(cache->cached_rows(1), 5);
  EXPECT_EQ(cache->cached_rows(2), 10);
  CheckConsistent(*cache, tables_);

  // Table b's rows 0..24 are hot: they take every slot from a and c.
  std::vector<uint64_t> head(3, 0);
  std::vector<int64_t> hot_b;
  for (int rep = 0; rep < 4; ++rep) {
    for (int64_t r = 0; r < 25; ++r) hot_b.push_back(r);
  }
  Sample(*cache, 1, hot_b, &head[1]);
  Sample(*cache, 0, {999, 999}, &head[0]);  // colder than every hot b row
  ASSERT_TRUE(cache->Refresh(nullptr, nullptr).ok());
  EXPECT_EQ(cache->cached_rows(1), 25);
  EXPECT_EQ(cache->cached_rows(0), 0);
  EXPECT_EQ(cache->cached_rows(2), 0);
  auto owner = CheckConsistent(*cache, tables_);
  for (const auto& [slot, who] : owner) {
    EXPECT_EQ(who.first, 1);
    EXPECT_LT(who.second, 25);
  }

  // Traffic moves to c's rows 2000..2009 (hotter still): they take 10 slots
  // from b, whose other 15 rows stay.
  std::vector<int64_t> hot_c;
  for (int rep = 0; rep < 50; ++rep) {
    for (int64_t r = 2000; r < 2010; ++r) hot_c.push_back(r);
  }
  Sample(*cache, 2, hot_c, &head[2]);
  ASSERT_TRUE(cache->Refresh(nullptr, nullptr).ok());
  EXPECT_EQ(cache->cached_rows(2), 10);
  EXPECT_EQ(cache->cached_rows(1), 15);
  owner = CheckConsistent(*cache, tables_);
  for (int64_t r = 2000; r < 2010; ++r) EXPECT_GE(SlotMap(*cache, 2, 3000)[r], 0);
  EXPECT_EQ(cache->stats().occupied, 25);
}

TEST_F(SharedCacheGpuTest, RandomTrafficKeepsEverySlotConsistent) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto cache = Make({0, 0, 0}, 200);
  ASSERT_NE(cache, nullptr);
  EXPECT_EQ(cache->stats().occupied, 0);
  std::vector<uint64_t> head(3, 0);
  for (int round = 0; round < 12; ++round) {
    // Skewed ids, the member mix shifting with the round.
    for (int m = 0; m < 3; ++m) {
      std::vector<int64_t> rows;
      const int n = static_cast<int>(rng() % 400) + (m == round % 3 ? 600 : 0);
      for (int i = 0; i < n; ++i) {
        const double u = std::uniform_real_distribution<double>(0, 1)(rng);
        rows.push_back(static_cast<int64_t>(std::pow(u, 3.0) * tables_[m].rows));
      }
      if (m == 0 && round == 5) rows.push_back(-3);   // out of range: ignored
      if (m == 1 && round == 7) rows.push_back(5000);  // past b's rows: ignored
      Sample(*cache, m, rows, &head[m]);
    }
    ASSERT_TRUE(cache->Refresh(nullptr, nullptr).ok());
    CheckConsistent(*cache, tables_);
  }
  EXPECT_EQ(cache->stats().occupied, 200);
  EXPECT_EQ(cache->stats().refreshes, 12);
}

}  // namespace
}  // namespace rankd::engine::cuda
