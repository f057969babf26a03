// Packs a slice of a batch (rows [row_begin, row_end) over its requests) into
// one contiguous host arena in the layout the GPU kernels read, so a worker
// copies it to the device with a single cudaMemcpyAsync. Plain C++ (no CUDA
// calls): tested on machines without a GPU.
//
// Arena layout (each region 16-byte aligned, in this order). Offsets depend
// only on (padded_rows, ids_capacity), never on the batch's contents, so a
// CUDA graph captured for a bucket stays valid for every batch of that bucket:
//   dense     float   [padded_rows, dense_ld]   rows past `rows` and columns
//                                               past num_dense are zeros
//   bag_ids   int64   [padded_rows * F + F]     absolute into ids; per feature
//             (int32 when compact)              num_bags_f + 1 entries used
//   bag_rows  int32   [padded_rows * F + F]     slice-local rows
//   features  kernels::cuda::DeviceFeature [F]
//   bag_prefix int64  [F + 1]
//   ids       int64   [ids_capacity]            all features' ids (total_ids used)
//             (int32 when compact: the narrow features' ids, [0, narrow_ids)
//             used; an id outside [0, 2^31) is written as -1, which resolves
//             to no row like every out-of-range row index)
//   wide_ids  int64   [ids_capacity]            compact only, and only when some
//                                               feature is wide: its ids, at
//                                               [narrow_ids, total_ids)
//   weights   float   [ids_capacity]            written only for weighted features
//                                               (DeviceFeature::weighted): their
//                                               ids' weights, 1.0 where a request
//                                               of the slice sent none; the
//                                               kernels read no other entry
// The used bytes are [0, ids_end()), the wide ids' range (compact layout,
// wide_ids_begin() to wide_ids_end(), empty without wide features) and the
// weights' first 4 * total_ids bytes (only needed when some feature is
// weighted).
//
// Compact layout (MakeLayout's `compact`): bag offsets as int32, and the ids
// of every feature whose table is keyed by row index with fewer than 2^31
// rows (NarrowIds) as int32, which halves the largest regions of the copy to
// the GPU. The other ("wide") features' ids (DYNAMIC tables: 64-bit keys)
// stay int64 in their own region; their DeviceFeature::wide_ids is set.
// Arenas of fewer than 2^31 ids only (CompactIdsFit).
//
// Packing can be split over threads (a ParallelFor): each feature's bags and
// ids, and each chunk of dense rows, are written by one task into a region
// fixed before the tasks start, so the arena's bytes do not depend on how the
// tasks were scheduled.
// A request's shared bag (one `lengths` entry) becomes one bag covering all of
// its candidates' rows, so it is pooled once and broadcast by the kernel.
#ifndef RANKD_ENGINE_CUDA_BATCH_PACKER_H_
#define RANKD_ENGINE_CUDA_BATCH_PACKER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/model/model.h"
#include "engine/request.h"

namespace rankd::engine::cuda {

struct PackedLayout {
  int64_t rows = 0;         // real rows in this slice
  int64_t padded_rows = 0;  // rows the dense and bag regions hold
  int64_t ids_capacity = 0;
  int dense_ld = 0;         // floats per dense row (>= num_dense)
  int64_t total_ids = 0;    // set by PackSlice
  int64_t total_bags = 0;   // set by PackSlice: sum of num_bags (no sentinels)
  bool any_weighted = false;  // set by PackSlice
  size_t dense_offset = 0;
  size_t ids_offset = 0;
  size_t weights_offset = 0;
  size_t bag_ids_offset = 0;
  size_t bag_rows_offset = 0;
  size_t features_offset = 0;
  size_t bag_prefix_offset = 0;
  size_t bytes = 0;         // arena size for this (padded_rows, ids_capacity)
  // Upper bound of bags: every row one bag per feature.
  int64_t max_bags = 0;
  bool compact = false;     // bag_ids and the narrow features' ids as int32
  // Unit bags (MakeLayout's `unit_bags`): a feature whose every bag in the
  // slice holds one id for one row (DeviceFeature::unit_bags) gets its ids
  // only; its bag entries are left unwritten, for ExpandUnitBags (host) or
  // kernels::cuda::LaunchExpandUnitBags (device) to fill.
  bool unit_bags = false;
  bool all_unit = false;    // set by PackSlice: every feature's bags are unit
  size_t bag_entries_begin() const { return bag_ids_offset; }  // bag_ids, then bag_rows
  size_t bag_entries_end() const { return features_offset; }
  size_t wide_ids_offset = 0;  // compact: the wide features' int64 ids
  int64_t narrow_ids = 0;   // set by PackSlice: compact, ids [0, narrow_ids) are int32
  size_t id_bytes() const { return compact ? sizeof(int32_t) : sizeof(int64_t); }
  // End of the first used range (set once PackSlice has set the id counts).
  size_t ids_end() const {
    return ids_offset + id_bytes() * static_cast<size_t>(compact ? narrow_ids : total_ids);
  }
  // The wide ids' used range (empty unless compact with wide features).
  size_t wide_ids_begin() const { return wide_ids_offset + 8 * static_cast<size_t>(narrow_ids); }
  size_t wide_ids_end() const {
    return compact ? wide_ids_offset + 8 * static_cast<size_t>(total_ids) : wide_ids_begin();
  }
  // End of the dense region (it starts the arena: dense_offset is 0).
  size_t dense_end() const {
    return dense_offset + sizeof(float) * static_cast<size_t>(padded_rows) * dense_ld;
  }
};

// Whether the compact layout can hold arenas of up to `ids_capacity` ids
// (its bag offsets are int32). Any model: features that cannot narrow keep
// int64 ids.
bool CompactIdsFit(int64_t ids_capacity);
// Whether feature `feature`'s ids are int32 in the compact layout: its table
// is keyed by row index (not DYNAMIC) and has fewer than 2^31 rows.
bool NarrowIds(const Model& model, size_t feature);

// Bag offset i of a packed arena (either layout; a unit feature's entries
// only once expanded).
int64_t BagIdAt(const PackedLayout& layout, const uint8_t* arena, int64_t i);
// Ids of feature `f` in a packed arena (unit features too).
int64_t FeatureIds(const PackedLayout& layout, const uint8_t* arena, size_t f);
// Writes the bag entries of the arena's unit features, as explicit packing
// would have (the host twin of kernels::cuda::LaunchExpandUnitBags).
void ExpandUnitBags(const PackedLayout& layout, int num_features, uint8_t* arena);

// Runs task(i) for every i in [0, n), possibly on several threads at once,
// and returns when all have returned. Empty: in order, on the calling thread.
using ParallelFor = std::function<void(int64_t n, const std::function<void(int64_t)>& task)>;

// Where each request's rows start and, when asked for, its bag offsets
// (prefix sums of lengths), computed once per batch and reused by every
// slice. The bag offsets are needed only by slices that start or end inside
// a request (a batch of more than one slice): a slice of whole requests
// takes each bag's ids from the lengths as it packs. The storage is reused
// across batches (a worker keeps one), so a steady stream of batches of one
// size allocates nothing.
struct RequestOffsets {
  std::vector<int64_t> row_start;  // [R + 1]
  // Request r's feature f: lengths.size() + 1 offsets from data[start[r * F + f]]
  // (empty unless computed with bag offsets).
  std::vector<int64_t> data;
  std::vector<int64_t> start;  // [R * F]
  size_t num_features = 0;
  bool has_bag_offsets = false;
  const int64_t* of(size_t r, size_t f) const {
    return data.data() + start[r * num_features + f];
  }
};
// Fills `out`; the bag offsets (one task per feature when `parallel` is
// given) only when `bag_offsets`.
void ComputeRequestOffsets(const Model& model, absl::Span<const Request* const> requests,
                           RequestOffsets* out, const ParallelFor& parallel = nullptr,
                           bool bag_offsets = true);

// Ids of rows [row_begin, row_end) over all features (a shared bag counts
// once). Needs bag offsets unless the rows are whole requests; so do
// PackSlice and the rows it packs.
int64_t CountSliceIds(const Model& model, absl::Span<const Request* const> requests,
                      const RequestOffsets& offsets, int64_t row_begin, int64_t row_end);

// The fixed layout for a bucket of `padded_rows` rows and `ids_capacity` ids;
// dense rows are `dense_ld` floats apart (0 = num_dense); `compact` only
// where CompactIdsFit.
PackedLayout MakeLayout(const Model& model, int64_t padded_rows, int64_t ids_capacity,
                        int dense_ld = 0, bool compact = false, bool unit_bags = false);

// What one PackSlice call writes: the whole slice, or one of its two parts,
// so a worker can copy the dense rows and start the bottom MLP on them while
// it packs the rest. kDense then kSparse (or the reverse) on the same arena
// and layout writes the bytes and fills the layout exactly as kAll does.
enum class PackParts {
  kAll,
  kDense,   // the dense region, [dense_offset, dense_end()); sets layout.rows
  kSparse,  // everything else: bags, features, ids, weights, and the counts
};

// Writes rows [row_begin, row_end) (at most layout.padded_rows rows, at most
// layout.ids_capacity ids) into `arena` (layout.bytes bytes) and fills the
// layout's rows / total_ids / total_bags / any_weighted. `feat_col[f]` is the
// first column of feature f in the interaction input rows. With `parallel`,
// one task per feature and per chunk of dense rows (same bytes as without).
void PackSlice(const Model& model, absl::Span<const Request* const> requests,
               const RequestOffsets& offsets, int64_t row_begin, int64_t row_end,
               absl::Span<const int> feat_col, PackedLayout* layout, uint8_t* arena,
               const ParallelFor& parallel = nullptr, PackParts parts = PackParts::kAll);

}  // namespace rankd::engine::cuda

#endif  // RANKD_ENGINE_CUDA_BATCH_PACKER_H_
