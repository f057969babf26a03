#include "engine/updates/host_table_store.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace rankd::engine {
namespace {

// Static tables are read out in pieces of about this many bytes.
constexpr int64_t kReadPieceBytes = int64_t{16} << 20;

absl::Status Frozen(const EmbeddingTable& t) {
  return absl::FailedPreconditionError(absl::StrCat(
      "table ", t.name, " is not writable (a model built over borrowed memory, not loaded by "
      "LoadModel)"));
}

}  // namespace

absl::Status HostTableStore::Apply(const TableDelta& delta, uint64_t now, DeltaResult* result) {
  const EmbeddingTable& t = model_->tables[delta.table];
  if (!t.rows.writable) return Frozen(t);
  if (t.dynamic) {
    return absl::UnimplementedError("dynamic table updates are not applied yet");
  }
  // Written only under LiveTables' exclusive gate: no worker reads them now.
  uint8_t* rows = const_cast<uint8_t*>(t.rows.data);
  const int64_t row_bytes = t.row_bytes();
  for (size_t i = 0; i < delta.ids.size(); ++i) {
    std::memcpy(rows + delta.ids[i] * row_bytes, delta.rows.data() + i * row_bytes, row_bytes);
  }
  result->rows_applied += static_cast<int64_t>(delta.ids.size());
  (void)now;
  return absl::OkStatus();
}

absl::Status HostTableStore::ReadTable(int table, const TableSink& sink) const {
  const EmbeddingTable& t = model_->tables[table];
  if (t.dynamic) {
    return absl::UnimplementedError("dynamic table snapshots are not written yet");
  }
  const int64_t row_bytes = t.row_bytes();
  const int64_t per_piece = std::max<int64_t>(1, kReadPieceBytes / std::max<int64_t>(row_bytes, 1));
  for (int64_t r = 0; r < t.num_rows; r += per_piece) {
    const int64_t n = std::min(per_piece, t.num_rows - r);
    absl::Status s = sink({}, absl::MakeConstSpan(t.rows.data + r * row_bytes, n * row_bytes));
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace rankd::engine
