#include "engine/cuda/batch_packer.h"

#include <cstring>
#include <vector>

#include "engine/testing/test_models.h"
#include "gtest/gtest.h"
#include "kernels/cuda/embedding_lookup.h"

namespace rankd::engine::cuda {
namespace {

using testing::MakeRandomModel;
using testing::MakeRandomRequest;
using testing::OwnedRequest;

// Unpacks the arena and checks that every row of every feature gets exactly
// the ids (and weights) of its request's bag, and the dense rows match.
void CheckSlice(const Model& m, const std::vector<const Request*>& reqs, int64_t begin,
                int64_t end, int64_t padded, int dense_ld = 0) {
  const RequestOffsets o = ComputeRequestOffsets(m, reqs);
  const int64_t ids = CountSliceIds(m, reqs, o, begin, end);
  PackedLayout l = MakeLayout(m, padded, ids + 3, dense_ld);
  std::vector<uint8_t> arena(l.bytes, 0xAB);  // poison
  std::vector<int> feat_col;
  for (size_t f = 0; f < m.features.size(); ++f) feat_col.push_back(100 + 10 * f);
  PackSlice(m, reqs, o, begin, end, feat_col, &l, arena.data());
  ASSERT_EQ(l.total_ids, ids);
  ASSERT_EQ(l.rows, end - begin);

  const float* dense = reinterpret_cast<const float*>(arena.data() + l.dense_offset);
  const auto* ids_a = reinterpret_cast<const int64_t*>(arena.data() + l.ids_offset);
  const auto* w_a = reinterpret_cast<const float*>(arena.data() + l.weights_offset);
  const auto* bag_ids = reinterpret_cast<const int64_t*>(arena.data() + l.bag_ids_offset);
  const auto* bag_rows = reinterpret_cast<const int32_t*>(arena.data() + l.bag_rows_offset);
  const auto* feats =
      reinterpret_cast<const kernels::cuda::DeviceFeature*>(arena.data() + l.features_offset);
  const auto* prefix = reinterpret_cast<const int64_t*>(arena.data() + l.bag_prefix_offset);

  for (int64_t row = begin; row < end; ++row) {
    size_t r = 0;
    while (o.row_start[r + 1] <= row) ++r;
    const int64_t c = row - o.row_start[r];
    const Request& req = *reqs[r];
    ASSERT_EQ(0, std::memcmp(dense + (row - begin) * l.dense_ld,
                             req.dense.data() + c * m.num_dense, 4 * m.num_dense));
    for (int k = m.num_dense; k < l.dense_ld; ++k) {
      ASSERT_EQ(dense[(row - begin) * l.dense_ld + k], 0.0f) << "pad columns must be zeros";
    }
    for (size_t f = 0; f < m.features.size(); ++f) {
      const auto& df = feats[f];
      // Find the bag covering this row.
      int64_t found = -1;
      for (int64_t b = df.bag_begin; b < df.bag_begin + df.num_bags; ++b) {
        if (bag_rows[b] <= row - begin && row - begin < bag_rows[b + 1]) found = b;
      }
      ASSERT_GE(found, 0) << "row " << row << " feature " << f << " has no bag";
      const FeatureInput& in = req.features[f];
      const int64_t bag = in.lengths.size() == 1 ? 0 : c;
      const int64_t from = o.offsets[r][f][bag], to = o.offsets[r][f][bag + 1];
      ASSERT_EQ(bag_ids[found + 1] - bag_ids[found], to - from);
      for (int64_t i = 0; i < to - from; ++i) {
        EXPECT_EQ(ids_a[bag_ids[found] + i], in.ids[from + i]);
        EXPECT_EQ(w_a[bag_ids[found] + i], in.weights.empty() ? 1.0f : in.weights[from + i]);
      }
    }
  }
  for (int64_t i = (end - begin) * l.dense_ld; i < padded * l.dense_ld; ++i) {
    ASSERT_EQ(dense[i], 0.0f) << "padding rows must be zeros";
  }
  int64_t bags = 0;
  for (size_t f = 0; f < m.features.size(); ++f) {
    EXPECT_EQ(prefix[f], bags);
    EXPECT_EQ(feats[f].out_col, feat_col[f]);
    EXPECT_EQ(feats[f].table, m.features[f].table);
    // Sentinel closes the feature: its rows end at the slice's row count.
    EXPECT_EQ(bag_rows[feats[f].bag_begin + feats[f].num_bags], end - begin);
    bags += feats[f].num_bags;
  }
  EXPECT_EQ(prefix[m.features.size()], bags);
  EXPECT_EQ(l.total_bags, bags);
  EXPECT_LE(bags, l.max_bags());
}

TEST(BatchPackerTest, SlicesOfMixedRequestsRoundTrip) {
  testing::RandomModelSpec spec;
  spec.table_rows = {7, 11, 13, 5};
  spec.request_level_features = {2};
  auto model = MakeRandomModel(spec);
  std::vector<OwnedRequest> owned;
  for (int i = 0; i < 5; ++i) {
    testing::RandomRequestSpec rs;
    rs.num_candidates = 1 + 7 * i;
    rs.max_bag = 4;
    rs.weighted = i % 2 == 1;
    rs.share_all_bags = i == 3;
    rs.seed = 10 + i;
    owned.push_back(MakeRandomRequest(*model, rs));
  }
  std::vector<Request> views;
  for (auto& o : owned) views.push_back(o.view());
  std::vector<const Request*> reqs;
  for (auto& v : views) reqs.push_back(&v);
  const int64_t total = 1 + 8 + 15 + 22 + 29;
  CheckSlice(*model, reqs, 0, total, 80);
  CheckSlice(*model, reqs, 0, 16, 16);
  CheckSlice(*model, reqs, 5, 40, 64);  // starts and ends inside requests
  CheckSlice(*model, reqs, total - 3, total, 16);
  CheckSlice(*model, reqs, 3, 50, 64, /*dense_ld=*/8);  // num_dense 5 padded to 8
}

TEST(BatchPackerTest, LayoutDependsOnlyOnBucketAndCapacity) {
  testing::RandomModelSpec spec;
  auto model = MakeRandomModel(spec);
  const PackedLayout a = MakeLayout(*model, 64, 1000);
  const PackedLayout b = MakeLayout(*model, 64, 1000);
  EXPECT_EQ(a.ids_offset, b.ids_offset);
  EXPECT_EQ(a.weights_offset, b.weights_offset);
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(a.ids_offset % 16, 0u);
  EXPECT_EQ(a.weights_offset % 16, 0u);
  EXPECT_GT(MakeLayout(*model, 128, 1000).bytes, a.bytes);
}

}  // namespace
}  // namespace rankd::engine::cuda
