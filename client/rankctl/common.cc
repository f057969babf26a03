// Connection flags shared by every rankctl command.
#include <climits>
#include <cstdint>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/rankctl/commands.h"

ABSL_FLAG(std::string, target, "localhost:8500", "rankd's gRPC address (host:port)");
ABSL_FLAG(int64_t, deadline_ms, 1000, "deadline of each call, in milliseconds");
ABSL_FLAG(int64_t, max_message_bytes, 64 << 20, "largest request or response message, in bytes");
ABSL_FLAG(int64_t, connect_timeout_ms, 0,
          "> 0: wait up to this long for a connection before the first call and fail "
          "with UNAVAILABLE without one; 0: connect with the first call");

namespace rankd::rankctl {

absl::StatusOr<std::unique_ptr<client::RankingClient>> ClientFromFlags() {
  client::RankingClient::Options options;
  options.target = absl::GetFlag(FLAGS_target);
  options.deadline_ms = absl::GetFlag(FLAGS_deadline_ms);
  options.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  options.connect_timeout_ms = absl::GetFlag(FLAGS_connect_timeout_ms);
  // Checked here too, so that the messages name the flags.
  if (options.target.empty()) return absl::InvalidArgumentError("--target: must not be empty");
  if (options.deadline_ms <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--deadline_ms: must be > 0, got ", options.deadline_ms));
  }
  if (options.max_message_bytes <= 0 || options.max_message_bytes > INT_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("--max_message_bytes: must be in [1, ", INT_MAX,
                                                   "], got ", options.max_message_bytes));
  }
  if (options.connect_timeout_ms < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--connect_timeout_ms: must be >= 0, got ", options.connect_timeout_ms));
  }
  return client::RankingClient::Create(options);
}

std::string DescribeError(const absl::Status& status) {
  std::string text = absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message());
  if (absl::IsUnavailable(status)) {
    absl::StrAppend(&text, " (is rankd serving at --target=", absl::GetFlag(FLAGS_target), "?)");
  } else if (absl::IsDeadlineExceeded(status)) {
    absl::StrAppend(&text, " (--deadline_ms=", absl::GetFlag(FLAGS_deadline_ms), ")");
  }
  return text;
}

int ExitCodeFor(const absl::Status& status) {
  if (status.ok()) return kExitOk;
  if (absl::IsUnavailable(status)) return kExitUnavailable;
  return kExitFailed;
}

}  // namespace rankd::rankctl
