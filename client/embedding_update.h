// Building the message stream of rankd.v1.ModelControl.UpdateEmbeddings from
// one table's delta: ids, rows (fp32, or raw fp16 / bf16 bytes) and keys to
// delete, split into messages that fit gRPC's default receive limit and
// numbered with a producer's consecutive sequence numbers. No network here:
// ModelControlClient::UpdateEmbeddings sends what this builds.
//
//   TableDelta delta;  // or ReadDeltaFile (client/safetensors_delta.h)
//   delta.table = "t_item"; delta.dim = 16; delta.dtype = RowDtype::kF32;
//   delta.ids = {...}; delta.row_bytes = ...;  // ids.size() * 16 * 4 bytes
//   SplitOptions split;
//   split.model = "mini"; split.producer_id = "trainer-0"; split.start_sequence = 18;
//   auto messages = SplitTableDelta(delta, split);  // sequences 18, 19, ...
#ifndef RANKD_CLIENT_EMBEDDING_UPDATE_H_
#define RANKD_CLIENT_EMBEDDING_UPDATE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rankd/v1/model_control.pb.h"

namespace rankd::client {

// The element type of a delta's rows. kF32 rows are sent as `rows` (floats);
// kF16 and kBF16 as `raw_rows`, the table's own little-endian bytes (the
// server checks that they are the table's dtype).
enum class RowDtype { kF32, kF16, kBF16 };

// Bytes per element: 4, 2, 2.
int64_t RowDtypeSize(RowDtype dtype);
// "F32", "F16", "BF16" (the safetensors names).
absl::string_view RowDtypeName(RowDtype dtype);

// One table's changes.
struct TableDelta {
  std::string table;
  // Row indices (static tables) or keys (dynamic tables) to write; unique.
  std::vector<int64_t> ids;
  // ids.size() x dim elements of `dtype`, row-major, little-endian.
  std::string row_bytes;
  int64_t dim = 0;  // elements per row; >= 1 when ids is not empty
  RowDtype dtype = RowDtype::kF32;
  // Dynamic tables: keys to delete (none of them in `ids`).
  std::vector<int64_t> delete_keys;
};

struct SplitOptions {
  std::string model;
  int64_t version = 0;  // 0 = every live version of the model
  // Required when start_sequence > 0 (the server de-duplicates per
  // (producer_id, table)).
  std::string producer_id;
  // The first message's sequence; the next ones follow (+1 each). 0 = no
  // de-duplication: every message carries sequence 0.
  uint64_t start_sequence = 1;
  // At most this many rows (ids) per message.
  int64_t rows_per_message = 4096;
  // At most about this many bytes of payload per message: rows, ids and
  // delete keys (8 bytes each). gRPC's default receive limit is 4 MiB; the
  // rest is headroom for field tags and the other fields. A single row
  // larger than this still goes alone in a message of its own.
  int64_t max_payload_bytes = 3 << 20;
  // Every message's timestamp_unix_us; 0 = now (when SplitTableDelta runs).
  int64_t timestamp_unix_us = 0;
};

// The messages of `delta`, in order: the delete keys first (as many per
// message as fit), then the rows, each message within rows_per_message rows
// and max_payload_bytes. An empty delta gives no message. INVALID_ARGUMENT
// naming the table and the problem: empty table name, row_bytes not
// ids x dim x dtype size, dim < 1 with rows, a duplicate id, a key both
// deleted and written, a sequence without producer_id, bad options.
absl::StatusOr<std::vector<rankd::v1::EmbeddingUpdate>> SplitTableDelta(
    const TableDelta& delta, const SplitOptions& options);

// The last sequence that `producer_id` applied to each table of `model`,
// from its ListModels status: the highest over the targeted versions
// (`version`, or with 0 every LOADING or READY version). Tables the producer
// never updated are absent. The next message of a table gets last + 1.
std::map<std::string, uint64_t> LastSequences(const rankd::v1::ModelStatus& model,
                                              int64_t version, absl::string_view producer_id);

// "rankctl@<hostname>" for prefix "rankctl": a producer id that is stable
// across runs on one machine (so a rerun resumes) and distinct between them.
std::string DefaultProducerId(absl::string_view prefix);

}  // namespace rankd::client

#endif  // RANKD_CLIENT_EMBEDDING_UPDATE_H_
