// How a batch's requests map onto rows: request r's candidates are rows
// [row_start[r], row_start[r + 1]). Shared by the CPU engine's tasks and the
// CUDA worker's batch packer, which both cut row ranges across requests.
#ifndef RANKD_ENGINE_BATCH_ROWS_H_
#define RANKD_ENGINE_BATCH_ROWS_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace rankd::engine {

// A run of rows of one range that belong to one request.
struct RowSegment {
  size_t request = 0;
  int64_t first_candidate = 0;  // candidate index within the request
  int64_t local_row = 0;        // row index within the range
  int64_t count = 0;
};

// Splits rows [row_begin, row_end) into per-request runs, in order.
inline std::vector<RowSegment> SegmentRows(absl::Span<const int64_t> row_start,
                                           int64_t row_begin, int64_t row_end) {
  std::vector<RowSegment> out;
  size_t r = std::upper_bound(row_start.begin(), row_start.end(), row_begin) -
             row_start.begin() - 1;
  for (int64_t row = row_begin; row < row_end;) {
    while (row_start[r + 1] <= row) ++r;
    const int64_t take = std::min(row_end, row_start[r + 1]) - row;
    out.push_back({r, row - row_start[r], row - row_begin, take});
    row += take;
  }
  return out;
}

// Bag offsets of one feature: lengths.size() + 1 prefix sums.
template <typename Lengths>
std::vector<int64_t> BagOffsets(const Lengths& lengths) {
  std::vector<int64_t> off(lengths.size() + 1, 0);
  for (size_t b = 0; b < lengths.size(); ++b) off[b + 1] = off[b] + lengths[b];
  return off;
}

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_BATCH_ROWS_H_
