#include "engine/cuda/batch_packer.h"

#include <cstring>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "engine/testing/test_models.h"
#include "gtest/gtest.h"
#include "kernels/cuda/embedding_lookup.h"

namespace rankd::engine::cuda {
namespace {

using testing::MakeRandomModel;
using testing::MakeRandomRequest;
using testing::OwnedRequest;

// Views of owned requests and the pointer list the packer takes (`reqs`
// points into `views`, whose buffer a move keeps).
struct RequestViews {
  std::vector<Request> views;
  std::vector<const Request*> reqs;
};
RequestViews ViewsOf(std::vector<OwnedRequest>& owned) {
  RequestViews r;
  for (auto& o : owned) r.views.push_back(o.view());
  for (auto& v : r.views) r.reqs.push_back(&v);
  return r;
}

// Unpacks the arena and checks that every row of every feature gets exactly
// the ids (and weights) of its request's bag, and the dense rows match.
void CheckSlice(const Model& m, const std::vector<const Request*>& reqs, int64_t begin,
                int64_t end, int64_t padded, int dense_ld = 0) {
  RequestOffsets o;
  ComputeRequestOffsets(m, reqs, &o);
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
      const int64_t from = o.of(r, f)[bag], to = o.of(r, f)[bag + 1];
      ASSERT_EQ(bag_ids[found + 1] - bag_ids[found], to - from);
      // The kernels read weights only for a weighted feature; it is weighted
      // exactly when some request of the slice sent weights for it.
      bool any_weights = false;
      for (size_t q = 0; q < reqs.size(); ++q) {
        const bool in_slice = o.row_start[q] < end && o.row_start[q + 1] > begin;
        any_weights |= in_slice && !reqs[q]->features[f].weights.empty();
      }
      ASSERT_EQ(df.weighted != 0, any_weights) << "feature " << f;
      for (int64_t i = 0; i < to - from; ++i) {
        EXPECT_EQ(ids_a[bag_ids[found] + i], in.ids[from + i]);
        if (df.weighted) {
          EXPECT_EQ(w_a[bag_ids[found] + i], in.weights.empty() ? 1.0f : in.weights[from + i]);
        }
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
  EXPECT_LE(bags, l.max_bags);
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
  const RequestViews batch = ViewsOf(owned);
  const std::vector<const Request*>& reqs = batch.reqs;
  const int64_t total = 1 + 8 + 15 + 22 + 29;
  CheckSlice(*model, reqs, 0, total, 80);
  CheckSlice(*model, reqs, 0, 16, 16);
  CheckSlice(*model, reqs, 5, 40, 64);  // starts and ends inside requests
  CheckSlice(*model, reqs, total - 3, total, 16);
  CheckSlice(*model, reqs, 3, 50, 64, /*dense_ld=*/8);  // num_dense 5 padded to 8
}

// Packing split into tasks, run in reverse order and on several threads,
// writes the same bytes as packing in order on one thread.
TEST(BatchPackerTest, ParallelPackingWritesTheSameBytes) {
  testing::RandomModelSpec spec;
  spec.table_rows = {7, 11, 13, 5, 9, 3};
  spec.request_level_features = {1};
  auto model = MakeRandomModel(spec);
  std::vector<OwnedRequest> owned;
  for (int i = 0; i < 6; ++i) {
    testing::RandomRequestSpec rs;
    rs.num_candidates = 3000 * (i % 3) + 5 * i + 1;  // dense rows span several tasks
    rs.max_bag = 3;
    rs.weighted = i == 2;
    rs.seed = 40 + i;
    owned.push_back(MakeRandomRequest(*model, rs));
  }
  const RequestViews batch = ViewsOf(owned);
  const std::vector<const Request*>& reqs = batch.reqs;
  std::vector<int> feat_col(model->features.size(), 0);
  const ParallelFor reversed = [](int64_t n, const std::function<void(int64_t)>& task) {
    for (int64_t i = n - 1; i >= 0; --i) task(i);
  };
  const ParallelFor threads = [](int64_t n, const std::function<void(int64_t)>& task) {
    std::vector<std::thread> pool;
    for (int64_t i = 0; i < n; ++i) pool.emplace_back(task, i);
    for (auto& t : pool) t.join();
  };
  RequestOffsets o;
  ComputeRequestOffsets(*model, reqs, &o);
  const int64_t total = o.row_start.back();
  ASSERT_GT(total, 16000);
  for (const auto& [begin, end] : std::vector<std::pair<int64_t, int64_t>>{
           {0, total}, {2000, total - 100}, {10, 30}}) {
    const int64_t ids = CountSliceIds(*model, reqs, o, begin, end);
    const int64_t padded = (end - begin + 15) / 16 * 16 + 16;
    for (const ParallelFor& parallel : {reversed, threads}) {
      RequestOffsets po;
      ComputeRequestOffsets(*model, reqs, &po, parallel);
      ASSERT_EQ(po.data, o.data);
      PackedLayout a = MakeLayout(*model, padded, ids, 8);
      PackedLayout b = a;
      std::vector<uint8_t> serial(a.bytes, 0xCD), split(a.bytes, 0xCD);
      PackSlice(*model, reqs, o, begin, end, feat_col, &a, serial.data());
      PackSlice(*model, reqs, po, begin, end, feat_col, &b, split.data(), parallel);
      EXPECT_EQ(a.total_ids, b.total_ids);
      EXPECT_EQ(a.total_bags, b.total_bags);
      EXPECT_EQ(a.any_weighted, b.any_weighted);
      ASSERT_TRUE(serial == split) << "rows [" << begin << ", " << end << ")";
    }
  }
  // A slice of whole requests needs no bag offsets: the same bytes without.
  RequestOffsets rows_only;
  ComputeRequestOffsets(*model, reqs, &rows_only, nullptr, /*bag_offsets=*/false);
  EXPECT_TRUE(rows_only.data.empty());
  EXPECT_EQ(rows_only.row_start, o.row_start);
  ASSERT_EQ(CountSliceIds(*model, reqs, rows_only, 0, total), CountSliceIds(*model, reqs, o, 0, total));
  const int64_t padded = (total + 15) / 16 * 16;
  PackedLayout a = MakeLayout(*model, padded, CountSliceIds(*model, reqs, o, 0, total));
  PackedLayout b = a;
  std::vector<uint8_t> with(a.bytes, 0xEF), without(a.bytes, 0xEF);
  PackSlice(*model, reqs, o, 0, total, feat_col, &a, with.data());
  PackSlice(*model, reqs, rows_only, 0, total, feat_col, &b, without.data(), threads);
  EXPECT_TRUE(with == without);
}

// The dense part and the sparse part, packed by separate calls in either
// order (serially or over threads), write the bytes and fill the layout
// exactly as one call does; the dense part writes nothing past dense_end()
// and the sparse part nothing before it.
TEST(BatchPackerTest, DenseAndSparsePartsWriteWhatOneCallWrites) {
  testing::RandomModelSpec spec;
  spec.table_rows = {7, 11, 13, 5, 9, 3};
  spec.request_level_features = {1};
  auto model = MakeRandomModel(spec);
  std::vector<OwnedRequest> owned;
  for (int i = 0; i < 5; ++i) {
    testing::RandomRequestSpec rs;
    rs.num_candidates = 4000 * (i % 3) + 7 * i + 1;  // dense rows span several tasks
    rs.max_bag = 3;
    rs.weighted = i == 3;
    rs.share_all_bags = i == 1;
    rs.seed = 70 + i;
    owned.push_back(MakeRandomRequest(*model, rs));
  }
  const RequestViews batch = ViewsOf(owned);
  std::vector<int> feat_col(model->features.size(), 0);
  for (size_t f = 0; f < feat_col.size(); ++f) feat_col[f] = 3 + 2 * static_cast<int>(f);
  const ParallelFor threads = [](int64_t n, const std::function<void(int64_t)>& task) {
    std::vector<std::thread> pool;
    for (int64_t i = 0; i < n; ++i) pool.emplace_back(task, i);
    for (auto& t : pool) t.join();
  };
  RequestOffsets o;
  ComputeRequestOffsets(*model, batch.reqs, &o);
  const int64_t total = o.row_start.back();
  ASSERT_GT(total, 8192) << "the dense part should take several tasks";
  for (const auto& [begin, end] :
       std::vector<std::pair<int64_t, int64_t>>{{0, total}, {5, 40}, {100, total - 3}}) {
    for (bool compact : {false, true}) {
      for (const ParallelFor& parallel : {ParallelFor(), threads}) {
        SCOPED_TRACE(::testing::Message() << "rows [" << begin << ", " << end << ") compact "
                                          << compact << " threads " << bool(parallel));
        const int64_t ids = CountSliceIds(*model, batch.reqs, o, begin, end);
        const int64_t padded = (end - begin + 15) / 16 * 16 + 16;
        PackedLayout whole = MakeLayout(*model, padded, ids, 5, compact);
        std::vector<uint8_t> want(whole.bytes, 0xAB);
        PackSlice(*model, batch.reqs, o, begin, end, feat_col, &whole, want.data(), parallel);

        PackedLayout dense_first = MakeLayout(*model, padded, ids, 5, compact);
        std::vector<uint8_t> got(dense_first.bytes, 0xAB);
        PackSlice(*model, batch.reqs, o, begin, end, feat_col, &dense_first, got.data(),
                  parallel, PackParts::kDense);
        const size_t dense_end = dense_first.dense_end();
        ASSERT_GT(dense_end, 0u);
        ASSERT_EQ(dense_first.rows, end - begin);
        for (size_t i = dense_end; i < got.size(); ++i) {
          ASSERT_EQ(got[i], 0xAB) << "the dense part wrote byte " << i;
        }
        ASSERT_TRUE(std::memcmp(got.data(), want.data(), dense_end) == 0);
        PackSlice(*model, batch.reqs, o, begin, end, feat_col, &dense_first, got.data(),
                  parallel, PackParts::kSparse);
        EXPECT_TRUE(got == want);
        EXPECT_EQ(dense_first.total_ids, whole.total_ids);
        EXPECT_EQ(dense_first.narrow_ids, whole.narrow_ids);
        EXPECT_EQ(dense_first.total_bags, whole.total_bags);
        EXPECT_EQ(dense_first.any_weighted, whole.any_weighted);
        EXPECT_EQ(dense_first.ids_end(), whole.ids_end());

        PackedLayout sparse_first = MakeLayout(*model, padded, ids, 5, compact);
        std::vector<uint8_t> other(sparse_first.bytes, 0xAB);
        PackSlice(*model, batch.reqs, o, begin, end, feat_col, &sparse_first, other.data(),
                  parallel, PackParts::kSparse);
        for (size_t i = 0; i < dense_end; ++i) {
          ASSERT_EQ(other[i], 0xAB) << "the sparse part wrote dense byte " << i;
        }
        PackSlice(*model, batch.reqs, o, begin, end, feat_col, &sparse_first, other.data(),
                  parallel, PackParts::kDense);
        EXPECT_TRUE(other == want);
      }
    }
  }
}

// Unit bags: a feature whose every bag in the slice holds one id is packed
// as its ids only, its bag entries left as they were; expanded
// (ExpandUnitBags, the twin of the device kernel) they equal explicit
// packing's. all_unit says whether a batch needs no bag entries copied.
TEST(BatchPackerTest, UnitBagsExpandToTheExplicitEntries) {
  struct Case {
    const char* name;
    std::vector<int> request_level;  // shared bags: unit only in 1-candidate requests
    int last_max_bag;                // the last request's bag sizes: [1, this]
    bool want_all_unit;
    int want_non_unit;  // features (of 4) that keep explicit bag entries
  };
  for (const Case& k : {Case{"all unit", {}, 1, true, 0},
                        Case{"a shared feature", {1}, 1, false, 1},
                        Case{"long bags", {}, 3, false, 4}}) {
    for (bool compact : {false, true}) {
      SCOPED_TRACE(::testing::Message() << k.name << " compact " << compact);
      testing::RandomModelSpec spec;
      spec.table_rows = {7, 11, 13, 5};
      spec.request_level_features = k.request_level;
      auto model = MakeRandomModel(spec);
      std::vector<OwnedRequest> owned;
      for (int i = 0; i < 5; ++i) {
        testing::RandomRequestSpec rs;
        rs.num_candidates = 1 + 37 * i;
        rs.min_bag = 1;
        rs.max_bag = i == 4 ? k.last_max_bag : 1;
        rs.weighted = i == 2;
        rs.seed = 90 + i;
        owned.push_back(MakeRandomRequest(*model, rs));
      }
      const RequestViews batch = ViewsOf(owned);
      std::vector<int> feat_col(model->features.size(), 0);
      RequestOffsets o;
      ComputeRequestOffsets(*model, batch.reqs, &o, nullptr, /*bag_offsets=*/false);
      const int64_t total = o.row_start.back();
      const int64_t ids = CountSliceIds(*model, batch.reqs, o, 0, total);
      const int64_t padded = (total + 15) / 16 * 16;
      PackedLayout explicit_layout = MakeLayout(*model, padded, ids, 0, compact, false);
      PackedLayout unit_layout = MakeLayout(*model, padded, ids, 0, compact, true);
      ASSERT_EQ(explicit_layout.bytes, unit_layout.bytes) << "the same regions either way";
      std::vector<uint8_t> want(explicit_layout.bytes, 0xCD), got(unit_layout.bytes, 0xCD);
      PackSlice(*model, batch.reqs, o, 0, total, feat_col, &explicit_layout, want.data());
      PackSlice(*model, batch.reqs, o, 0, total, feat_col, &unit_layout, got.data());
      EXPECT_FALSE(explicit_layout.all_unit);
      EXPECT_EQ(unit_layout.all_unit, k.want_all_unit);
      const auto* features = reinterpret_cast<const kernels::cuda::DeviceFeature*>(
          got.data() + unit_layout.features_offset);
      const int nf = static_cast<int>(model->features.size());
      int units = 0;
      for (int f = 0; f < nf; ++f) {
        if (!features[f].unit_bags) continue;
        ++units;
        // Not written by the packer: still the fill byte.
        const uint8_t* first_row =
            got.data() + unit_layout.bag_rows_offset + 4 * features[f].bag_begin;
        EXPECT_EQ(first_row[0], 0xCD) << "feature " << f << "'s bag rows were written";
        EXPECT_EQ(FeatureIds(unit_layout, got.data(), f),
                  FeatureIds(explicit_layout, want.data(), f));
      }
      EXPECT_EQ(units, nf - k.want_non_unit);
      ExpandUnitBags(unit_layout, nf, got.data());
      const auto* want_features = reinterpret_cast<const kernels::cuda::DeviceFeature*>(
          want.data() + explicit_layout.features_offset);
      const auto* rows_want =
          reinterpret_cast<const int32_t*>(want.data() + explicit_layout.bag_rows_offset);
      const auto* rows_got =
          reinterpret_cast<const int32_t*>(got.data() + unit_layout.bag_rows_offset);
      for (int f = 0; f < nf; ++f) {
        const auto& w = want_features[f];
        const auto& g = features[f];
        ASSERT_EQ(g.bag_begin, w.bag_begin);
        ASSERT_EQ(g.num_bags, w.num_bags);
        ASSERT_EQ(g.table, w.table);
        ASSERT_EQ(g.weighted, w.weighted);
        for (int64_t j = 0; j <= w.num_bags; ++j) {
          ASSERT_EQ(BagIdAt(unit_layout, got.data(), w.bag_begin + j),
                    BagIdAt(explicit_layout, want.data(), w.bag_begin + j))
              << "feature " << f << " entry " << j;
          ASSERT_EQ(rows_got[w.bag_begin + j], rows_want[w.bag_begin + j])
              << "feature " << f << " entry " << j;
        }
      }
      EXPECT_TRUE(std::memcmp(got.data(), want.data(), unit_layout.bag_ids_offset) == 0)
          << "dense rows";
      EXPECT_TRUE(std::memcmp(got.data() + unit_layout.ids_offset,
                              want.data() + explicit_layout.ids_offset,
                              unit_layout.ids_end() - unit_layout.ids_offset) == 0)
          << "ids";
    }
  }
}

// Offsets storage is reused: a second batch with fewer requests and bags
// gives the same offsets as a fresh computation.
TEST(BatchPackerTest, ReusedOffsetsMatchFreshOnes) {
  testing::RandomModelSpec spec;
  auto model = MakeRandomModel(spec);
  std::vector<OwnedRequest> owned;
  for (int i = 0; i < 3; ++i) {
    testing::RandomRequestSpec rs;
    rs.num_candidates = 40 - 15 * i;
    rs.max_bag = 4;
    rs.seed = 70 + i;
    owned.push_back(MakeRandomRequest(*model, rs));
  }
  std::vector<Request> views;
  for (auto& o : owned) views.push_back(o.view());
  std::vector<const Request*> all = {&views[0], &views[1], &views[2]};
  std::vector<const Request*> last = {&views[2]};
  RequestOffsets reused, fresh;
  ComputeRequestOffsets(*model, all, &reused);
  ComputeRequestOffsets(*model, last, &reused);
  ComputeRequestOffsets(*model, last, &fresh);
  EXPECT_EQ(reused.data, fresh.data);
  EXPECT_EQ(reused.start, fresh.start);
  EXPECT_EQ(reused.row_start, fresh.row_start);
  EXPECT_EQ(reused.row_start.back(), 10);
}

// `n` requests of first + i * step candidates (request i), bags of up to 4
// ids, request 1 weighted, `unresolved` of the ids naming no row.
std::vector<OwnedRequest> MakeRequests(const Model& m, int n, int first, int step,
                                       double unresolved, uint64_t seed) {
  std::vector<OwnedRequest> owned;
  for (int i = 0; i < n; ++i) {
    testing::RandomRequestSpec rs;
    rs.num_candidates = first + step * i;
    rs.max_bag = 4;
    rs.weighted = i == 1;
    rs.unresolved_fraction = unresolved;
    rs.seed = seed + i;
    owned.push_back(MakeRandomRequest(m, rs));
  }
  return owned;
}

// The compact layout (int32 ids and bag offsets) carries the bags of the
// int64 layout: the same dense rows, bag rows, descriptors and prefix, the
// same bag offsets and ids, except that ids outside [0, 2^31) become -1 (no
// row, as they were: every table has fewer rows than that).
TEST(BatchPackerTest, CompactLayoutCarriesTheSameBags) {
  testing::RandomModelSpec spec;
  spec.table_rows = {50, 70, 90};
  spec.request_level_features = {1};
  auto model = MakeRandomModel(spec);
  std::vector<OwnedRequest> owned = MakeRequests(*model, 4, 5, 7, 0.1, 300);
  // Ids no int32 holds, and edges that it does.
  const int64_t odd[] = {-5, int64_t{1} << 40, int64_t{INT32_MAX} + 1, INT32_MAX, -1, 0};
  int k = 0;
  for (auto& o : owned) {
    for (auto& ids : o.ids) {
      for (size_t j = 0; j < ids.size(); j += 5) ids[j] = odd[k++ % 6];
    }
  }
  const RequestViews batch = ViewsOf(owned);
  const std::vector<const Request*>& reqs = batch.reqs;
  RequestOffsets o;
  ComputeRequestOffsets(*model, reqs, &o);
  const int64_t total = o.row_start.back();
  std::vector<int> feat_col = {8, 16, 24};
  for (const auto& [begin, end] :
       std::vector<std::pair<int64_t, int64_t>>{{0, total}, {3, total - 4}}) {
    const int64_t ids = CountSliceIds(*model, reqs, o, begin, end);
    const int64_t padded = (end - begin + 15) / 16 * 16;
    ASSERT_TRUE(CompactIdsFit(ids));
    PackedLayout w = MakeLayout(*model, padded, ids, 8, /*compact=*/false);
    PackedLayout c = MakeLayout(*model, padded, ids, 8, /*compact=*/true);
    EXPECT_LT(c.bytes, w.bytes);
    std::vector<uint8_t> wide(w.bytes, 0xAB), narrow(c.bytes, 0xAB);  // same poison: descriptors have padding
    PackSlice(*model, reqs, o, begin, end, feat_col, &w, wide.data());
    PackSlice(*model, reqs, o, begin, end, feat_col, &c, narrow.data());
    ASSERT_EQ(w.total_ids, c.total_ids);
    ASSERT_EQ(w.total_bags, c.total_bags);
    EXPECT_EQ(c.ids_end(), c.ids_offset + 4 * c.total_ids);
    EXPECT_EQ(w.ids_end(), w.ids_offset + 8 * w.total_ids);
    const size_t nf = model->features.size();
    const int64_t entries = w.total_bags + static_cast<int64_t>(nf);
    EXPECT_EQ(0, std::memcmp(wide.data() + w.dense_offset, narrow.data() + c.dense_offset,
                             4 * padded * 8));
    EXPECT_EQ(0, std::memcmp(wide.data() + w.bag_rows_offset, narrow.data() + c.bag_rows_offset,
                             4 * entries));
    EXPECT_EQ(0, std::memcmp(wide.data() + w.features_offset, narrow.data() + c.features_offset,
                             sizeof(kernels::cuda::DeviceFeature) * nf));
    EXPECT_EQ(0, std::memcmp(wide.data() + w.bag_prefix_offset,
                             narrow.data() + c.bag_prefix_offset, 8 * (nf + 1)));
    for (int64_t i = 0; i < entries; ++i) {
      ASSERT_EQ(BagIdAt(c, narrow.data(), i), BagIdAt(w, wide.data(), i)) << "bag entry " << i;
    }
    const auto* wide_ids = reinterpret_cast<const int64_t*>(wide.data() + w.ids_offset);
    const auto* narrow_ids = reinterpret_cast<const int32_t*>(narrow.data() + c.ids_offset);
    int narrowed = 0;
    for (int64_t i = 0; i < w.total_ids; ++i) {
      const int64_t id = wide_ids[i];
      const bool fits = id >= 0 && id <= INT32_MAX;
      ASSERT_EQ(narrow_ids[i], fits ? id : -1) << "id " << i << " = " << id;
      narrowed += fits ? 0 : 1;
    }
    EXPECT_GT(narrowed, 0) << "the test must carry ids no int32 holds";
    if (w.any_weighted) {
      EXPECT_EQ(0, std::memcmp(wide.data() + w.weights_offset, narrow.data() + c.weights_offset,
                               4 * w.total_ids));
    }
  }
}

// Each feature's bags as lists of ids, read from a packed arena of either
// layout (narrow features from the int32 region, wide ones from their own).
std::vector<std::vector<std::vector<int64_t>>> BagIdLists(const Model& m, const PackedLayout& l,
                                                           const uint8_t* arena) {
  const auto* feats =
      reinterpret_cast<const kernels::cuda::DeviceFeature*>(arena + l.features_offset);
  std::vector<std::vector<std::vector<int64_t>>> out(m.features.size());
  for (size_t f = 0; f < m.features.size(); ++f) {
    const auto& df = feats[f];
    for (int64_t b = df.bag_begin; b < df.bag_begin + df.num_bags; ++b) {
      std::vector<int64_t> ids;
      for (int64_t i = BagIdAt(l, arena, b); i < BagIdAt(l, arena, b + 1); ++i) {
        if (!l.compact) {
          ids.push_back(reinterpret_cast<const int64_t*>(arena + l.ids_offset)[i]);
        } else if (df.wide_ids) {
          ids.push_back(reinterpret_cast<const int64_t*>(arena + l.wide_ids_offset)[i]);
        } else {
          ids.push_back(reinterpret_cast<const int32_t*>(arena + l.ids_offset)[i]);
        }
      }
      out[f].push_back(std::move(ids));
    }
  }
  return out;
}

// A model with DYNAMIC tables: their features keep int64 keys (in the wide
// region, after the narrow features' ids), the others narrow; every bag
// carries the ids of the int64 layout (narrowed where narrow).
TEST(BatchPackerTest, CompactLayoutKeepsDynamicKeysWide) {
  testing::RandomModelSpec spec;
  spec.table_rows = {50, 70, 90, 40};
  spec.dynamic_tables = {1, 3};
  spec.request_level_features = {3};
  spec.id_policy = rankd::v1::ZERO;
  auto model = MakeRandomModel(spec);
  std::vector<OwnedRequest> owned = MakeRequests(*model, 3, 6, 9, 0.2, 500);
  const RequestViews batch = ViewsOf(owned);
  const std::vector<const Request*>& reqs = batch.reqs;
  RequestOffsets o;
  ComputeRequestOffsets(*model, reqs, &o);
  const int64_t total = o.row_start.back();
  const int64_t ids = CountSliceIds(*model, reqs, o, 0, total);
  const int64_t padded = (total + 15) / 16 * 16;
  EXPECT_TRUE(NarrowIds(*model, 0));
  EXPECT_FALSE(NarrowIds(*model, 1));
  ASSERT_TRUE(CompactIdsFit(ids));
  std::vector<int> feat_col = {8, 16, 24, 32};
  PackedLayout w = MakeLayout(*model, padded, ids, 8, /*compact=*/false);
  PackedLayout c = MakeLayout(*model, padded, ids, 8, /*compact=*/true);
  std::vector<uint8_t> wide(w.bytes, 0xAB), narrow(c.bytes, 0xAB);
  PackSlice(*model, reqs, o, 0, total, feat_col, &w, wide.data());
  PackSlice(*model, reqs, o, 0, total, feat_col, &c, narrow.data());
  ASSERT_EQ(c.total_ids, w.total_ids);
  // Features 0 and 2 are narrow: their ids come first.
  int64_t narrow_count = 0;
  const auto* cf =
      reinterpret_cast<const kernels::cuda::DeviceFeature*>(narrow.data() + c.features_offset);
  for (size_t f = 0; f < 4; ++f) {
    EXPECT_EQ(cf[f].wide_ids, NarrowIds(*model, f) ? 0 : 1) << "feature " << f;
    if (NarrowIds(*model, f)) {
      narrow_count += BagIdAt(c, narrow.data(), cf[f].bag_begin + cf[f].num_bags) -
                      BagIdAt(c, narrow.data(), cf[f].bag_begin);
    }
  }
  EXPECT_EQ(c.narrow_ids, narrow_count);
  EXPECT_GT(c.narrow_ids, 0);
  EXPECT_LT(c.narrow_ids, c.total_ids);
  EXPECT_EQ(c.ids_end(), c.ids_offset + 4 * c.narrow_ids);
  EXPECT_EQ(c.wide_ids_begin(), c.wide_ids_offset + 8 * c.narrow_ids);
  EXPECT_EQ(c.wide_ids_end(), c.wide_ids_offset + 8 * c.total_ids);
  EXPECT_EQ(w.wide_ids_end(), w.wide_ids_begin()) << "the int64 layout has no wide region";
  const auto want = BagIdLists(*model, w, wide.data());
  const auto got = BagIdLists(*model, c, narrow.data());
  ASSERT_EQ(got.size(), want.size());
  bool any_big_key = false;
  for (size_t f = 0; f < want.size(); ++f) {
    ASSERT_EQ(got[f].size(), want[f].size()) << "feature " << f;
    for (size_t b = 0; b < want[f].size(); ++b) {
      ASSERT_EQ(got[f][b].size(), want[f][b].size()) << "feature " << f << " bag " << b;
      for (size_t i = 0; i < want[f][b].size(); ++i) {
        const int64_t id = want[f][b][i];
        const bool fits = id >= 0 && id <= INT32_MAX;
        any_big_key |= !NarrowIds(*model, f) && !fits;
        ASSERT_EQ(got[f][b][i], NarrowIds(*model, f) ? (fits ? id : -1) : id)
            << "feature " << f << " bag " << b << " id " << i;
      }
    }
  }
  EXPECT_TRUE(any_big_key) << "the DYNAMIC features must carry keys no int32 holds";
  // Weights follow the ids' positions in both layouts.
  if (w.any_weighted) {
    const auto* wf =
        reinterpret_cast<const kernels::cuda::DeviceFeature*>(wide.data() + w.features_offset);
    for (size_t f = 0; f < 4; ++f) {
      if (!wf[f].weighted) continue;
      const int64_t a = BagIdAt(w, wide.data(), wf[f].bag_begin);
      const int64_t b = BagIdAt(c, narrow.data(), cf[f].bag_begin);
      const int64_t n = BagIdAt(w, wide.data(), wf[f].bag_begin + wf[f].num_bags) - a;
      EXPECT_EQ(0, std::memcmp(wide.data() + w.weights_offset + 4 * a,
                               narrow.data() + c.weights_offset + 4 * b, 4 * n))
          << "feature " << f;
    }
  }
}

TEST(BatchPackerTest, CompactLayoutBounds) {
  testing::RandomModelSpec spec;
  spec.table_rows = {50, 70, 90};
  auto model = MakeRandomModel(spec);
  EXPECT_TRUE(CompactIdsFit(1000));
  EXPECT_TRUE(CompactIdsFit(INT32_MAX));
  EXPECT_FALSE(CompactIdsFit(int64_t{INT32_MAX} + 1));  // bag offsets
  for (size_t f = 0; f < 3; ++f) EXPECT_TRUE(NarrowIds(*model, f));
  Model big = *model;
  big.tables[1].num_rows = int64_t{INT32_MAX} + 1;  // metadata only: nothing reads the rows
  EXPECT_FALSE(NarrowIds(big, 1));
  EXPECT_TRUE(NarrowIds(big, 0));
  testing::RandomModelSpec dyn = spec;
  dyn.dynamic_tables = {2};
  auto dm = MakeRandomModel(dyn);
  EXPECT_FALSE(NarrowIds(*dm, 2)) << "DYNAMIC keys need 64 bits";
  // The wide region exists only for models with wide features.
  EXPECT_GT(MakeLayout(*dm, 64, 1000, 0, true).bytes, MakeLayout(*model, 64, 1000, 0, true).bytes);
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
