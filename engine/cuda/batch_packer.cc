#include "engine/cuda/batch_packer.h"

#include <algorithm>
#include <cstring>

#include "engine/batch_rows.h"
#include "kernels/cuda/embedding_lookup.h"

namespace rankd::engine::cuda {
namespace {

size_t Align16(size_t x) { return (x + 15) & ~size_t{15}; }

using Segment = RowSegment;

std::vector<Segment> Segments(const RequestOffsets& o, int64_t row_begin, int64_t row_end) {
  return SegmentRows(o.row_start, row_begin, row_end);
}

bool Shared(const FeatureInput& in) { return in.lengths.size() == 1; }

}  // namespace

RequestOffsets ComputeRequestOffsets(const Model& model,
                                     absl::Span<const Request* const> requests) {
  RequestOffsets o;
  o.row_start.assign(requests.size() + 1, 0);
  o.offsets.resize(requests.size());
  for (size_t r = 0; r < requests.size(); ++r) {
    o.row_start[r + 1] = o.row_start[r] + requests[r]->num_candidates;
    o.offsets[r].resize(model.features.size());
    for (size_t f = 0; f < model.features.size(); ++f) {
      o.offsets[r][f] = BagOffsets(requests[r]->features[f].lengths);
    }
  }
  return o;
}

int64_t CountSliceIds(const Model& model, absl::Span<const Request* const> requests,
                      const RequestOffsets& o, int64_t row_begin, int64_t row_end) {
  int64_t total = 0;
  for (const Segment& s : Segments(o, row_begin, row_end)) {
    for (size_t f = 0; f < model.features.size(); ++f) {
      const auto& off = o.offsets[s.request][f];
      total += Shared(requests[s.request]->features[f])
                   ? off[1]
                   : off[s.first_candidate + s.count] - off[s.first_candidate];
    }
  }
  return total;
}

PackedLayout MakeLayout(const Model& model, int64_t padded_rows, int64_t ids_capacity,
                        int dense_ld) {
  PackedLayout l;
  l.dense_ld = std::max(dense_ld, model.num_dense);
  l.padded_rows = padded_rows;
  l.ids_capacity = ids_capacity;
  const int64_t nf = static_cast<int64_t>(model.features.size());
  const int64_t entries = padded_rows * nf + nf;
  l.max_bags_value = padded_rows * nf;
  size_t at = 0;
  l.dense_offset = at;
  at = Align16(at + sizeof(float) * padded_rows * l.dense_ld);
  l.bag_ids_offset = at;
  at = Align16(at + sizeof(int64_t) * entries);
  l.bag_rows_offset = at;
  at = Align16(at + sizeof(int32_t) * entries);
  l.features_offset = at;
  at = Align16(at + sizeof(kernels::cuda::DeviceFeature) * nf);
  l.bag_prefix_offset = at;
  at = Align16(at + sizeof(int64_t) * (nf + 1));
  l.ids_offset = at;
  at = Align16(at + sizeof(int64_t) * ids_capacity);
  l.weights_offset = at;
  at = Align16(at + sizeof(float) * ids_capacity);
  l.bytes = at;
  return l;
}

void PackSlice(const Model& model, absl::Span<const Request* const> requests,
               const RequestOffsets& o, int64_t row_begin, int64_t row_end,
               absl::Span<const int> feat_col, PackedLayout* layout, uint8_t* arena) {
  PackedLayout& l = *layout;
  l.rows = row_end - row_begin;
  l.any_weighted = false;
  const std::vector<Segment> segments = Segments(o, row_begin, row_end);
  const int nd = model.num_dense;
  const int ld = l.dense_ld;
  float* dense = reinterpret_cast<float*>(arena + l.dense_offset);
  for (const Segment& s : segments) {
    const float* src = requests[s.request]->dense.data() + s.first_candidate * nd;
    if (ld == nd) {
      std::memcpy(dense + s.local_row * ld, src, sizeof(float) * s.count * nd);
    } else {
      for (int64_t i = 0; i < s.count; ++i) {
        float* dst = dense + (s.local_row + i) * ld;
        std::memcpy(dst, src + i * nd, sizeof(float) * nd);
        std::fill(dst + nd, dst + ld, 0.0f);
      }
    }
  }
  std::fill(dense + l.rows * ld, dense + l.padded_rows * ld, 0.0f);

  int64_t* ids = reinterpret_cast<int64_t*>(arena + l.ids_offset);
  float* weights = reinterpret_cast<float*>(arena + l.weights_offset);
  int64_t* bag_ids = reinterpret_cast<int64_t*>(arena + l.bag_ids_offset);
  int32_t* bag_rows = reinterpret_cast<int32_t*>(arena + l.bag_rows_offset);
  auto* features = reinterpret_cast<kernels::cuda::DeviceFeature*>(arena + l.features_offset);
  int64_t* bag_prefix = reinterpret_cast<int64_t*>(arena + l.bag_prefix_offset);

  int64_t id_at = 0;     // next free id slot
  int64_t entry_at = 0;  // next bag entry (bags + sentinels)
  int64_t bags_before = 0;
  for (size_t f = 0; f < model.features.size(); ++f) {
    kernels::cuda::DeviceFeature& df = features[f];
    df.table = model.features[f].table;
    df.out_col = feat_col[f];
    df.bag_begin = entry_at;
    df.weighted = 0;
    bag_prefix[f] = bags_before;
    for (const Segment& s : segments) {
      const FeatureInput& in = requests[s.request]->features[f];
      const auto& off = o.offsets[s.request][f];
      const bool weighted = !in.weights.empty();
      df.weighted |= weighted ? 1 : 0;
      auto copy_ids = [&](int64_t from, int64_t to) {
        const int64_t n = to - from;
        std::memcpy(ids + id_at, in.ids.data() + from, sizeof(int64_t) * n);
        if (weighted) {
          std::memcpy(weights + id_at, in.weights.data() + from, sizeof(float) * n);
        } else {
          std::fill(weights + id_at, weights + id_at + n, 1.0f);
        }
      };
      if (Shared(in)) {
        bag_ids[entry_at] = id_at;
        bag_rows[entry_at] = static_cast<int32_t>(s.local_row);
        ++entry_at;
        copy_ids(0, off[1]);
        id_at += off[1];
      } else {
        const int64_t first = off[s.first_candidate];
        for (int64_t c = 0; c < s.count; ++c) {
          bag_ids[entry_at] = id_at + off[s.first_candidate + c] - first;
          bag_rows[entry_at] = static_cast<int32_t>(s.local_row + c);
          ++entry_at;
        }
        const int64_t last = off[s.first_candidate + s.count];
        copy_ids(first, last);
        id_at += last - first;
      }
    }
    df.num_bags = entry_at - df.bag_begin;
    l.any_weighted |= df.weighted != 0;
    bags_before += df.num_bags;
    // Sentinel: end of the last bag's ids and rows.
    bag_ids[entry_at] = id_at;
    bag_rows[entry_at] = static_cast<int32_t>(l.rows);
    ++entry_at;
  }
  bag_prefix[model.features.size()] = bags_before;
  l.total_ids = id_at;
  l.total_bags = bags_before;
}

}  // namespace rankd::engine::cuda
