#include "engine/cuda/cuda_table_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace rankd::engine::cuda {
namespace {

// Snapshots read a table in pieces of about this many bytes.
constexpr int64_t kReadPieceBytes = int64_t{16} << 20;

absl::Status DynamicNotWired(const EmbeddingTable& t) {
  return absl::FailedPreconditionError(absl::StrCat(
      "table ", t.name, " is DYNAMIC: online key inserts, deletes and snapshots of dynamic "
      "tables run on the CPU backend only for now (static tables update on the GPU)"));
}

}  // namespace

absl::Status CudaTableStore::Apply(const TableDelta& delta, uint64_t, DeltaResult* result) {
  const EmbeddingTable& t = devices_.at(0)->model().tables[delta.table];
  if (t.dynamic) return DynamicNotWired(t);
  for (const auto& dm : devices_) {
    absl::Status s = dm->WriteStaticRows(delta.table, delta.ids, delta.rows);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("GPU ", dm->device(), ": ", s.message()));
    }
  }
  result->rows_applied += static_cast<int64_t>(delta.ids.size());
  return absl::OkStatus();
}

absl::Status CudaTableStore::ReadTable(int table, const TableSink& sink) const {
  const DeviceModel& dm = *devices_.at(0);
  const EmbeddingTable& t = dm.model().tables[table];
  if (t.dynamic) return DynamicNotWired(t);
  const int64_t row_bytes = t.row_bytes();
  const int64_t per_piece = std::max<int64_t>(1, kReadPieceBytes / std::max<int64_t>(row_bytes, 1));
  std::vector<uint8_t> piece(std::min(per_piece, t.num_rows) * row_bytes);
  for (int64_t r = 0; r < t.num_rows; r += per_piece) {
    const int64_t n = std::min(per_piece, t.num_rows - r);
    absl::Status s = dm.ReadStaticRows(table, r, n, piece.data());
    if (s.ok()) s = sink({}, absl::MakeConstSpan(piece.data(), n * row_bytes));
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace rankd::engine::cuda
