// The GPU hash build against its CPU twin (HashTable::Build): on random keys
// of both signs at load factors 0.5 and 0.9, every key looks up to its row in
// the GPU-built arrays (checked with the CPU HashLookup on the copied arrays
// and with the GPU lookup kernel), keys not stored miss exactly as in the
// CPU-built table, and duplicates / kEmptyKey are reported with the smallest
// bad row. Needs a CUDA device (tags "manual", "gpu").
#include <cuda_runtime_api.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <unordered_set>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/gpu_test_util.h"
#include "kernels/cpu/hash_table.h"
#include "kernels/cuda/embedding_lookup.h"
#include "kernels/cuda/hash_build.h"

namespace rankd::kernels::cuda {
namespace {

using ::rankd::kernels::cuda::testing::TestSeed;

struct GpuBuild {
  std::vector<int64_t> slot_keys, slot_rows;
  int64_t num_buckets = 0;
  unsigned long long bad = 0;
  long long bad_row = LLONG_MAX;
};

void Build(const std::vector<int64_t>& keys, int64_t min_slots, GpuBuild* out) {
  const int64_t slots = HashTable::SlotsFor(min_slots);
  out->num_buckets = slots / kBucketSlots;
  int64_t *d_keys = nullptr, *d_rows = nullptr, *d_in = nullptr;
  unsigned long long* d_bad = nullptr;
  ASSERT_CUDA(cudaMalloc(reinterpret_cast<void**>(&d_keys), 8 * slots));
  ASSERT_CUDA(cudaMalloc(reinterpret_cast<void**>(&d_rows), 8 * slots));
  ASSERT_CUDA(cudaMemset(d_rows, 0x5a, 8 * slots));  // poison
  ASSERT_CUDA(cudaMalloc(reinterpret_cast<void**>(&d_in), 8 * std::max<size_t>(1, keys.size())));
  ASSERT_CUDA(cudaMalloc(reinterpret_cast<void**>(&d_bad), 16));
  const unsigned long long init[2] = {0, static_cast<unsigned long long>(LLONG_MAX)};
  ASSERT_CUDA(cudaMemcpy(d_bad, init, 16, cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemcpy(d_in, keys.data(), 8 * keys.size(), cudaMemcpyHostToDevice));
  ASSERT_CUDA(LaunchHashClear(d_keys, slots, nullptr));
  ASSERT_CUDA(LaunchHashInsert(d_keys, d_rows, out->num_buckets, d_in,
                               static_cast<int64_t>(keys.size()), d_bad, nullptr));
  ASSERT_CUDA(cudaDeviceSynchronize());
  out->slot_keys.resize(slots);
  out->slot_rows.resize(slots);
  ASSERT_CUDA(cudaMemcpy(out->slot_keys.data(), d_keys, 8 * slots, cudaMemcpyDeviceToHost));
  ASSERT_CUDA(cudaMemcpy(out->slot_rows.data(), d_rows, 8 * slots, cudaMemcpyDeviceToHost));
  unsigned long long bad[2];
  ASSERT_CUDA(cudaMemcpy(bad, d_bad, 16, cudaMemcpyDeviceToHost));
  out->bad = bad[0];
  out->bad_row = static_cast<long long>(bad[1]);
  cudaFree(d_keys);
  cudaFree(d_rows);
  cudaFree(d_in);
  cudaFree(d_bad);
}

TEST(HashBuildGpuTest, LookupsMatchTheCpuBuild) {
  SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (double load : {0.5, 0.9}) {
    for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{200000}}) {
      std::vector<int64_t> keys;
      std::unordered_set<int64_t> seen;
      while (static_cast<int64_t>(keys.size()) < n) {
        const int64_t k = static_cast<int64_t>(rng());
        if (k != kEmptyKey && seen.insert(k).second) keys.push_back(k);
      }
      const int64_t min_slots = std::max<int64_t>(n, static_cast<int64_t>(n / load));
      GpuBuild g;
      Build(keys, min_slots, &g);
      ASSERT_EQ(g.bad, 0u) << "n " << n;
      HashTable cpu;
      ASSERT_TRUE(HashTable::Build(keys, min_slots, &cpu).ok());
      ASSERT_EQ(cpu.num_slots(), static_cast<int64_t>(g.slot_keys.size()));
      const HashTableView gv{g.slot_keys.data(), g.slot_rows.data(), g.num_buckets};
      const HashTableView cv = cpu.view();
      for (int64_t r = 0; r < n; ++r) {
        ASSERT_EQ(HashLookup(gv, keys[r]), r) << "key of row " << r;
      }
      // Keys not stored miss in both tables.
      for (int i = 0; i < 1000; ++i) {
        const int64_t k = static_cast<int64_t>(rng());
        if (seen.count(k) != 0) continue;
        ASSERT_EQ(HashLookup(gv, k), HashLookup(cv, k));
        ASSERT_EQ(HashLookup(gv, k), kMissingRow);
      }
      // The GPU lookup kernel reads the GPU-built arrays the same way.
      int64_t *d_keys = nullptr, *d_rows = nullptr, *d_q = nullptr, *d_out = nullptr;
      const size_t slots = g.slot_keys.size();
      ASSERT_CUDA(cudaMalloc(reinterpret_cast<void**>(&d_keys), 8 * slots));
      ASSERT_CUDA(cudaMalloc(reinterpret_cast<void**>(&d_rows), 8 * slots));
      ASSERT_CUDA(cudaMalloc(reinterpret_cast<void**>(&d_q), 8 * n));
      ASSERT_CUDA(cudaMalloc(reinterpret_cast<void**>(&d_out), 8 * n));
      ASSERT_CUDA(cudaMemcpy(d_keys, g.slot_keys.data(), 8 * slots, cudaMemcpyHostToDevice));
      ASSERT_CUDA(cudaMemcpy(d_rows, g.slot_rows.data(), 8 * slots, cudaMemcpyHostToDevice));
      ASSERT_CUDA(cudaMemcpy(d_q, keys.data(), 8 * n, cudaMemcpyHostToDevice));
      ASSERT_CUDA(LaunchHashLookup(HashTableView{d_keys, d_rows, g.num_buckets}, d_q, n, d_out,
                                   nullptr));
      std::vector<int64_t> rows(n);
      ASSERT_CUDA(cudaMemcpy(rows.data(), d_out, 8 * n, cudaMemcpyDeviceToHost));
      for (int64_t r = 0; r < n; ++r) ASSERT_EQ(rows[r], r);
      cudaFree(d_keys);
      cudaFree(d_rows);
      cudaFree(d_q);
      cudaFree(d_out);
    }
  }
}

TEST(HashBuildGpuTest, ReportsDuplicatesAndTheEmptyKey) {
  SKIP_WITHOUT_GPU();
  std::vector<int64_t> keys;
  for (int64_t r = 0; r < 5000; ++r) keys.push_back(r * 7919 + 1);
  keys[4000] = keys[10];   // duplicate: row 4000 repeats row 10
  keys[4500] = keys[11];   // and row 4500 repeats row 11
  keys[3000] = kEmptyKey;  // the empty-slot sentinel cannot be stored
  GpuBuild g;
  Build(keys, 0 + 2 * 5000, &g);
  // The duplicate pairs race: whichever of the two is inserted second is bad.
  EXPECT_EQ(g.bad, 3u);
  EXPECT_LE(g.bad_row, 3000);
}

TEST(HashBuildGpuTest, ReportsAFullTable) {
  SKIP_WITHOUT_GPU();
  std::vector<int64_t> keys;
  for (int64_t r = 0; r < 40; ++r) keys.push_back(r + 100);
  GpuBuild g;
  Build(keys, 32, &g);  // 2 buckets = 32 slots for 40 keys
  EXPECT_EQ(g.bad, 8u);
}

}  // namespace
}  // namespace rankd::kernels::cuda
