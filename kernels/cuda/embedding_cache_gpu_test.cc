// GPU tests of the embedding cache's maintenance kernels against their CPU
// twins (kernels/cpu/embedding_cache.h), on random inputs with poisoned
// outputs, odd row sizes, source rows in device and in mapped host memory.
// Needs a CUDA device (tags "manual", "gpu"); skips itself without one.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/gpu_test_util.h"
#include "kernels/cpu/embedding_cache.h"
#include "kernels/cuda/embedding_cache.h"

namespace rankd::kernels::cuda {
namespace {

using ::rankd::kernels::cuda::testing::TestSeed;

template <typename T>
T* ToDevice(const std::vector<T>& v) {
  void* p = nullptr;
  if (cudaMalloc(&p, std::max<size_t>(1, v.size() * sizeof(T))) != cudaSuccess) return nullptr;
  if (!v.empty()) cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
  return static_cast<T*>(p);
}

template <typename T>
std::vector<T> ToHost(const T* p, size_t n) {
  std::vector<T> v(n);
  cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
  return v;
}

TEST(EmbeddingCacheGpuTest, SetSlotsMatchesCpu) {
  SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t num_rows = 1 + static_cast<int64_t>(rng() % 5000);
    std::vector<int32_t> map(num_rows);
    for (auto& m : map) m = static_cast<int32_t>(rng() % 1000) - 500;  // poison, both signs
    // Distinct rows, plus a few out of range (skipped).
    std::vector<int64_t> rows;
    std::vector<int32_t> slots;
    for (int64_t r = 0; r < num_rows; ++r) {
      if (rng() % 3 == 0) {
        rows.push_back(r);
        slots.push_back(rng() % 4 == 0 ? -1 : static_cast<int32_t>(rng() % 100000));
      }
    }
    for (int i = 0; i < 3; ++i) {
      rows.push_back(i == 0 ? -1 : num_rows + i);
      slots.push_back(7);
    }
    for (size_t i = rows.size(); i > 1; --i) {  // shuffle the pairs
      const size_t j = rng() % i;
      std::swap(rows[i - 1], rows[j]);
      std::swap(slots[i - 1], slots[j]);
    }
    std::vector<int32_t> expected = map;
    SetCacheSlots(expected.data(), num_rows, rows.data(), slots.data(),
                  static_cast<int64_t>(rows.size()));
    int32_t* d_map = ToDevice(map);
    int64_t* d_rows = ToDevice(rows);
    int32_t* d_slots = ToDevice(slots);
    ASSERT_CUDA(LaunchSetCacheSlots(d_map, num_rows, d_rows, d_slots,
                                    static_cast<int64_t>(rows.size()), nullptr));
    ASSERT_CUDA(cudaDeviceSynchronize());
    EXPECT_EQ(ToHost(d_map, num_rows), expected) << "trial " << trial;
    cudaFree(d_map);
    cudaFree(d_rows);
    cudaFree(d_slots);
  }
}

TEST(EmbeddingCacheGpuTest, FillRowsMatchesCpu) {
  SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int64_t row_bytes : {int64_t{512}, int64_t{256}, int64_t{12}, int64_t{1040}, int64_t{2}}) {
    for (bool mapped_source : {false, true}) {
      const int64_t num_rows = 100 + static_cast<int64_t>(rng() % 900);
      const int64_t capacity = 1 + static_cast<int64_t>(rng() % num_rows);
      std::vector<uint8_t> src(num_rows * row_bytes);
      for (auto& b : src) b = static_cast<uint8_t>(rng());
      std::vector<uint8_t> cache(capacity * row_bytes, 0xAB);  // poison
      std::vector<int64_t> rows;
      std::vector<int32_t> slots;
      for (int64_t s = 0; s < capacity; ++s) {
        if (rng() % 2 == 0) continue;
        rows.push_back(static_cast<int64_t>(rng() % num_rows));
        slots.push_back(static_cast<int32_t>(s));
      }
      rows.push_back(num_rows);  // out of range: skipped
      slots.push_back(0);
      rows.push_back(0);
      slots.push_back(static_cast<int32_t>(capacity));  // slot out of range: skipped
      std::vector<uint8_t> expected = cache;
      FillCacheRows(src.data(), num_rows, row_bytes, rows.data(), slots.data(),
                    static_cast<int64_t>(rows.size()), expected.data(), capacity);
      const void* d_src = nullptr;
      void* host_src = nullptr;
      if (mapped_source) {
        ASSERT_CUDA(cudaHostAlloc(&host_src, src.size(), cudaHostAllocMapped));
        std::memcpy(host_src, src.data(), src.size());
        void* alias = nullptr;
        ASSERT_CUDA(cudaHostGetDevicePointer(&alias, host_src, 0));
        d_src = alias;
      } else {
        d_src = ToDevice(src);
      }
      uint8_t* d_cache = ToDevice(cache);
      int64_t* d_rows = ToDevice(rows);
      int32_t* d_slots = ToDevice(slots);
      ASSERT_CUDA(LaunchFillCacheRows(d_src, num_rows, row_bytes, d_rows, d_slots,
                                      static_cast<int64_t>(rows.size()), d_cache, capacity,
                                      nullptr));
      ASSERT_CUDA(cudaDeviceSynchronize());
      EXPECT_EQ(ToHost(d_cache, cache.size()), expected)
          << "row_bytes " << row_bytes << (mapped_source ? " mapped" : " device");
      if (mapped_source) {
        cudaFreeHost(host_src);
      } else {
        cudaFree(const_cast<void*>(d_src));
      }
      cudaFree(d_cache);
      cudaFree(d_rows);
      cudaFree(d_slots);
    }
  }
}

}  // namespace
}  // namespace rankd::kernels::cuda
