// TableStore: where one backend keeps a model version's tables, seen from
// the update path. The CPU backend's store is the Model's own host memory
// (host_table_store.h); the CUDA backend's is each GPU's DeviceModel (HBM
// tables, pinned host tables and their HBM caches).
//
// Threading: LiveTables calls Apply and ReadTable only while it holds its
// gate exclusively (no batch of the version is running), one call at a time.
#ifndef RANKD_ENGINE_UPDATES_TABLE_STORE_H_
#define RANKD_ENGINE_UPDATES_TABLE_STORE_H_

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
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
