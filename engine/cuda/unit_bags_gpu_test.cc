// kernels::cuda::LaunchExpandUnitBags against its host twin ExpandUnitBags
// (batch_packer.h): random slices packed with unit bags, their arenas copied
// to the device with the bag entries poisoned, expanded there, and the bag
// entries read back must equal the host expansion's bytes, which equal
// explicit packing's (batch_packer_test). Features with explicit bags keep
// their entries. Needs a CUDA device (tags "manual", "gpu"); skips without.
#include <cuda_runtime_api.h>

#include <cstring>
#include <vector>

#include "engine/cuda/batch_packer.h"
#include "engine/cuda/cuda_worker.h"
#include "engine/testing/test_models.h"
#include "gtest/gtest.h"
#include "kernels/cuda/embedding_lookup.h"
#include "kernels/cuda/gpu_test_util.h"

namespace rankd::engine::cuda {
namespace {

TEST(UnitBagsGpuTest, DeviceExpansionEqualsTheHostTwin) {
  if (UsableCudaDevices() == 0) GTEST_SKIP() << "no usable CUDA device";
  for (int round = 0; round < 12; ++round) {
    const bool compact = round % 2 == 1;
    SCOPED_TRACE(::testing::Message() << "round " << round << " compact " << compact);
    testing::RandomModelSpec spec;
    spec.table_rows = {7, 11, 13, 5, 9};
    if (round % 3 == 2) spec.request_level_features = {2};  // explicit: shared bags
    auto model = MakeRandomModel(spec);
    std::vector<testing::OwnedRequest> owned;
    const int requests = 1 + round % 4;
    for (int i = 0; i < requests; ++i) {
      testing::RandomRequestSpec rs;
      rs.num_candidates = 1 + (round * 977 + i * 131) % 700;
      rs.min_bag = 1;
      rs.max_bag = (round % 4 == 3 && i == 0) ? 2 : 1;  // some rounds: no unit feature
      rs.weighted = i == 1;
      rs.seed = 500 + round * 10 + i;
      owned.push_back(MakeRandomRequest(*model, rs));
    }
    std::vector<Request> views;
    std::vector<const Request*> reqs;
    for (auto& o : owned) views.push_back(o.view());
    for (auto& v : views) reqs.push_back(&v);
    RequestOffsets offsets;
    ComputeRequestOffsets(*model, reqs, &offsets);
    const int64_t total = offsets.row_start.back();
    const int64_t padded = (total + 15) / 16 * 16;
    const int64_t ids = CountSliceIds(*model, reqs, offsets, 0, total);
    PackedLayout layout = MakeLayout(*model, padded, ids, 0, compact, /*unit_bags=*/true);
    std::vector<int> feat_col(model->features.size(), 0);
    std::vector<uint8_t> host(layout.bytes, 0x3C);
    PackSlice(*model, reqs, offsets, 0, total, feat_col, &layout, host.data());
    const int nf = static_cast<int>(model->features.size());

    // The device arena: the packed bytes with the bag entries poisoned.
    std::vector<uint8_t> poisoned = host;
    std::memset(poisoned.data() + layout.bag_entries_begin(), 0xEE,
                layout.bag_entries_end() - layout.bag_entries_begin());
    // Explicit features' entries are what the packer wrote.
    std::vector<uint8_t> want = host;
    ExpandUnitBags(layout, nf, want.data());
    const auto* features =
        reinterpret_cast<const kernels::cuda::DeviceFeature*>(host.data() + layout.features_offset);
    for (int f = 0; f < nf; ++f) {
      if (features[f].unit_bags) continue;
      const int64_t b = features[f].bag_begin, n = features[f].num_bags + 1;
      const size_t id_bytes = layout.id_bytes();
      std::memcpy(poisoned.data() + layout.bag_ids_offset + id_bytes * b,
                  host.data() + layout.bag_ids_offset + id_bytes * b, id_bytes * n);
      std::memcpy(poisoned.data() + layout.bag_rows_offset + 4 * b,
                  host.data() + layout.bag_rows_offset + 4 * b, 4 * n);
    }
    void* dev_block = nullptr;
    ASSERT_CUDA(cudaMalloc(&dev_block, layout.bytes));
    uint8_t* dev = static_cast<uint8_t*>(dev_block);
    ASSERT_CUDA(cudaMemcpy(dev, poisoned.data(), layout.bytes, cudaMemcpyHostToDevice));
    ASSERT_CUDA(kernels::cuda::LaunchExpandUnitBags(
        reinterpret_cast<const kernels::cuda::DeviceFeature*>(dev + layout.features_offset), nf,
        // An understated bound: the kernel strides over the rest.
        round % 5 == 4 ? 3 : padded,
        compact ? nullptr : reinterpret_cast<int64_t*>(dev + layout.bag_ids_offset),
        compact ? reinterpret_cast<int32_t*>(dev + layout.bag_ids_offset) : nullptr,
        reinterpret_cast<int32_t*>(dev + layout.bag_rows_offset), nullptr));
    std::vector<uint8_t> got(layout.bytes);
    ASSERT_CUDA(cudaMemcpy(got.data(), dev, layout.bytes, cudaMemcpyDeviceToHost));
    cudaFree(dev);
    int units = 0;
    for (int f = 0; f < nf; ++f) {
      units += features[f].unit_bags;
      const int64_t b = features[f].bag_begin, n = features[f].num_bags + 1;
      for (int64_t j = 0; j < n; ++j) {
        ASSERT_EQ(BagIdAt(layout, got.data(), b + j), BagIdAt(layout, want.data(), b + j))
            << "feature " << f << " entry " << j;
        ASSERT_EQ(reinterpret_cast<const int32_t*>(got.data() + layout.bag_rows_offset)[b + j],
                  reinterpret_cast<const int32_t*>(want.data() + layout.bag_rows_offset)[b + j])
            << "feature " << f << " entry " << j;
      }
    }
    if (round % 4 != 3) {
      EXPECT_GT(units, 0) << "the round should have unit features";
    }
    // Nothing outside the bag entries changed.
    EXPECT_TRUE(std::memcmp(got.data(), poisoned.data(), layout.bag_entries_begin()) == 0);
    EXPECT_TRUE(std::memcmp(got.data() + layout.bag_entries_end(),
                            poisoned.data() + layout.bag_entries_end(),
                            layout.bytes - layout.bag_entries_end()) == 0);
  }
}

// More features than a grid has rows (65,535): every unit feature's entries
// are written, and the other features' entries are left alone.
TEST(UnitBagsGpuTest, MoreFeaturesThanAGridHasRows) {
  if (UsableCudaDevices() == 0) GTEST_SKIP() << "no usable CUDA device";
  constexpr int kFeatures = 70000;
  constexpr int32_t kUntouched = -77;
  std::vector<kernels::cuda::DeviceFeature> features(kFeatures);
  int64_t entries = 0;
  for (int f = 0; f < kFeatures; ++f) {
    features[f].unit_bags = f % 2 == 0 ? 1 : 0;
    features[f].num_bags = 1 + f % 3;
    features[f].bag_begin = entries;
    features[f].id_begin = 5 * static_cast<int64_t>(f);
    entries += features[f].num_bags + 1;
  }
  std::vector<int32_t> init(entries, kUntouched);
  void* dev_features = nullptr;
  void* dev_ids = nullptr;
  void* dev_rows = nullptr;
  ASSERT_CUDA(cudaMalloc(&dev_features, sizeof(features[0]) * kFeatures));
  ASSERT_CUDA(cudaMalloc(&dev_ids, 4 * entries));
  ASSERT_CUDA(cudaMalloc(&dev_rows, 4 * entries));
  ASSERT_CUDA(cudaMemcpy(dev_features, features.data(), sizeof(features[0]) * kFeatures,
                         cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemcpy(dev_ids, init.data(), 4 * entries, cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemcpy(dev_rows, init.data(), 4 * entries, cudaMemcpyHostToDevice));
  ASSERT_CUDA(kernels::cuda::LaunchExpandUnitBags(
      static_cast<const kernels::cuda::DeviceFeature*>(dev_features), kFeatures, 3, nullptr,
      static_cast<int32_t*>(dev_ids), static_cast<int32_t*>(dev_rows), nullptr));
  std::vector<int32_t> ids(entries), rows(entries);
  ASSERT_CUDA(cudaMemcpy(ids.data(), dev_ids, 4 * entries, cudaMemcpyDeviceToHost));
  ASSERT_CUDA(cudaMemcpy(rows.data(), dev_rows, 4 * entries, cudaMemcpyDeviceToHost));
  cudaFree(dev_features);
  cudaFree(dev_ids);
  cudaFree(dev_rows);
  for (int f = 0; f < kFeatures; ++f) {
    for (int64_t j = 0; j <= features[f].num_bags; ++j) {
      const int64_t e = features[f].bag_begin + j;
      const bool unit = features[f].unit_bags != 0;
      ASSERT_EQ(ids[e], unit ? static_cast<int32_t>(features[f].id_begin + j) : kUntouched)
          << "feature " << f << " entry " << j;
      ASSERT_EQ(rows[e], unit ? static_cast<int32_t>(j) : kUntouched)
          << "feature " << f << " entry " << j;
    }
  }
}

TEST(UnitBagsGpuTest, BadArgumentsAreRefused) {
  int32_t rows[4];
  int64_t ids[4];
  kernels::cuda::DeviceFeature f;
  EXPECT_EQ(kernels::cuda::LaunchExpandUnitBags(&f, -1, 4, ids, nullptr, rows, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::cuda::LaunchExpandUnitBags(&f, 1, -1, ids, nullptr, rows, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::cuda::LaunchExpandUnitBags(nullptr, 1, 4, ids, nullptr, rows, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::cuda::LaunchExpandUnitBags(&f, 1, 4, nullptr, nullptr, rows, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::cuda::LaunchExpandUnitBags(&f, 1, 4, ids, reinterpret_cast<int32_t*>(ids),
                                                rows, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::cuda::LaunchExpandUnitBags(&f, 1, 4, ids, nullptr, nullptr, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::cuda::LaunchExpandUnitBags(nullptr, 0, 4, nullptr, nullptr, nullptr, nullptr),
            cudaSuccess);
}

}  // namespace
}  // namespace rankd::engine::cuda
