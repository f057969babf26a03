// One rankd.v1.EmbeddingUpdate applied to one version's tables: the wire
// message converted into engine::TableDelta (zero-copy for fp32 tables and
// raw rows; other dtypes encoded from fp32 rows) and handed to
// LiveTables::Apply. Shared by the UpdateEmbeddings stream
// (server/embedding_updates.h, which adds the summary and metrics) and the
// replay of the update log when a version loads (model_reconcile.cc).
#ifndef RANKD_SERVER_LIFECYCLE_UPDATE_MESSAGE_H_
#define RANKD_SERVER_LIFECYCLE_UPDATE_MESSAGE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "engine/updates/live_tables.h"
#include "rankd/v1/model_control.pb.h"

namespace rankd::server {

// Applies `message` to model `model` version `version`, whose tables are
// `live` (null: the version's backend keeps fixed tables ->
// FAILED_PRECONDITION). NOT_FOUND naming the tables for an unknown table;
// LiveTables::Apply's errors otherwise. `message` must outlive the call
// only (rows are read in place).
absl::StatusOr<engine::LiveTables::Applied> ApplyUpdateMessage(
    const rankd::v1::EmbeddingUpdate& message, const std::string& model, int64_t version,
    engine::LiveTables* live);

// The index of table `name` in `model` (-1: none).
int TableIndex(const engine::Model& model, const std::string& name);

}  // namespace rankd::server

#endif  // RANKD_SERVER_LIFECYCLE_UPDATE_MESSAGE_H_
