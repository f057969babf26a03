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
//
// Also here: RowPacer (a stream throttled to a rate of rows, on an injected
// steady clock), NextPass (the same delta sent again with new sequence
// numbers) and MergeUpdateSummary (the server's summaries of several streams).
#ifndef RANKD_CLIENT_EMBEDDING_UPDATE_H_
#define RANKD_CLIENT_EMBEDDING_UPDATE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
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

// --- Repeating a delta ------------------------------------------------------

// Turns one pass of a table's (or several tables') messages, as SplitTableDelta
// made them, into the next pass of the same rows: each message's sequence
// grows by the number of messages of its table in the pass (messages with
// sequence 0, no de-duplication, keep 0), so the server applies the pass
// again instead of skipping it as duplicates; every timestamp_unix_us becomes
// `timestamp_unix_us` (0 = now). For a stream that lasts (rankctl update
// --repeat, a benchmark's steady update load).
void NextPass(std::vector<rankd::v1::EmbeddingUpdate>* messages, int64_t timestamp_unix_us = 0);

// Adds `from` (the summary of one more stream) into `into`: messages, and each
// (model, version, table)'s counters, a table new to `into` appended.
void MergeUpdateSummary(const rankd::v1::UpdateSummary& from, rankd::v1::UpdateSummary* into);

// --- Pacing ------------------------------------------------------------------

// The rows a message carries for pacing: ids written plus keys deleted.
int64_t MessageRows(const rankd::v1::EmbeddingUpdate& message);

// Where RowPacer reads the time and waits. Times are steady (never go back)
// and count from an arbitrary origin. Injected so tests run on a fake clock.
class PacerClock {
 public:
  virtual ~PacerClock() = default;
  virtual absl::Duration Now() = 0;
  // Returns once Now() >= t.
  virtual void SleepUntil(absl::Duration t) = 0;
  // std::chrono::steady_clock and absl::SleepFor; process-wide, never destroyed.
  static PacerClock* Real();
};

// Throttles an update stream to a rate of rows (rankctl update
// --max_rows_per_second): a training job's stream should not take more of the
// server than it was given. Call Pace(rows) before writing each message; it
// waits until the message's time on a steady schedule: the first message
// leaves at once, and each next one when the rows before it have had their
// time at the rate (message k at t0 + rows of messages 0..k-1 / rate). A
// sender that fell behind the schedule (the server, the network or gRPC's
// flow control were slower; a retry's backoff) catches up by at most
// `max_catch_up` of rows sent back to back; beyond that the schedule restarts
// from now, so a stall is never followed by a long burst above the rate.
// Not thread-safe: one pacer per stream (per replica).
class RowPacer {
 public:
  struct Options {
    // Rows (MessageRows) per second on average; 0 = unlimited (Pace returns
    // at once).
    double max_rows_per_second = 0;
    // How far behind its schedule a sender may be and still send back to back
    // to catch up; more lag is forgotten. Also absorbs the clock's late
    // wake-ups, so the achieved rate stays at the target.
    absl::Duration max_catch_up = absl::Milliseconds(100);
  };

  // INVALID_ARGUMENT naming the field: a negative or non-finite rate, a
  // negative catch-up. `clock` (not owned) must outlive the pacer; null = Real().
  static absl::StatusOr<RowPacer> Create(const Options& options, PacerClock* clock = nullptr);

  // Waits until a message of `rows` rows may leave, books its rows and
  // returns how long it waited.
  absl::Duration Pace(int64_t rows);

  // Rows booked so far, and the time the next message may leave (the clock's
  // time; meaningful once Pace was called).
  int64_t rows() const { return rows_; }
  absl::Duration next_send() const { return next_; }

 private:
  RowPacer(const Options& options, PacerClock* clock) : options_(options), clock_(clock) {}

  Options options_;
  PacerClock* clock_;
  bool started_ = false;
  absl::Duration origin_;  // the schedule's start (moved on by a stall)
  int64_t booked_ = 0;     // rows booked since origin_
  absl::Duration next_;    // origin_ + booked_ rows' time
  int64_t rows_ = 0;
};

}  // namespace rankd::client

#endif  // RANKD_CLIENT_EMBEDDING_UPDATE_H_
