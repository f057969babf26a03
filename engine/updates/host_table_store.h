// HostTableStore: the CPU backend's TableStore, writing the Model's own host
// memory that the CPU workers read. LoadModel gives every table an
// allocation of its own (ByteBuffer::pinnable), so the rows are written in
// place; a model built in memory over borrowed bytes cannot be updated
// (FAILED_PRECONDITION). Dynamic tables go through the kernels' dynamic
// table operations (kernels/cpu/dynamic_table.h) on the table's live state.
//
// Threading: see TableStore (LiveTables serializes every call and holds
// the scoring gate exclusively).
#ifndef RANKD_ENGINE_UPDATES_HOST_TABLE_STORE_H_
#define RANKD_ENGINE_UPDATES_HOST_TABLE_STORE_H_

#include <memory>

#include "engine/model/model.h"
#include "engine/updates/table_store.h"

namespace rankd::engine {

class HostTableStore final : public TableStore {
 public:
  explicit HostTableStore(std::shared_ptr<const Model> model) : model_(std::move(model)) {}

  absl::Status Apply(const TableDelta& delta, uint64_t now, DeltaResult* result) override;
  absl::Status ReadTable(int table, const TableSink& sink) const override;

 private:
  absl::Status ApplyDynamic(const EmbeddingTable& t, const TableDelta& delta, uint64_t now,
                            DeltaResult* result);
  absl::Status ReadDynamic(const EmbeddingTable& t, const TableSink& sink) const;

  const std::shared_ptr<const Model> model_;
};

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_UPDATES_HOST_TABLE_STORE_H_
