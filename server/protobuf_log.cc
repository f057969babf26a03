#include "server/protobuf_log.h"

#include "absl/strings/str_cat.h"
#include "google/protobuf/stubs/logging.h"
#include "spdlog/spdlog.h"

namespace rankd::server {

bool LogRateLimiter::Allow(const std::string& location, absl::Time now, int64_t* skipped) {
  absl::MutexLock lock(&mu_);
  Entry& entry = entries_[location];
  if (now - entry.last_written < interval_) {
    ++entry.skipped;
    return false;
  }
  *skipped = entry.skipped;
  entry.skipped = 0;
  entry.last_written = now;
  return true;
}

namespace {

// Set once by RouteProtobufLogsToSpdlog; the handler is a plain function.
LogRateLimiter* g_limiter = nullptr;

void HandleProtobufLog(google::protobuf::LogLevel level, const char* filename, int line,
                       const std::string& message) {
  int64_t skipped = 0;
  if (!g_limiter->Allow(absl::StrCat(filename, ":", line), absl::Now(), &skipped)) return;
  const std::string text =
      skipped > 0 ? absl::StrCat("protobuf: ", message, " (", skipped,
                                 " more like it since the last such line)")
                  : absl::StrCat("protobuf: ", message);
  switch (level) {
    case google::protobuf::LOGLEVEL_INFO:
      spdlog::info("{}", text);
      break;
    case google::protobuf::LOGLEVEL_WARNING:
      spdlog::warn("{}", text);
      break;
    default:
      spdlog::error("{}", text);
      break;
  }
}

}  // namespace

void RouteProtobufLogsToSpdlog(absl::Duration interval) {
  // Never freed: protobuf may log until the process ends.
  if (g_limiter == nullptr) g_limiter = new LogRateLimiter(interval);
  google::protobuf::SetLogHandler(&HandleProtobufLog);
}

}  // namespace rankd::server
