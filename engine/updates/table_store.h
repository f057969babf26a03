// TableStore: where one backend keeps a model version's tables, seen from
// the update path. The CPU backend's store is the Model's own host memory
// (host_table_store.h); the CUDA backend's is each GPU's DeviceModel (HBM
// tables, pinned host tables and their HBM caches).
//
// An update reaches a store in three steps (Prepare, then the returned
// Update's Commit and Wait), so that a store whose tables live on a device
// can copy the inputs before and wait for the writes after the short time
// in which LiveTables holds its gate exclusively (live_tables.h).
//
// Threading: LiveTables runs one update at a time, from Prepare to the
// Update's destruction; it calls Commit only while it holds its gate
// exclusively, and Apply (the default Commit) likewise. ReadTable runs while
// no update is in progress.
#ifndef RANKD_ENGINE_UPDATES_TABLE_STORE_H_
#define RANKD_ENGINE_UPDATES_TABLE_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/updates/table_delta.h"
#include "kernels/cpu/dynamic_table.h"

namespace rankd::engine {

class TableStore {
 public:
  virtual ~TableStore() = default;

  // Applies a validated delta (delta_validation.h) completely, or returns an
  // error having changed nothing a batch could see (an internal failure,
  // e.g. a CUDA error: the version should then be reloaded). `now` is the
  // logical time of dynamic tables' LRU scores.
  virtual absl::Status Apply(const TableDelta& delta, uint64_t now, DeltaResult* result) = 0;

  // One update in progress. Commit makes the delta visible to every batch
  // that starts after it returns, and to none that started before (the
  // caller holds the gate: batches that read the tables on the host are not
  // running; batches queued on a device are ordered by the store). Wait
  // returns once the writes are complete and adds what they did to
  // `result`. Destroying an Update waits for committed writes too.
  class Update {
   public:
    virtual ~Update() = default;
    virtual absl::Status Commit(uint64_t now) = 0;
    virtual absl::Status Wait(DeltaResult* result) = 0;
  };
  // Starts an update of a validated delta (which must outlive the Update):
  // copies what can be copied before the gate. The default applies the
  // whole delta in Commit, through Apply.
  virtual absl::StatusOr<std::unique_ptr<Update>> Prepare(const TableDelta& delta);

  // Calls `sink` with the table's current content in pieces, in order:
  // for a STATIC table, rows [0, num_rows) (keys empty); for a DYNAMIC
  // table, every stored key and its row (in any order). `rows` holds
  // keys.size() (dynamic) or the piece's row count (static) rows in the
  // table's row type. A sink error stops the walk and is returned.
  using TableSink = std::function<absl::Status(absl::Span<const int64_t> keys,
                                               absl::Span<const uint8_t> rows)>;
  virtual absl::Status ReadTable(int table, const TableSink& sink) const = 0;
};

// Adds what a dynamic table's erase and upsert (CPU functions or GPU
// launchers) did to `result`.
inline void AddDynamicStats(const kernels::DynamicStats& erased,
                            const kernels::DynamicStats& upserted, DeltaResult* result) {
  result->rows_applied += upserted.inserted + upserted.updated;
  result->keys_inserted += upserted.inserted;
  result->keys_updated += upserted.updated;
  result->keys_evicted += upserted.evicted;
  result->keys_deleted += erased.deleted;
  result->keys_not_found += erased.not_found;
}

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_UPDATES_TABLE_STORE_H_
