// Flags and output shared by the admin commands (models, load, unload,
// label): they talk to rankd's admin listener (rankd.v1.ModelControl), which
// is loopback-only by default, not to its public --target.
#include <cstdint>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/rankctl/commands.h"
#include "client/rankctl/model_table.h"

ABSL_FLAG(std::string, admin_target, "localhost:8503",
          "models, load, unload, label, update, snapshot: rankd's admin gRPC address "
          "(--admin_host:--admin_port of rankd serve); update --all_replicas: a name that "
          "resolves to every replica (e.g. a headless Service)");
ABSL_FLAG(std::string, versions, "",
          "load, unload: versions, comma-separated (e.g. 3,4); none = load: what the model's "
          "version policy selects, unload: every version");
ABSL_FLAG(bool, json, false,
          "models, load, unload, label, snapshot: print the response as proto3 JSON instead of "
          "a table");

ABSL_DECLARE_FLAG(std::optional<int64_t>, deadline_ms);

namespace rankd::rankctl {

bool JsonFlag() { return absl::GetFlag(FLAGS_json); }

std::string AdminTargetFlag() { return absl::GetFlag(FLAGS_admin_target); }

absl::StatusOr<client::ModelControlClient::Options> AdminOptionsFromFlags(
    const std::string& target) {
  client::ModelControlClient::Options options;
  options.target = target;
  absl::StatusOr<ConnectionFlags> connection = ConnectionFromFlags("admin_target", options.target);
  if (!connection.ok()) return connection.status();
  connection->ApplyTo(&options);
  // Given: the deadline of every call. Not given: the client's own defaults
  // (short for list and label, long for load, unload, update and snapshot).
  options.deadline_ms = DeadlineMsOr(options.deadline_ms);
  options.load_deadline_ms = DeadlineMsOr(options.load_deadline_ms);
  options.update_deadline_ms = DeadlineMsOr(options.update_deadline_ms);
  return options;
}

absl::StatusOr<std::unique_ptr<client::ModelControlClient>> AdminClientFromFlags() {
  auto options = AdminOptionsFromFlags(absl::GetFlag(FLAGS_admin_target));
  if (!options.ok()) return options.status();
  return client::ModelControlClient::Create(*options);
}

std::string DescribeAdminError(const absl::Status& status) {
  std::string text = absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message());
  if (absl::IsUnavailable(status)) {
    absl::StrAppend(&text, " (is rankd's admin listener at --admin_target=",
                    absl::GetFlag(FLAGS_admin_target), "?)");
  } else if (absl::IsDeadlineExceeded(status)) {
    const std::optional<int64_t> deadline_ms = absl::GetFlag(FLAGS_deadline_ms);
    absl::StrAppend(&text,
                    deadline_ms.has_value()
                        ? absl::StrCat(" (--deadline_ms=", *deadline_ms, ")")
                        : std::string(" (the default deadline: raise it with --deadline_ms)"));
  }
  return text;
}

int AdminCallFailed(absl::string_view command, const absl::Status& status) {
  std::cerr << "rankctl " << command << ": " << DescribeAdminError(status) << "\n";
  return ExitCodeFor(status);
}

absl::StatusOr<std::vector<int64_t>> VersionsFromFlags() {
  const std::string text = absl::GetFlag(FLAGS_versions);
  std::vector<int64_t> versions;
  if (text.empty()) return versions;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t version = 0;
    if (!absl::SimpleAtoi(part, &version) || version <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("--versions: \"", part,
                                                     "\" is not a version number >= 1 (want "
                                                     "e.g. --versions=3,4)"));
    }
    versions.push_back(version);
  }
  return versions;
}

int PrintAdminResult(absl::string_view command, const google::protobuf::Message& response,
                     const std::string& text) {
  if (JsonFlag()) {
    if (absl::Status printed = PrintJson(response); !printed.ok()) {
      std::cerr << "rankctl " << command << ": " << printed.message() << "\n";
      return kExitFailed;
    }
    return kExitOk;
  }
  std::cout << text;
  return std::cout.flush() ? kExitOk : kExitFailed;
}

int PrintModelResult(absl::string_view command, const google::protobuf::Message& response,
                     const rankd::v1::ModelStatus& model) {
  return PrintAdminResult(command, response, ModelTable(model));
}

}  // namespace rankd::rankctl
