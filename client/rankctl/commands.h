// `rankctl` subcommands and what they share: the connection flags, the clients
// built from them and the exit codes. Each Run* parses nothing itself (main
// has parsed the abseil flags) and returns the process exit code.
#ifndef RANKD_CLIENT_RANKCTL_COMMANDS_H_
#define RANKD_CLIENT_RANKCTL_COMMANDS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/model_control_client.h"
#include "client/ranking_client.h"
#include "client/tls.h"
#include "google/protobuf/message.h"
#include "rankd/v1/model_control.pb.h"

namespace rankd::rankctl {

// Exit codes, the same for every command (docs/client.md).
inline constexpr int kExitOk = 0;           // done; `health`: SERVING
inline constexpr int kExitFailed = 1;       // a call failed; `health`: not SERVING
inline constexpr int kExitUsage = 2;        // bad flag or argument
inline constexpr int kExitUnavailable = 3;  // UNAVAILABLE: server not reachable

// Public listener (--target): rankd.v1.Ranking and health.
int RunScore();   // rankctl score
int RunInfo();    // rankctl info
int RunHealth();  // rankctl health
// Admin listener (--admin_target): rankd.v1.ModelControl.
int RunModels();  // rankctl models
int RunLoad();    // rankctl load
int RunUnload();  // rankctl unload
int RunLabel();   // rankctl label
int RunUpdate();    // rankctl update
int RunSnapshot();  // rankctl snapshot

// --- common.cc: flags of every command ----------------------------------------

// --model, "" when not given.
std::string ModelFlag();
// --version (main rewrites it to --model_version), unset when not given.
std::optional<int64_t> VersionFlag();
// --version_label, "" when not given.
std::string VersionLabelFlag();

// --deadline_ms, or `default_ms` when it is not given.
int64_t DeadlineMsOr(int64_t default_ms);

// The connection flags every client takes alike (the target and
// --deadline_ms aside: their defaults differ): credentials and token of
// --tls_ca_file, --tls_cert_file, --tls_key_file and --token_file,
// --max_message_bytes and --connect_timeout_ms.
struct ConnectionFlags {
  client::Security security;
  int64_t max_message_bytes = 0;
  int64_t connect_timeout_ms = 0;

  // Sets them in a client's Options (RankingClient's or ModelControlClient's).
  template <typename Options>
  void ApplyTo(Options* options) const {
    options->credentials = security.credentials;
    options->bearer_token = security.bearer_token;
    options->max_message_bytes = max_message_bytes;
    options->connect_timeout_ms = connect_timeout_ms;
  }
};

// Checks `target` (the value of --`target_flag`), --deadline_ms,
// --max_message_bytes and --connect_timeout_ms (INVALID_ARGUMENT naming the
// flag, since the clients' own messages name Options fields instead), then
// loads the TLS files and token (errors name the flag).
absl::StatusOr<ConnectionFlags> ConnectionFromFlags(absl::string_view target_flag,
                                                    const std::string& target);

// A client from --target, --deadline_ms, --max_message_bytes and
// --connect_timeout_ms; INVALID_ARGUMENT naming the flag when one is bad.
absl::StatusOr<std::unique_ptr<client::RankingClient>> ClientFromFlags();

// "CODE: message", with a hint for the codes whose cause is usually the
// command line (UNAVAILABLE: --target; DEADLINE_EXCEEDED: --deadline_ms).
std::string DescribeError(const absl::Status& status);

// The exit code for a failed call or setup step.
int ExitCodeFor(const absl::Status& status);

// A bad flag or argument: prints "rankctl <command>: <why>" and returns
// kExitUsage.
int UsageError(absl::string_view command, absl::string_view why);

// A failed call of the public API: prints "rankctl <command>: " and
// DescribeError(status), and returns ExitCodeFor(status).
int CallFailed(absl::string_view command, const absl::Status& status);

// The exit code for a failed client construction: kExitUsage for a bad flag
// (INVALID_ARGUMENT), else ExitCodeFor. Prints "rankctl <command>: why".
int ClientSetupFailed(absl::string_view command, const absl::Status& status);

// Prints `message` on stdout as indented proto3 JSON, fields with default
// values included (a reader sees every field, a script finds every key).
absl::Status PrintJson(const google::protobuf::Message& message);

// --- admin_common.cc: flags of the admin commands --------------------------------

// A client of the admin API from --admin_target, --deadline_ms (when given:
// the deadline of every call, load and unload included; otherwise the
// client's defaults), --max_message_bytes and --connect_timeout_ms;
// INVALID_ARGUMENT naming the flag when one is bad.
absl::StatusOr<std::unique_ptr<client::ModelControlClient>> AdminClientFromFlags();
// --admin_target.
std::string AdminTargetFlag();
// The Options AdminClientFromFlags uses, for the admin listener at `target`
// (update --all_replicas: each replica's address).
absl::StatusOr<client::ModelControlClient::Options> AdminOptionsFromFlags(
    const std::string& target);

// As DescribeError, with the hints naming --admin_target.
std::string DescribeAdminError(const absl::Status& status);

// As CallFailed, for a call of the admin API (DescribeAdminError).
int AdminCallFailed(absl::string_view command, const absl::Status& status);

// --json: print responses as proto3 JSON instead of a table.
bool JsonFlag();

// --versions ("3,4"; "" = none); INVALID_ARGUMENT naming --versions.
absl::StatusOr<std::vector<int64_t>> VersionsFromFlags();

// What an admin command prints: with --json `response` as proto3 JSON, else
// `text`. Returns kExitOk, or kExitFailed when stdout fails (JSON: with
// "rankctl <command>: why" on stderr).
int PrintAdminResult(absl::string_view command, const google::protobuf::Message& response,
                     const std::string& text);

// What load, unload and label print: PrintAdminResult with the table of
// `model` (model_table.h) as the text.
int PrintModelResult(absl::string_view command, const google::protobuf::Message& response,
                     const rankd::v1::ModelStatus& model);

}  // namespace rankd::rankctl

#endif  // RANKD_CLIENT_RANKCTL_COMMANDS_H_
