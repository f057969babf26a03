// UpdateLog: an append-only, checksummed file of embedding update messages,
// one per model under `rankd serve --update_log_dir` (the server names it
// `<dir>/<model>.updlog`). The server appends every update message it
// accepted, synced, before acknowledging it; replays the file onto each
// version it loads, before the version takes traffic; and empties it when
// a snapshot holds everything it says. So a server killed at any moment
// restarts with every update it acknowledged (docs/operations.md, "Live
// embeddings").
//
// Format (integers little-endian):
//   file header, 16 bytes: "RKDUPLOG", format version u32 (1), zero u32
//   each record, 24 bytes + payload:
//     magic u32 0x4752554C ("LURG" on disk), payload length u32,
//     target version i64 (what the message named: 0 = every live version),
//     header CRC-32C u32 (of the 16 bytes before it),
//     payload CRC-32C u32, payload bytes.
// The payload is opaque here (the server stores the serialized
// rankd.v1.EmbeddingUpdate; the engine never sees wire messages).
//
// Crash semantics: Append writes one record at the committed end with one
// pwritev and, with Options::sync (default), fdatasyncs before it returns:
// once Append returned OK the record survives a crash (of the process or,
// given honest disks, of the machine). A failed Append cuts the file back
// to the committed end (if even that fails, every later Append fails). So
// only the last record can be damaged, by a crash in the middle of its
// append — a record that was never acknowledged. Open checks every record:
//   - a torn tail (an incomplete or unreadable last record, with no valid
//     record after it) is cut off and reported in recovery(). "After it"
//     means past the bytes its length claims when its header checks out:
//     those are its payload, whatever they hold (the bytes of a valid
//     record included: a client's rows may be any bytes);
//   - a bad record with a valid record after it is not a crash's doing (the
//     disk or someone else changed the file): Open refuses with DATA_LOSS
//     naming the file and the offset, and skips nothing silently. So is a
//     bad record followed by so many overlapping record headers that
//     checking them would read over 8 times the bytes after it (plus
//     64 MiB): Open refuses it the same way, in time linear in its size;
//   - a record longer than Options::max_record_bytes is refused the same
//     way, before anything of that size is allocated.
// Truncate empties the log (ftruncate to the header, then fsync): after a
// crash the file holds either every record or none.
//
// Ownership: owns the file descriptor, and an exclusive flock(2) on the
// file for its lifetime (a second UpdateLog of the same file, in this
// process or another, fails to open: two servers must not share a
// directory); the destructor closes it.
// Threading: every method is thread-safe. Appends run one at a time;
// ForEach reads the records committed when it started, concurrently with
// Appends (its callback may Append); Truncate waits for running ForEach
// calls, so a ForEach callback must not call it (it would wait forever).
#ifndef RANKD_ENGINE_UPDATES_UPDATE_LOG_H_
#define RANKD_ENGINE_UPDATES_UPDATE_LOG_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace rankd::engine {

class UpdateLog {
 public:
  struct Options {
    std::string path;  // required; created (with its header) when missing
    // fdatasync after each Append (off only for tests and benchmarks: a
    // crash of the machine may then lose acknowledged records).
    bool sync = true;
    // Longest payload Append accepts and Open/ForEach read; a longer length
    // field is corruption (<= 4 GiB - 1: the field is 32 bits).
    int64_t max_record_bytes = int64_t{1} << 30;
  };

  // What Open found.
  struct Recovery {
    int64_t records = 0;       // valid records kept
    int64_t bytes = 0;         // the file's size after recovery
    int64_t torn_offset = -1;  // where a torn tail was cut off (-1: none)
    int64_t torn_bytes = 0;    // bytes cut off
    std::string torn_reason;   // what was wrong with the first of them
  };

  // One record as ForEach hands it out (valid during the callback only).
  struct Record {
    int64_t offset = 0;          // of its header in the file
    int64_t target_version = 0;  // as appended
    absl::string_view payload;
  };

  static constexpr int64_t kFileHeaderBytes = 16;
  static constexpr int64_t kRecordHeaderBytes = 24;
  static constexpr uint32_t kRecordMagic = 0x4752554C;

  // Opens or creates the file and recovers it (see the file comment).
  // INVALID_ARGUMENT for bad options; FAILED_PRECONDITION when the file is
  // not an update log, has an unknown format version or is locked by
  // another UpdateLog; DATA_LOSS for a bad record before the end; INTERNAL
  // for I/O errors. Every error names the file.
  static absl::StatusOr<std::unique_ptr<UpdateLog>> Open(const Options& options);
  ~UpdateLog();
  UpdateLog(const UpdateLog&) = delete;
  UpdateLog& operator=(const UpdateLog&) = delete;

  // Appends one record (durable on return with Options::sync).
  // INVALID_ARGUMENT for a payload over max_record_bytes; INTERNAL naming
  // the file for an I/O error (nothing of the record stays).
  absl::Status Append(int64_t target_version, absl::string_view payload);

  // Calls `fn` for each record from offset `from` (0 = the first record;
  // else an offset a previous ForEach returned, since the last Truncate)
  // up to the end committed when ForEach started, in append order; stops at
  // the first error of `fn` and returns it. Returns the offset after the
  // last record read (pass it as `from` to read what was appended since).
  // DATA_LOSS naming the file and offset if a record no longer checks out.
  absl::StatusOr<int64_t> ForEach(int64_t from,
                                  const std::function<absl::Status(const Record&)>& fn) const;

  // Drops every record (durably). INTERNAL naming the file on I/O errors.
  absl::Status Truncate();

  const std::string& path() const { return options_.path; }
  // The file's committed size (header included) and records since Open or
  // the last Truncate (those found by Open included).
  int64_t size_bytes() const;
  int64_t records() const;
  const Recovery& recovery() const { return recovery_; }

 private:
  UpdateLog(const Options& options, int fd) : options_(options), fd_(fd) {}
  // Open's check of the header and of every record; cuts a torn tail.
  absl::Status Recover(int64_t file_size);
  absl::Status WriteFileHeader();

  const Options options_;
  const int fd_;
  Recovery recovery_;

  mutable absl::Mutex readers_mu_;  // shared: ForEach; exclusive: Truncate
  mutable absl::Mutex mu_ ABSL_ACQUIRED_AFTER(readers_mu_);
  int64_t end_ ABSL_GUARDED_BY(mu_) = 0;  // committed size
  int64_t records_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status broken_ ABSL_GUARDED_BY(mu_);  // a failed Append left bytes behind
};

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_UPDATES_UPDATE_LOG_H_
