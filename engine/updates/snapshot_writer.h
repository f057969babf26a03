// Writes a served version's current state as a model version directory that
// LoadModel reads back: model.pbtxt (the version's config, with each
// dynamic table's num_rows set to the keys it holds and every table's init
// FILE), weights.safetensors in the same tensor names (tables read from the
// backend's store in pieces and written with pwrite at their offsets, so a
// large table never exists twice in memory) and update_positions.json (the
// producers' last applied sequences, restored when the directory loads).
//
// The caller makes the cut consistent: no update may be applied while this
// runs (the server holds its update lock; scoring goes on, it only reads).
#ifndef RANKD_ENGINE_UPDATES_SNAPSHOT_WRITER_H_
#define RANKD_ENGINE_UPDATES_SNAPSHOT_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model.h"
#include "engine/updates/live_tables.h"
#include "engine/updates/table_store.h"

namespace rankd::engine {

struct SnapshotStats {
  int64_t bytes = 0;  // of the files written
  double seconds = 0;
};

// Writes into `dir`, which must exist and be empty. `dynamic_keys[t]`: the
// keys table t holds now (read from LiveTables::DynamicTables; ignored for
// static tables). Files are fsync'ed. Errors name the file.
absl::StatusOr<SnapshotStats> WriteSnapshot(const Model& model, const TableStore& store,
                                            const std::vector<int64_t>& dynamic_keys,
                                            const std::vector<ProducerPosition>& positions,
                                            const std::string& dir);

// The positions a snapshot directory recorded (none when it has no
// update_positions.json). Errors name the file and the field.
absl::StatusOr<std::vector<ProducerPosition>> ReadUpdatePositions(const std::string& dir);

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_UPDATES_SNAPSHOT_WRITER_H_
