// Protobuf's own log lines (for example "String field ... contains invalid
// UTF-8 data when parsing a protocol buffer", written once per such request)
// go to spdlog, at most one line per source location per interval.
//
// Why: those lines are triggered by what clients send. Left to protobuf's
// default handler, a client sending one malformed string per request writes
// one stderr line per request, which fills a pod's log volume and drowns the
// server's own lines. The request itself is still answered as before
// (INVALID_ARGUMENT for an unparseable request); only the log is bounded.
//
// Threading: Install once, before serving (protobuf's SetLogHandler is not
// thread-safe); the handler itself is thread-safe.
#ifndef RANKD_SERVER_PROTOBUF_LOG_H_
#define RANKD_SERVER_PROTOBUF_LOG_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace rankd::server {

// Routes protobuf's log lines to spdlog (ERROR -> error, WARNING -> warn,
// INFO -> info), at most one line per (file, line) per `interval`; the next
// line written from that location says how many were left out since.
void RouteProtobufLogsToSpdlog(absl::Duration interval = absl::Seconds(10));

// The rate limit: whether a line from `location` at `now` is written, and
// how many from there were left out since the last one written
// (`*skipped`). The first line from a location is always written.
// Thread-safe. Remembers every location seen (protobuf has a few dozen).
class LogRateLimiter {
 public:
  explicit LogRateLimiter(absl::Duration interval) : interval_(interval) {}
  bool Allow(const std::string& location, absl::Time now, int64_t* skipped);

 private:
  struct Entry {
    absl::Time last_written = absl::InfinitePast();
    int64_t skipped = 0;
  };
  const absl::Duration interval_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rankd::server

#endif  // RANKD_SERVER_PROTOBUF_LOG_H_
