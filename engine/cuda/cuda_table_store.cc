#include "engine/cuda/cuda_table_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace rankd::engine::cuda {
namespace {

// Snapshots read a table in pieces of about this many bytes.
constexpr int64_t kReadPieceBytes = int64_t{16} << 20;

int64_t RowsPerPiece(int64_t row_bytes) {
  return std::max<int64_t>(1, kReadPieceBytes / std::max<int64_t>(row_bytes, 1));
}

absl::Status OnGpu(int device, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat("GPU ", device, ": ", s.message()));
}

}  // namespace

// One delta on every GPU: each GPU's DeviceModel::Update, committed in GPU
// order; the result is the first GPU's (see the header).
class CudaUpdate final : public TableStore::Update {
 public:
  CudaUpdate(const TableDelta& delta, bool dynamic) : delta_(delta), dynamic_(dynamic) {}

  absl::Status Add(const DeviceModel& dm) {
    absl::StatusOr<std::unique_ptr<DeviceModel::Update>> u =
        dynamic_ ? dm.StageDynamic(delta_.table, delta_.delete_keys, delta_.ids, delta_.rows)
                 : dm.StageStaticRows(delta_.table, delta_.ids, delta_.rows);
    if (!u.ok()) return OnGpu(dm.device(), u.status());
    devices_.push_back(dm.device());
    updates_.push_back(*std::move(u));
    return absl::OkStatus();
  }

  absl::Status Commit(uint64_t now) override {
    for (size_t g = 0; g < updates_.size(); ++g) {
      absl::Status s = updates_[g]->Commit(now);
      if (!s.ok()) return OnGpu(devices_[g], s);
    }
    return absl::OkStatus();
  }

  absl::Status Wait(DeltaResult* result) override {
    absl::Status first;
    for (size_t g = 0; g < updates_.size(); ++g) {
      kernels::DynamicStats erased, upserted;
      absl::Status s = updates_[g]->Wait(&erased, &upserted);
      if (s.ok() && (erased.failed > 0 || upserted.failed > 0)) {
        // Only a corrupt table gets here (the delta was validated).
        s = absl::InternalError(
            absl::StrCat(erased.failed + upserted.failed, " keys found no hash slot"));
      }
      if (!s.ok()) {
        if (first.ok()) first = OnGpu(devices_[g], s);
        continue;
      }
      if (g > 0) continue;  // the first GPU's figures
      if (dynamic_) {
        AddDynamicStats(erased, upserted, result);
      } else {
        result->rows_applied += static_cast<int64_t>(delta_.ids.size());
      }
    }
    return first;
  }

 private:
  const TableDelta& delta_;
  const bool dynamic_;
  std::vector<int> devices_;
  std::vector<std::unique_ptr<DeviceModel::Update>> updates_;
};

absl::StatusOr<std::unique_ptr<TableStore::Update>> CudaTableStore::Prepare(
    const TableDelta& delta) {
  const EmbeddingTable& t = devices_.at(0)->model().tables[delta.table];
  if (t.dynamic && t.id_policy == rankd::v1::ERROR) {
    return absl::FailedPreconditionError(absl::StrCat(
        "table ", t.name, " is DYNAMIC with id_policy ERROR: on the CUDA backend requests are "
        "checked against the keys loaded with the version, so its keys cannot change online "
        "(use id_policy ZERO, or the CPU backend)"));
  }
  auto update = std::make_unique<CudaUpdate>(delta, t.dynamic);
  for (const auto& dm : devices_) {
    absl::Status s = update->Add(*dm);
    if (!s.ok()) return s;
  }
  return update;
}

absl::Status CudaTableStore::Apply(const TableDelta& delta, uint64_t now, DeltaResult* result) {
  absl::StatusOr<std::unique_ptr<Update>> update = Prepare(delta);
  if (!update.ok()) return update.status();
  absl::Status s = (*update)->Commit(now);
  absl::Status waited = (*update)->Wait(result);
  return s.ok() ? waited : s;
}

absl::Status CudaTableStore::ReadTable(int table, const TableSink& sink) const {
  const DeviceModel& dm = *devices_.at(0);
  const EmbeddingTable& t = dm.model().tables[table];
  if (t.dynamic) return ReadDynamic(table, sink);
  const int64_t row_bytes = t.row_bytes();
  const int64_t per_piece = RowsPerPiece(row_bytes);
  std::vector<uint8_t> piece(std::min(per_piece, t.num_rows) * row_bytes);
  for (int64_t r = 0; r < t.num_rows; r += per_piece) {
    const int64_t n = std::min(per_piece, t.num_rows - r);
    absl::Status s = dm.ReadStaticRows(table, r, n, piece.data());
    if (s.ok()) s = sink({}, absl::MakeConstSpan(piece.data(), n * row_bytes));
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// Row slots in order, each piece compacted to its stored keys.
absl::Status CudaTableStore::ReadDynamic(int table, const TableSink& sink) const {
  const DeviceModel& dm = *devices_.at(0);
  const int64_t max_keys = dm.dynamic_view(table).max_keys;
  const int64_t row_bytes = dm.model().tables[table].row_bytes();
  const int64_t per_piece = RowsPerPiece(row_bytes);
  std::vector<int64_t> keys(std::min(per_piece, max_keys));
  std::vector<uint8_t> rows(keys.size() * row_bytes);
  for (int64_t r = 0; r < max_keys; r += per_piece) {
    const int64_t n = std::min(per_piece, max_keys - r);
    absl::Status s = dm.ReadDynamicRows(table, r, n, keys.data(), rows.data());
    if (!s.ok()) return OnGpu(dm.device(), s);
    int64_t kept = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (keys[i] == kernels::kEmptyKey) continue;
      if (kept != i) {
        keys[kept] = keys[i];
        std::copy_n(rows.data() + i * row_bytes, row_bytes, rows.data() + kept * row_bytes);
      }
      ++kept;
    }
    if (kept == 0) continue;
    s = sink(absl::MakeConstSpan(keys.data(), kept),
             absl::MakeConstSpan(rows.data(), kept * row_bytes));
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace rankd::engine::cuda
