#include "engine/updates/table_store.h"

namespace rankd::engine {
namespace {

// The whole delta applied in Commit (stores whose workers read the tables on
// the host, under the gate for each whole batch).
class ApplyInCommit final : public TableStore::Update {
 public:
  ApplyInCommit(TableStore* store, const TableDelta& delta) : store_(store), delta_(delta) {}
  absl::Status Commit(uint64_t now) override { return store_->Apply(delta_, now, &result_); }
  absl::Status Wait(DeltaResult* result) override {
    *result += result_;
    return absl::OkStatus();
  }

 private:
  TableStore* const store_;
  const TableDelta& delta_;
  DeltaResult result_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<TableStore::Update>> TableStore::Prepare(const TableDelta& delta) {
  return std::make_unique<ApplyInCommit>(this, delta);
}

}  // namespace rankd::engine
