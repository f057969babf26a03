// rankload --response_log: one CSV line per finished Score call, for checks
// that need every request rather than a step's histograms (which model
// version answered a request sent around a hot swap; p99 in time windows).
//
// Format: a header line, then one row per call in no particular order:
//
//   scheduled_unix_us,sent_unix_us,done_unix_us,latency_us,code,version,step
//
//   scheduled_unix_us  when the call was due (open loop: its scheduled send
//                      time; closed loop: the actual send, as sent_unix_us)
//   sent_unix_us       when it was actually sent
//   done_unix_us       when its answer (or error) arrived
//   latency_us         done - scheduled, with 3 decimals (ns resolution): the
//                      latency rankload measures (coordinated-omission
//                      corrected in open loop)
//   code               the gRPC status code name (OK, DEADLINE_EXCEEDED, ...)
//   version            ScoreResponse.version; 0 when the call failed
//   step               the caller's step index (a sweep point, an SLO probe)
//
// The three times are Unix wall-clock microseconds (whole, rounded down), so
// they compare with server-side timestamps. Fields never contain commas.
//
// Cost. Append() takes one of kShards uncontended mutexes (picked once per
// thread, as Recorder does) and copies a 40-byte ResponseRow into a vector;
// nothing is formatted or written on the caller's thread. A writer thread
// swaps the buffers out every `flush_interval_ms`, formats them (about
// 70 bytes a line) and writes them to the file, so memory holds only the rows
// of the last interval or two (100 k calls/s and 100 ms: about 0.4 MB x 2)
// unless the disk is slower than the rows arrive. Close() writes the rest.
//
// Thread-safe: Append() from any number of threads. Owns the file and the
// writer thread; Close() (or the destructor) stops the thread after writing
// every row appended before it. Append() must not be called after Close().
#ifndef RANKD_LOADTEST_DRIVER_RESPONSE_LOG_H_
#define RANKD_LOADTEST_DRIVER_RESPONSE_LOG_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace rankd::loadtest {

// One finished call. Times are Unix wall-clock nanoseconds.
struct ResponseRow {
  int64_t scheduled_unix_ns = 0;
  int64_t sent_unix_ns = 0;
  int64_t done_unix_ns = 0;
  int64_t version = 0;  // ScoreResponse.version; 0 for a failed call
  int32_t step = 0;
  absl::StatusCode code = absl::StatusCode::kOk;
};

class ResponseLog {
 public:
  static constexpr char kHeader[] =
      "scheduled_unix_us,sent_unix_us,done_unix_us,latency_us,code,version,step";

  struct Options {
    // The file; created or truncated by Create(). Required.
    std::string path;
    // How often the writer thread moves buffered rows to the file; bounds
    // the rows held in memory. In [1, 60000].
    int64_t flush_interval_ms = 100;
  };

  // Opens the file and writes the header. INVALID_ARGUMENT for bad options;
  // FAILED_PRECONDITION "cannot open PATH: REASON" when the file cannot be
  // created (no flag name: the caller knows which flag it came from).
  static absl::StatusOr<std::unique_ptr<ResponseLog>> Create(const Options& options);
  // Close()s if not yet closed (its status is then lost).
  ~ResponseLog();

  ResponseLog(const ResponseLog&) = delete;
  ResponseLog& operator=(const ResponseLog&) = delete;

  // Buffers one row (see the cost above).
  void Append(const ResponseRow& row);

  // Writes every buffered row, stops the writer thread and closes the file.
  // The first write or close error (INTERNAL naming the path), else OK.
  // Later calls return the same status. Called by the owner (one thread).
  absl::Status Close();

  // Rows written to the file so far.
  int64_t rows_written() const { return rows_written_.load(std::memory_order_relaxed); }
  const std::string& path() const { return options_.path; }

  // One line of the file, with its newline (exposed for tests).
  static void AppendLine(const ResponseRow& row, std::string* out);

 private:
  static constexpr int kShards = 8;
  struct Shard {
    absl::Mutex mu;
    std::vector<ResponseRow> rows ABSL_GUARDED_BY(mu);
  };

  ResponseLog(const Options& options, std::FILE* file);
  Shard& MyShard();
  void WriterLoop();
  // Swaps every shard's rows out and writes them (writer thread, or Close()
  // after the thread has stopped).
  void WriteBuffered();
  void WriteText(const std::string& text);

  const Options options_;
  std::array<Shard, kShards> shards_;
  std::atomic<int64_t> rows_written_{0};

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;

  // The owner's (Close()).
  bool closed_ = false;
  absl::Status close_status_;

  // Writer thread only (then Close(), after joining it).
  std::FILE* file_;
  absl::Status write_status_;
  std::vector<ResponseRow> spare_;
  std::string text_;

  std::thread writer_;
};

}  // namespace rankd::loadtest

#endif  // RANKD_LOADTEST_DRIVER_RESPONSE_LOG_H_
