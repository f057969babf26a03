// `rankctl` subcommands and what they share: the connection flags, the client
// built from them and the exit codes. Each Run* parses nothing itself (main
// has parsed the abseil flags) and returns the process exit code.
#ifndef RANKD_CLIENT_RANKCTL_COMMANDS_H_
#define RANKD_CLIENT_RANKCTL_COMMANDS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/ranking_client.h"

namespace rankd::rankctl {

// Exit codes, the same for every command (docs/client.md).
inline constexpr int kExitOk = 0;           // done; `health`: SERVING
inline constexpr int kExitFailed = 1;       // a call failed; `health`: not SERVING
inline constexpr int kExitUsage = 2;        // bad flag or argument
inline constexpr int kExitUnavailable = 3;  // UNAVAILABLE: server not reachable

int RunScore();   // rankctl score
int RunInfo();    // rankctl info
int RunHealth();  // rankctl health

// A client from --target, --deadline_ms, --max_message_bytes and
// --connect_timeout_ms; INVALID_ARGUMENT naming the flag when one is bad.
absl::StatusOr<std::unique_ptr<client::RankingClient>> ClientFromFlags();

// "CODE: message", with a hint for the codes whose cause is usually the
// command line (UNAVAILABLE: --target; DEADLINE_EXCEEDED: --deadline_ms).
std::string DescribeError(const absl::Status& status);

// The exit code for a failed call or setup step.
int ExitCodeFor(const absl::Status& status);

}  // namespace rankd::rankctl

#endif  // RANKD_CLIENT_RANKCTL_COMMANDS_H_
