#include "engine/cuda/batch_packer.h"

#include <algorithm>
#include <cstring>

#include "engine/batch_rows.h"
#include "engine/cuda/pack_loops.h"
#include "kernels/cuda/embedding_lookup.h"

namespace rankd::engine::cuda {
namespace {

size_t Align16(size_t x) { return (x + 15) & ~size_t{15}; }

using Segment = RowSegment;

std::vector<Segment> Segments(const RequestOffsets& o, int64_t row_begin, int64_t row_end) {
  return SegmentRows(o.row_start, row_begin, row_end);
}

bool Shared(const FeatureInput& in) { return in.lengths.size() == 1; }

// Index (within request r's ids of feature f) of candidate c's first id;
// c = num_candidates gives the end. Bag offsets are read only for a
// candidate inside the request.
int64_t IdAt(const RequestOffsets& o, const Request& req, size_t r, size_t f, int64_t c) {
  if (c == 0) return 0;
  if (c == req.num_candidates) return static_cast<int64_t>(req.features[f].ids.size());
  return o.of(r, f)[c];
}

// Ids of segment s of feature f: [first, end) within the request's ids.
struct IdRange {
  int64_t first = 0, end = 0;
};
IdRange SegmentIds(const RequestOffsets& o, absl::Span<const Request* const> requests,
                   const RowSegment& s, size_t f) {
  const Request& req = *requests[s.request];
  if (Shared(req.features[f])) return {0, static_cast<int64_t>(req.features[f].ids.size())};
  return {IdAt(o, req, s.request, f, s.first_candidate),
          IdAt(o, req, s.request, f, s.first_candidate + s.count)};
}

}  // namespace

void ComputeRequestOffsets(const Model& model, absl::Span<const Request* const> requests,
                           RequestOffsets* out, const ParallelFor& parallel, bool bag_offsets) {
  RequestOffsets& o = *out;
  const size_t nf = model.features.size();
  o.num_features = nf;
  o.has_bag_offsets = bag_offsets;
  o.row_start.assign(requests.size() + 1, 0);
  for (size_t r = 0; r < requests.size(); ++r) {
    o.row_start[r + 1] = o.row_start[r] + requests[r]->num_candidates;
  }
  if (!bag_offsets) {
    o.data.clear();  // keeps its capacity
    o.start.clear();
    return;
  }
  o.start.resize(requests.size() * nf);
  int64_t at = 0;
  for (size_t r = 0; r < requests.size(); ++r) {
    for (size_t f = 0; f < nf; ++f) {
      o.start[r * nf + f] = at;
      at += static_cast<int64_t>(requests[r]->features[f].lengths.size()) + 1;
    }
  }
  o.data.resize(at);  // keeps its capacity: no allocation once large enough
  auto feature = [&](int64_t f) {
    for (size_t r = 0; r < requests.size(); ++r) {
      const auto& lengths = requests[r]->features[f].lengths;
      int64_t* off = o.data.data() + o.start[r * nf + f];
      int64_t sum = 0;
      off[0] = 0;
      for (size_t b = 0; b < lengths.size(); ++b) {
        sum += lengths[b];
        off[b + 1] = sum;
      }
    }
  };
  if (parallel) {
    parallel(static_cast<int64_t>(nf), feature);
  } else {
    for (size_t f = 0; f < nf; ++f) feature(static_cast<int64_t>(f));
  }
}

int64_t CountSliceIds(const Model& model, absl::Span<const Request* const> requests,
                      const RequestOffsets& o, int64_t row_begin, int64_t row_end) {
  int64_t total = 0;
  for (const Segment& s : Segments(o, row_begin, row_end)) {
    for (size_t f = 0; f < model.features.size(); ++f) {
      const IdRange ids = SegmentIds(o, requests, s, f);
      total += ids.end - ids.first;
    }
  }
  return total;
}

bool CompactIdsFit(int64_t ids_capacity) { return ids_capacity <= INT32_MAX; }

bool NarrowIds(const Model& model, size_t feature) {
  const EmbeddingTable& t = model.tables[model.features[feature].table];
  return !t.dynamic && t.num_rows <= INT32_MAX;
}

namespace {

bool AnyWideIds(const Model& model) {
  for (size_t f = 0; f < model.features.size(); ++f) {
    if (!NarrowIds(model, f)) return true;
  }
  return false;
}

}  // namespace

int64_t BagIdAt(const PackedLayout& l, const uint8_t* arena, int64_t i) {
  if (l.compact) return reinterpret_cast<const int32_t*>(arena + l.bag_ids_offset)[i];
  return reinterpret_cast<const int64_t*>(arena + l.bag_ids_offset)[i];
}

int64_t FeatureIds(const PackedLayout& l, const uint8_t* arena, size_t f) {
  const auto& df =
      reinterpret_cast<const kernels::cuda::DeviceFeature*>(arena + l.features_offset)[f];
  if (df.unit_bags) return df.num_bags;
  return BagIdAt(l, arena, df.bag_begin + df.num_bags) - BagIdAt(l, arena, df.bag_begin);
}

void ExpandUnitBags(const PackedLayout& l, int num_features, uint8_t* arena) {
  const auto* features =
      reinterpret_cast<const kernels::cuda::DeviceFeature*>(arena + l.features_offset);
  auto* rows = reinterpret_cast<int32_t*>(arena + l.bag_rows_offset);
  for (int f = 0; f < num_features; ++f) {
    const kernels::cuda::DeviceFeature& df = features[f];
    if (!df.unit_bags) continue;
    for (int64_t j = 0; j <= df.num_bags; ++j) {
      if (l.compact) {
        reinterpret_cast<int32_t*>(arena + l.bag_ids_offset)[df.bag_begin + j] =
            static_cast<int32_t>(df.id_begin + j);
      } else {
        reinterpret_cast<int64_t*>(arena + l.bag_ids_offset)[df.bag_begin + j] = df.id_begin + j;
      }
      rows[df.bag_begin + j] = static_cast<int32_t>(j);
    }
  }
}

PackedLayout MakeLayout(const Model& model, int64_t padded_rows, int64_t ids_capacity,
                        int dense_ld, bool compact, bool unit_bags) {
  PackedLayout l;
  l.compact = compact;
  l.unit_bags = unit_bags;
  l.dense_ld = std::max(dense_ld, model.num_dense);
  l.padded_rows = padded_rows;
  l.ids_capacity = ids_capacity;
  const int64_t nf = static_cast<int64_t>(model.features.size());
  const int64_t entries = padded_rows * nf + nf;
  l.max_bags = padded_rows * nf;
  size_t at = 0;
  l.dense_offset = at;
  at = Align16(at + sizeof(float) * padded_rows * l.dense_ld);
  l.bag_ids_offset = at;
  at = Align16(at + l.id_bytes() * entries);
  l.bag_rows_offset = at;
  at = Align16(at + sizeof(int32_t) * entries);
  l.features_offset = at;
  at = Align16(at + sizeof(kernels::cuda::DeviceFeature) * nf);
  l.bag_prefix_offset = at;
  at = Align16(at + sizeof(int64_t) * (nf + 1));
  l.ids_offset = at;
  at = Align16(at + l.id_bytes() * ids_capacity);
  l.wide_ids_offset = at;
  if (compact && AnyWideIds(model)) at = Align16(at + sizeof(int64_t) * ids_capacity);
  l.weights_offset = at;
  at = Align16(at + sizeof(float) * ids_capacity);
  l.bytes = at;
  return l;
}

namespace {

// Where each feature's bag entries and ids go in a slice, fixed before any
// task writes, so the features can be packed independently.
struct SlicePlan {
  std::vector<Segment> segments;
  std::vector<int64_t> entry_begin;  // [F + 1]: bags plus one sentinel each
  // [F]: where each feature's ids start. In feature order; in the compact
  // layout the narrow features' ids first, then the wide ones'.
  std::vector<int64_t> id_begin;
  std::vector<uint8_t> wide;         // [F]: compact layout, ids kept int64
  std::vector<uint8_t> weighted;     // [F]: some request of the slice sent weights
  int64_t total_ids = 0;
  int64_t narrow_ids = 0;            // compact layout: ids [0, narrow_ids) are int32
};

SlicePlan PlanSlice(const Model& model, absl::Span<const Request* const> requests,
                    const RequestOffsets& o, int64_t row_begin, int64_t row_end, bool compact) {
  SlicePlan p;
  p.segments = Segments(o, row_begin, row_end);
  const size_t nf = model.features.size();
  p.entry_begin.assign(nf + 1, 0);
  p.id_begin.assign(nf, 0);
  p.wide.assign(nf, 0);
  p.weighted.assign(nf, 0);
  for (size_t f = 0; f < nf; ++f) {
    int64_t entries = 1, ids = 0;  // the sentinel
    for (const Segment& s : p.segments) {
      const FeatureInput& in = requests[s.request]->features[f];
      const IdRange range = SegmentIds(o, requests, s, f);
      entries += Shared(in) ? 1 : s.count;
      ids += range.end - range.first;
      if (!in.weights.empty()) p.weighted[f] = 1;
    }
    p.entry_begin[f + 1] = p.entry_begin[f] + entries;
    p.id_begin[f] = ids;  // the feature's id count until the pass below
    p.wide[f] = compact && !NarrowIds(model, f);
  }
  for (int pass = 0; pass < 2; ++pass) {  // narrow features first, then wide
    for (size_t f = 0; f < nf; ++f) {
      if (p.wide[f] != pass) continue;
      const int64_t count = p.id_begin[f];
      p.id_begin[f] = p.total_ids;
      p.total_ids += count;
    }
    if (pass == 0) p.narrow_ids = p.total_ids;
  }
  return p;
}

// Dense rows [a, b) of the slice's padded rows (zeros past `rows` and past
// num_dense).
void PackDense(const Model& model, absl::Span<const Request* const> requests,
               const std::vector<Segment>& segments, const PackedLayout& l, int64_t a,
               int64_t b, float* dense) {
  const int nd = model.num_dense;
  const int ld = l.dense_ld;
  for (const Segment& s : segments) {
    const int64_t from = std::max(a, s.local_row);
    const int64_t to = std::min(b, s.local_row + s.count);
    if (from >= to) continue;
    if (nd == 0) {  // no dense features (an empty span's data() may be null)
      std::fill(dense + from * ld, dense + to * ld, 0.0f);
      continue;
    }
    const float* src =
        requests[s.request]->dense.data() + (s.first_candidate + from - s.local_row) * nd;
    if (ld == nd) {
      std::memcpy(dense + from * ld, src, sizeof(float) * (to - from) * nd);
    } else {
      for (int64_t i = 0; i < to - from; ++i) {
        float* dst = dense + (from + i) * ld;
        std::memcpy(dst, src + i * nd, sizeof(float) * nd);
        std::fill(dst + nd, dst + ld, 0.0f);
      }
    }
  }
  const int64_t pad_from = std::max(a, l.rows);
  if (pad_from < b) std::fill(dense + pad_from * ld, dense + b * ld, 0.0f);
}

// n ids from `from` to `to`: copied, or narrowed to int32 with the ids
// outside [0, 2^31) written as -1 (no row: a NarrowIds feature's table has
// fewer than 2^31 rows, so none of them names a row either).
void CopyIds(const int64_t* from, int64_t n, int64_t* to) {
  std::memcpy(to, from, sizeof(int64_t) * n);
}
void CopyIds(const int64_t* from, int64_t n, int32_t* to) { NarrowIdsToInt32(from, n, to); }

// Whether every bag of feature f in the slice holds exactly one id and
// covers one row (a shared bag only when its request has one candidate).
bool UnitBags(absl::Span<const Request* const> requests, const std::vector<Segment>& segments,
              size_t f) {
  for (const Segment& s : segments) {
    const FeatureInput& in = requests[s.request]->features[f];
    if (Shared(in)) {
      if (s.count != 1 || in.lengths[0] != 1) return false;
      continue;
    }
    if (!AllLengthsOne(in.lengths.data() + s.first_candidate, s.count)) return false;
  }
  return true;
}

// Feature f's descriptor, bags (entries and sentinel), ids and weights;
// IdT is int64_t, or int32_t for the compact layout.
template <typename IdT, typename OffsetT>
void PackFeature(const Model& model, absl::Span<const Request* const> requests,
                 const RequestOffsets& o, const SlicePlan& p, size_t f, int feat_col,
                 const PackedLayout& l, uint8_t* arena) {
  IdT* ids = reinterpret_cast<IdT*>(arena + (p.wide[f] ? l.wide_ids_offset : l.ids_offset));
  float* weights = reinterpret_cast<float*>(arena + l.weights_offset);
  OffsetT* bag_ids = reinterpret_cast<OffsetT*>(arena + l.bag_ids_offset);
  int32_t* bag_rows = reinterpret_cast<int32_t*>(arena + l.bag_rows_offset);
  auto& df = reinterpret_cast<kernels::cuda::DeviceFeature*>(arena + l.features_offset)[f];
  df.table = model.features[f].table;
  df.out_col = feat_col;
  df.bag_begin = p.entry_begin[f];
  df.num_bags = p.entry_begin[f + 1] - p.entry_begin[f] - 1;
  df.weighted = p.weighted[f];
  df.wide_ids = p.wide[f];
  df.unit_bags = l.unit_bags && UnitBags(requests, p.segments, f) ? 1 : 0;
  df.id_begin = p.id_begin[f];
  // Bags of the features before: their entries less one sentinel each.
  reinterpret_cast<int64_t*>(arena + l.bag_prefix_offset)[f] =
      p.entry_begin[f] - static_cast<int64_t>(f);
  int64_t id_at = p.id_begin[f];
  int64_t entry_at = p.entry_begin[f];
  for (const Segment& s : p.segments) {
    const FeatureInput& in = requests[s.request]->features[f];
    const IdRange range = SegmentIds(o, requests, s, f);
    auto copy_ids = [&](int64_t from, int64_t to) {
      const int64_t n = to - from;
      if (n == 0) return;  // an empty span's data() may be null: no memcpy from it
      CopyIds(in.ids.data() + from, n, ids + id_at);
      if (!p.weighted[f]) return;  // the kernels read no weights for this feature
      if (!in.weights.empty()) {
        std::memcpy(weights + id_at, in.weights.data() + from, sizeof(float) * n);
      } else {
        std::fill(weights + id_at, weights + id_at + n, 1.0f);
      }
    };
    if (df.unit_bags) {
      // Ids only: the bag entries are expanded later (ExpandUnitBags).
    } else if (Shared(in)) {
      bag_ids[entry_at] = static_cast<OffsetT>(id_at);
      bag_rows[entry_at] = static_cast<int32_t>(s.local_row);
      ++entry_at;
    } else {
      // Each bag starts where the one before ended (lengths' prefix sums).
      const int32_t* lengths = in.lengths.data() + s.first_candidate;
      int64_t at = id_at;
      for (int64_t c = 0; c < s.count; ++c) {
        bag_ids[entry_at] = static_cast<OffsetT>(at);
        bag_rows[entry_at] = static_cast<int32_t>(s.local_row + c);
        at += lengths[c];
        ++entry_at;
      }
    }
    copy_ids(range.first, range.end);
    id_at += range.end - range.first;
  }
  if (df.unit_bags) return;
  // Sentinel: end of the last bag's ids and rows.
  bag_ids[entry_at] = static_cast<OffsetT>(id_at);
  bag_rows[entry_at] = static_cast<int32_t>(l.rows);
}

// Dense rows per packing task: large enough that a task's start is noise,
// small enough that the dense rows split over the pool's threads (a task is
// about as long as one feature's ids of a few thousand rows).
constexpr int64_t kDenseRowsPerTask = 2048;

}  // namespace

void PackSlice(const Model& model, absl::Span<const Request* const> requests,
               const RequestOffsets& o, int64_t row_begin, int64_t row_end,
               absl::Span<const int> feat_col, PackedLayout* layout, uint8_t* arena,
               const ParallelFor& parallel, PackParts parts) {
  PackedLayout& l = *layout;
  l.rows = row_end - row_begin;
  float* dense = reinterpret_cast<float*>(arena + l.dense_offset);
  const int64_t dense_tasks = (l.padded_rows + kDenseRowsPerTask - 1) / kDenseRowsPerTask;
  if (parts == PackParts::kDense) {
    // The dense rows need only the segments, not the bag and id plan.
    const std::vector<Segment> segments = Segments(o, row_begin, row_end);
    auto dense_task = [&](int64_t t) {
      const int64_t a = t * kDenseRowsPerTask;
      PackDense(model, requests, segments, l, a, std::min(l.padded_rows, a + kDenseRowsPerTask),
                dense);
    };
    if (parallel) {
      parallel(dense_tasks, dense_task);
    } else {
      for (int64_t t = 0; t < dense_tasks; ++t) dense_task(t);
    }
    return;
  }
  const SlicePlan p = PlanSlice(model, requests, o, row_begin, row_end, l.compact);
  const size_t nf = model.features.size();
  // The dense chunks first: a pool hands tasks out in order, and a long task
  // taken last would finish alone.
  const int64_t first_feature = parts == PackParts::kSparse ? 0 : dense_tasks;
  auto task = [&](int64_t t) {
    if (t < first_feature) {
      const int64_t a = t * kDenseRowsPerTask;
      PackDense(model, requests, p.segments, l, a,
                std::min(l.padded_rows, a + kDenseRowsPerTask), dense);
      return;
    }
    const size_t f = static_cast<size_t>(t - first_feature);
    if (!l.compact) {
      PackFeature<int64_t, int64_t>(model, requests, o, p, f, feat_col[f], l, arena);
    } else if (p.wide[f]) {
      PackFeature<int64_t, int32_t>(model, requests, o, p, f, feat_col[f], l, arena);
    } else {
      PackFeature<int32_t, int32_t>(model, requests, o, p, f, feat_col[f], l, arena);
    }
  };
  const int64_t tasks = first_feature + static_cast<int64_t>(nf);
  if (parallel) {
    parallel(tasks, task);
  } else {
    for (int64_t t = 0; t < tasks; ++t) task(t);
  }
  reinterpret_cast<int64_t*>(arena + l.bag_prefix_offset)[nf] =
      p.entry_begin[nf] - static_cast<int64_t>(nf);
  l.total_ids = p.total_ids;
  l.narrow_ids = l.compact ? p.narrow_ids : 0;
  l.total_bags = p.entry_begin[nf] - static_cast<int64_t>(nf);
  l.any_weighted = false;
  for (uint8_t w : p.weighted) l.any_weighted |= w != 0;
  const auto* features =
      reinterpret_cast<const kernels::cuda::DeviceFeature*>(arena + l.features_offset);
  l.all_unit = l.unit_bags && nf > 0;
  for (size_t f = 0; f < nf && l.all_unit; ++f) l.all_unit = features[f].unit_bags != 0;
}

}  // namespace rankd::engine::cuda
