#include "loadtest/driver/response_log.h"

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace rankd::loadtest {
namespace {

// Nanoseconds as whole microseconds, rounded down (also below zero).
int64_t FloorUs(int64_t ns) { return ns >= 0 ? ns / 1000 : -((-ns + 999) / 1000); }

// Nanoseconds as microseconds with 3 decimals: 1234567 -> "1234.567".
void AppendUsWithNs(int64_t ns, std::string* out) {
  if (ns < 0) {
    out->push_back('-');
    ns = -ns;
  }
  absl::StrAppend(out, ns / 1000, ".", absl::Dec(ns % 1000, absl::kZeroPad3));
}

// The gRPC name of a status code; absl spells the canonical codes as gRPC
// does ("OK", "DEADLINE_EXCEEDED", ...), and rankload counts others as UNKNOWN.
absl::string_view CodeName(absl::StatusCode code) {
  static const auto* names = [] {
    auto* v = new std::vector<std::string>;
    for (int c = 0; c <= 16; ++c) {
      v->push_back(absl::StatusCodeToString(static_cast<absl::StatusCode>(c)));
    }
    return v;
  }();
  const int c = static_cast<int>(code);
  if (c < 0 || c >= static_cast<int>(names->size()) || (*names)[c].empty()) return "UNKNOWN";
  return (*names)[c];
}

}  // namespace

absl::StatusOr<std::unique_ptr<ResponseLog>> ResponseLog::Create(const Options& options) {
  if (options.path.empty()) return absl::InvalidArgumentError("path: must not be empty");
  if (options.flush_interval_ms < 1 || options.flush_interval_ms > 60000) {
    return absl::InvalidArgumentError(
        absl::StrCat("flush_interval_ms: must be in [1, 60000], got ", options.flush_interval_ms));
  }
  std::FILE* file = std::fopen(options.path.c_str(), "w");
  if (file == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open ", options.path, ": ", std::strerror(errno)));
  }
  std::unique_ptr<ResponseLog> log(new ResponseLog(options, file));
  log->WriteText(absl::StrCat(kHeader, "\n"));
  log->writer_ = std::thread([p = log.get()] { p->WriterLoop(); });
  return log;
}

ResponseLog::ResponseLog(const Options& options, std::FILE* file)
    : options_(options), file_(file) {}

ResponseLog::~ResponseLog() { Close().IgnoreError(); }

ResponseLog::Shard& ResponseLog::MyShard() {
  static std::atomic<int> next{0};
  thread_local const int index = next.fetch_add(1, std::memory_order_relaxed) % kShards;
  return shards_[index];
}

void ResponseLog::Append(const ResponseRow& row) {
  Shard& s = MyShard();
  absl::MutexLock lock(&s.mu);
  s.rows.push_back(row);
}

void ResponseLog::AppendLine(const ResponseRow& row, std::string* out) {
  absl::StrAppend(out, FloorUs(row.scheduled_unix_ns), ",", FloorUs(row.sent_unix_ns), ",",
                  FloorUs(row.done_unix_ns), ",");
  AppendUsWithNs(row.done_unix_ns - row.scheduled_unix_ns, out);
  absl::StrAppend(out, ",", CodeName(row.code), ",", row.version, ",", row.step, "\n");
}

void ResponseLog::WriterLoop() {
  for (;;) {
    bool stopping;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::Milliseconds(options_.flush_interval_ms));
      stopping = stop_;
    }
    // After the stop: the last pass, holding every row appended before Close().
    WriteBuffered();
    if (stopping) return;
  }
}

void ResponseLog::WriteBuffered() {
  for (Shard& s : shards_) {
    spare_.clear();  // keeps its capacity, which the shard gets in the swap
    {
      absl::MutexLock lock(&s.mu);
      s.rows.swap(spare_);
    }
    if (spare_.empty()) continue;
    text_.clear();
    for (const ResponseRow& row : spare_) AppendLine(row, &text_);
    WriteText(text_);
    if (write_status_.ok()) rows_written_.fetch_add(spare_.size(), std::memory_order_relaxed);
  }
  // Whole passes reach the file (a reader can follow it; errors show early).
  if (write_status_.ok() && std::fflush(file_) != 0) {
    write_status_ = absl::InternalError(
        absl::StrCat("cannot write ", options_.path, ": ", std::strerror(errno)));
  }
}

void ResponseLog::WriteText(const std::string& text) {
  // After an error rows are dropped, so memory stays bounded; Close() reports it.
  if (!write_status_.ok()) return;
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size()) {
    write_status_ = absl::InternalError(
        absl::StrCat("cannot write ", options_.path, ": ", std::strerror(errno)));
  }
}

absl::Status ResponseLog::Close() {
  if (closed_) return close_status_;
  closed_ = true;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  writer_.join();
  close_status_ = write_status_;
  if (std::fclose(file_) != 0 && close_status_.ok()) {
    close_status_ = absl::InternalError(
        absl::StrCat("cannot close ", options_.path, ": ", std::strerror(errno)));
  }
  file_ = nullptr;
  return close_status_;
}

}  // namespace rankd::loadtest
