#include "engine/updates/host_table_store.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/dynamic_table.h"

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
  if (t.dynamic) return ApplyDynamic(t, delta, now, result);
  // Written only under LiveTables' exclusive gate: no worker reads them now.
  uint8_t* rows = const_cast<uint8_t*>(t.rows.data);
  const int64_t row_bytes = t.row_bytes();
  for (size_t i = 0; i < delta.ids.size(); ++i) {
    std::memcpy(rows + delta.ids[i] * row_bytes, delta.rows.data() + i * row_bytes, row_bytes);
  }
  result->rows_applied += static_cast<int64_t>(delta.ids.size());
  return absl::OkStatus();
}

absl::Status HostTableStore::ApplyDynamic(const EmbeddingTable& t, const TableDelta& delta,
                                          uint64_t now, DeltaResult* result) {
  if (t.live == nullptr || !t.keys.writable) {
    return absl::FailedPreconditionError(
        absl::StrCat("table ", t.name, " has no host update state (hash slots on the host)"));
  }
  const kernels::DynamicTableView view = t.dynamic_view();
  const kernels::DynamicStats erased = kernels::DynamicErase(view, delta.delete_keys);
  const kernels::DynamicStats upserted = kernels::DynamicUpsert(
      view, delta.ids, delta.rows.data(), t.eviction_policy(), now, /*evicted_keys=*/nullptr);
  if (erased.failed > 0 || upserted.failed > 0) {
    // Only a corrupt table gets here (the delta was validated).
    return absl::InternalError(absl::StrCat("table ", t.name, ": ",
                                            erased.failed + upserted.failed,
                                            " keys found no hash slot"));
  }
  AddDynamicStats(erased, upserted, result);
  return absl::OkStatus();
}

absl::Status HostTableStore::ReadTable(int table, const TableSink& sink) const {
  const EmbeddingTable& t = model_->tables[table];
  if (t.dynamic) return ReadDynamic(t, sink);
  const int64_t row_bytes = t.row_bytes();
  const int64_t per_piece = std::max<int64_t>(1, kReadPieceBytes / std::max<int64_t>(row_bytes, 1));
  for (int64_t r = 0; r < t.num_rows; r += per_piece) {
    const int64_t n = std::min(per_piece, t.num_rows - r);
    absl::Status s = sink({}, absl::MakeConstSpan(t.rows.data + r * row_bytes, n * row_bytes));
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// Stored keys in row order, gathered into pieces of a bounded size (rows of
// a dynamic table are not contiguous once keys were erased).
absl::Status HostTableStore::ReadDynamic(const EmbeddingTable& t, const TableSink& sink) const {
  if (t.live == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("table ", t.name, " has no host update state"));
  }
  const int64_t row_bytes = t.row_bytes();
  const int64_t per_piece = std::max<int64_t>(1, kReadPieceBytes / std::max<int64_t>(row_bytes, 1));
  const int64_t* row_keys = reinterpret_cast<const int64_t*>(t.keys.data);
  std::vector<int64_t> keys;
  std::vector<uint8_t> rows;
  // At most the table's own size: a piece is sized for big tables, and a
  // small table read (a snapshot, a check) must not allocate a whole one.
  const int64_t reserve = std::min(per_piece, t.max_keys);
  keys.reserve(reserve);
  rows.reserve(reserve * row_bytes);
  for (int64_t r = 0; r < t.max_keys; ++r) {
    if (row_keys[r] == kernels::kEmptyKey) continue;
    keys.push_back(row_keys[r]);
    rows.insert(rows.end(), t.rows.data + r * row_bytes, t.rows.data + (r + 1) * row_bytes);
    if (static_cast<int64_t>(keys.size()) == per_piece) {
      if (absl::Status s = sink(keys, rows); !s.ok()) return s;
      keys.clear();
      rows.clear();
    }
  }
  if (!keys.empty()) return sink(keys, rows);
  return absl::OkStatus();
}

}  // namespace rankd::engine
