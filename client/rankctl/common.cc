// Flags shared by every rankctl command: connection flags of the public
// listener and the model / version selection of several commands.
#include <climits>
#include <cstdint>
#include <iostream>
#include <optional>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/rankctl/commands.h"
#include "client/security_flags.h"
#include "google/protobuf/util/json_util.h"

ABSL_FLAG(std::string, target, "localhost:8500",
          "score, info, health: rankd's public gRPC address (host:port)");
// Optional: load and unload default to a much longer deadline than the other
// commands (they wait for versions to load or drain), unless this is given.
ABSL_FLAG(std::optional<int64_t>, deadline_ms, std::nullopt,
          "deadline of each call, in milliseconds (default 1000; models, label: 10000; "
          "load, unload: 600000, as they wait for versions to load or drain)");
ABSL_FLAG(int64_t, max_message_bytes, 64 << 20, "largest request or response message, in bytes");
ABSL_FLAG(int64_t, connect_timeout_ms, 0,
          "> 0: wait up to this long for a connection before the first call and fail "
          "with UNAVAILABLE without one; 0: connect with the first call");
ABSL_FLAG(std::string, model, "",
          "info, load, unload, label, update, snapshot: the model's name; models: only this "
          "model");
// Not `--version`: abseil reserves that name for its own usage flag (a flag of
// that name would clash with libabsl's FLAGS_version). rankctl_main rewrites
// `--version V` of info and label into `--model_version V`.
ABSL_FLAG(std::optional<int64_t>, model_version, std::nullopt,
          "info: the model version (also --version; default 0 = newest ready); label: the "
          "version the label points at (also --version; required, 0 removes the label); "
          "update: the version to update (also --version; default 0 = every live version); "
          "snapshot: the READY version to snapshot (also --version; default 0 = newest)");
ABSL_FLAG(std::string, version_label, "",
          "score, info: a version label of the model (e.g. stable), used instead of a version");

namespace rankd::rankctl {

std::string ModelFlag() { return absl::GetFlag(FLAGS_model); }
std::optional<int64_t> VersionFlag() { return absl::GetFlag(FLAGS_model_version); }
std::string VersionLabelFlag() { return absl::GetFlag(FLAGS_version_label); }

int64_t DeadlineMsOr(int64_t default_ms) {
  return absl::GetFlag(FLAGS_deadline_ms).value_or(default_ms);
}

namespace {

absl::Status CheckConnectionFlags(absl::string_view target_flag, const std::string& target) {
  if (target.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", target_flag, ": must not be empty"));
  }
  const std::optional<int64_t> deadline_ms = absl::GetFlag(FLAGS_deadline_ms);
  if (deadline_ms.has_value() && *deadline_ms <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--deadline_ms: must be > 0, got ", *deadline_ms));
  }
  const int64_t max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  if (max_message_bytes <= 0 || max_message_bytes > INT_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("--max_message_bytes: must be in [1, ", INT_MAX,
                                                   "], got ", max_message_bytes));
  }
  const int64_t connect_timeout_ms = absl::GetFlag(FLAGS_connect_timeout_ms);
  if (connect_timeout_ms < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--connect_timeout_ms: must be >= 0, got ", connect_timeout_ms));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ConnectionFlags> ConnectionFromFlags(absl::string_view target_flag,
                                                    const std::string& target) {
  if (absl::Status s = CheckConnectionFlags(target_flag, target); !s.ok()) return s;
  absl::StatusOr<client::Security> security =
      client::LoadSecurity(client::SecurityFilesFromFlags());
  if (!security.ok()) return security.status();
  ConnectionFlags flags;
  flags.security = *std::move(security);
  flags.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  flags.connect_timeout_ms = absl::GetFlag(FLAGS_connect_timeout_ms);
  return flags;
}

absl::StatusOr<std::unique_ptr<client::RankingClient>> ClientFromFlags() {
  client::RankingClient::Options options;
  options.target = absl::GetFlag(FLAGS_target);
  absl::StatusOr<ConnectionFlags> connection = ConnectionFromFlags("target", options.target);
  if (!connection.ok()) return connection.status();
  connection->ApplyTo(&options);
  options.deadline_ms = DeadlineMsOr(options.deadline_ms);
  return client::RankingClient::Create(options);
}

std::string DescribeError(const absl::Status& status) {
  std::string text = absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message());
  if (absl::IsUnavailable(status)) {
    absl::StrAppend(&text, " (is rankd serving at --target=", absl::GetFlag(FLAGS_target), "?)");
  } else if (absl::IsDeadlineExceeded(status)) {
    absl::StrAppend(
        &text, " (--deadline_ms=", DeadlineMsOr(client::RankingClient::Options{}.deadline_ms), ")");
  }
  return text;
}

int ExitCodeFor(const absl::Status& status) {
  if (status.ok()) return kExitOk;
  if (absl::IsUnavailable(status)) return kExitUnavailable;
  return kExitFailed;
}

int UsageError(absl::string_view command, absl::string_view why) {
  std::cerr << "rankctl " << command << ": " << why << "\n";
  return kExitUsage;
}

int CallFailed(absl::string_view command, const absl::Status& status) {
  std::cerr << "rankctl " << command << ": " << DescribeError(status) << "\n";
  return ExitCodeFor(status);
}

int ClientSetupFailed(absl::string_view command, const absl::Status& status) {
  std::cerr << "rankctl " << command << ": " << status.message() << "\n";
  return absl::IsInvalidArgument(status) ? kExitUsage : ExitCodeFor(status);
}

absl::Status PrintJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  std::string json;
  const auto printed = google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!printed.ok()) {
    return absl::InternalError(absl::StrCat("cannot print ", message.GetTypeName(),
                                            " as JSON: ", std::string(printed.message())));
  }
  std::cout << json;
  if (json.empty() || json.back() != '\n') std::cout << "\n";
  if (!std::cout.flush()) return absl::DataLossError("cannot write to stdout");
  return absl::OkStatus();
}

}  // namespace rankd::rankctl
