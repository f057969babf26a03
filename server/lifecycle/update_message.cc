#include "server/lifecycle/update_message.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/model/error_text.h"
#include "engine/updates/delta_validation.h"

namespace rankd::server {
namespace {

absl::Status UnknownTable(const engine::Model& model, const std::string& name) {
  std::vector<std::string> names;
  for (const engine::EmbeddingTable& t : model.tables) names.push_back(t.name);
  return absl::NotFoundError(absl::StrCat("table: model \"", model.name, "\" version ",
                                          model.version, " has no table \"", engine::TruncateForError(name),
                                          "\"; tables: ", absl::StrJoin(names, ", ")));
}

}  // namespace

int TableIndex(const engine::Model& model, const std::string& name) {
  for (size_t t = 0; t < model.tables.size(); ++t) {
    if (model.tables[t].name == name) return static_cast<int>(t);
  }
  return -1;
}

absl::StatusOr<engine::LiveTables::Applied> ApplyUpdateMessage(
    const rankd::v1::EmbeddingUpdate& msg, const std::string& model_name, int64_t version,
    engine::LiveTables* live) {
  if (live == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("model \"", model_name, "\" version ", version,
                     " cannot take embedding updates (its backend keeps fixed tables)"));
  }
  const engine::Model& model = live->model();
  const int t = TableIndex(model, msg.table());
  if (t < 0) return UnknownTable(model, msg.table());
  const engine::EmbeddingTable& table = model.tables[t];
  engine::TableDelta delta;
  delta.table = t;
  delta.ids = absl::MakeConstSpan(msg.ids().data(), msg.ids_size());
  delta.delete_keys = absl::MakeConstSpan(msg.delete_keys().data(), msg.delete_keys_size());
  std::vector<uint8_t> encoded;
  if (!msg.raw_rows().empty()) {
    delta.rows = absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(msg.raw_rows().data()),
                                     msg.raw_rows().size());
  } else if (table.fp32_rows()) {
    // In int64: ids x dim overflows int for a message of ~2^31 values.
    if (msg.rows_size() != int64_t{msg.ids_size()} * table.dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table ", table.name, ": rows: ", msg.rows_size(), " values for ", msg.ids_size(),
          " ids of dim ", table.dim, "; want ", int64_t{msg.ids_size()} * table.dim));
    }
    delta.rows = absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(msg.rows().data()),
                                     msg.rows_size() * sizeof(float));
  } else {
    absl::Status s = engine::EncodeRows(
        table, absl::MakeConstSpan(msg.rows().data(), msg.rows_size()), msg.ids_size(), &encoded);
    if (!s.ok()) return s;
    delta.rows = absl::MakeConstSpan(encoded);
  }
  engine::UpdateOrigin origin{msg.producer_id(), msg.sequence(), msg.timestamp_unix_us()};
  return live->Apply(delta, origin);
}

}  // namespace rankd::server
