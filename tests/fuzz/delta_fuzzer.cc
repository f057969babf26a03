// Fuzz target: an embedding delta file (rankctl update --input: safetensors
// with <table>.ids / .rows / .delete tensors; client/safetensors_delta.h) ->
// ParseDelta, then every table it accepts through SplitTableDelta into
// EmbeddingUpdate messages (client/embedding_update.h), as rankctl does
// before it sends them.
//
// Checked beyond "no crash":
//   - a refused file is INVALID_ARGUMENT naming the file;
//   - an accepted file's tables have distinct names, in order, and rows of
//     exactly ids x dim x dtype bytes (dim >= 1 with ids);
//   - writing the tables back (WriteDelta) and parsing that gives the same
//     tables;
//   - a table SplitTableDelta refuses is INVALID_ARGUMENT; one it splits
//     comes back whole from its messages, in order (delete keys, ids, row
//     bytes), with consecutive sequence numbers and each message within
//     the row limit.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/embedding_update.h"
#include "client/safetensors_delta.h"
#include "rankd/v1/model_control.pb.h"

namespace {

using rankd::client::RowDtype;
using rankd::client::TableDelta;

constexpr char kName[] = "fuzz.safetensors";
constexpr int64_t kRowsPerMessage = 3;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "%s\n", what.c_str());
  std::abort();
}

bool Same(const TableDelta& a, const TableDelta& b) {
  return a.table == b.table && a.ids == b.ids && a.row_bytes == b.row_bytes && a.dtype == b.dtype &&
         a.delete_keys == b.delete_keys && (a.ids.empty() || a.dim == b.dim);
}

void CheckTables(const std::vector<TableDelta>& tables) {
  for (size_t i = 0; i < tables.size(); ++i) {
    const TableDelta& t = tables[i];
    if (t.table.empty()) Fail("an accepted table has no name");
    if (i > 0 && !(tables[i - 1].table < t.table)) Fail("tables not in order by distinct names");
    if (!t.ids.empty() && t.dim < 1) Fail(absl::StrCat(t.table, ": rows of dim ", t.dim));
    const uint64_t want = t.ids.size() * static_cast<uint64_t>(t.dim) *
                          static_cast<uint64_t>(rankd::client::RowDtypeSize(t.dtype));
    if (!t.ids.empty() && t.row_bytes.size() != want) {
      Fail(absl::StrCat(t.table, ": ", t.row_bytes.size(), " row bytes, want ", want));
    }
    if (t.ids.empty() && !t.row_bytes.empty()) Fail(t.table + ": rows without ids");
  }
}

// The table back from its messages: delete keys, ids and row bytes in order.
void CheckSplit(const TableDelta& t) {
  rankd::client::SplitOptions options;
  options.model = "m";
  options.producer_id = "fuzz";
  options.rows_per_message = kRowsPerMessage;
  options.max_payload_bytes = 256;
  options.timestamp_unix_us = 1;
  absl::StatusOr<std::vector<rankd::v1::EmbeddingUpdate>> messages =
      rankd::client::SplitTableDelta(t, options);
  if (!messages.ok()) {
    if (messages.status().code() != absl::StatusCode::kInvalidArgument) {
      Fail("SplitTableDelta refused with " + messages.status().ToString());
    }
    return;
  }
  std::vector<int64_t> ids, deletes;
  std::string rows;
  uint64_t sequence = options.start_sequence;
  for (const rankd::v1::EmbeddingUpdate& m : *messages) {
    if (m.table() != t.table || m.model() != "m" || m.sequence() != sequence++) {
      Fail(t.table + ": a message with the wrong table, model or sequence");
    }
    if (m.ids_size() > kRowsPerMessage) Fail(t.table + ": a message over the row limit");
    if (rankd::client::MessageRows(m) == 0) Fail(t.table + ": an empty message");
    ids.insert(ids.end(), m.ids().begin(), m.ids().end());
    deletes.insert(deletes.end(), m.delete_keys().begin(), m.delete_keys().end());
    if (t.dtype == RowDtype::kF32) {
      rows.append(reinterpret_cast<const char*>(m.rows().data()), m.rows_size() * sizeof(float));
    } else {
      rows += m.raw_rows();
    }
  }
  if (ids != t.ids || deletes != t.delete_keys || rows != t.row_bytes) {
    Fail(t.table + ": the messages do not add up to the table");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::vector<TableDelta>> tables = rankd::client::ParseDelta(bytes, kName);
  if (!tables.ok()) {
    if (tables.status().code() != absl::StatusCode::kInvalidArgument ||
        !absl::StrContains(tables.status().message(), kName)) {
      Fail("a refusal that is not INVALID_ARGUMENT naming the file: " + tables.status().ToString());
    }
    return 0;
  }
  CheckTables(*tables);
  absl::StatusOr<std::vector<TableDelta>> again =
      rankd::client::ParseDelta(rankd::client::WriteDelta(*tables), kName);
  if (!again.ok()) Fail("a written delta does not parse: " + again.status().ToString());
  if (again->size() != tables->size()) Fail("a written delta has another table count");
  for (size_t i = 0; i < tables->size(); ++i) {
    if (!Same((*tables)[i], (*again)[i])) Fail("table " + (*tables)[i].table + " changed");
  }
  for (const TableDelta& t : *tables) CheckSplit(t);
  return 0;
}
