// One embedding update message as the engine applies it: rows of one table
// (static: row indices; dynamic: int64 keys) and, for dynamic tables, keys
// to delete. The server converts the wire message into this and validates it
// against the model (delta_validation.h) before anything is applied.
#ifndef RANKD_ENGINE_UPDATES_TABLE_DELTA_H_
#define RANKD_ENGINE_UPDATES_TABLE_DELTA_H_

#include <cstdint>

#include "absl/types/span.h"

namespace rankd::engine {

// Non-owning: the spans must outlive the Apply call that reads them.
struct TableDelta {
  int table = 0;                          // index into Model::tables
  absl::Span<const int64_t> ids;          // unique; row indices or keys
  absl::Span<const uint8_t> rows;         // ids.size() rows in the table's row type
  absl::Span<const int64_t> delete_keys;  // DYNAMIC only; applied before `ids`
};

// What applying one delta did (or several, added up).
struct DeltaResult {
  int64_t rows_applied = 0;    // static rows + dynamic inserts and updates
  int64_t keys_inserted = 0;
  int64_t keys_updated = 0;
  int64_t keys_deleted = 0;
  int64_t keys_not_found = 0;  // delete_keys that were not stored
  int64_t keys_evicted = 0;

  DeltaResult& operator+=(const DeltaResult& o) {
    rows_applied += o.rows_applied;
    keys_inserted += o.keys_inserted;
    keys_updated += o.keys_updated;
    keys_deleted += o.keys_deleted;
    keys_not_found += o.keys_not_found;
    keys_evicted += o.keys_evicted;
    return *this;
  }
  bool operator==(const DeltaResult& o) const {
    return rows_applied == o.rows_applied && keys_inserted == o.keys_inserted &&
           keys_updated == o.keys_updated && keys_deleted == o.keys_deleted &&
           keys_not_found == o.keys_not_found && keys_evicted == o.keys_evicted;
  }
};

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_UPDATES_TABLE_DELTA_H_
