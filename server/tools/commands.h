// `rankd` subcommands. Each parses its own abseil flags (already parsed by
// main before the call) and returns the process exit code.
#ifndef RANKD_SERVER_TOOLS_COMMANDS_H_
#define RANKD_SERVER_TOOLS_COMMANDS_H_

#include <cstdint>
#include <string>

namespace rankd::server {

// The version a `<root>/<name>/<version>` directory holds: its last path
// component when that is a positive integer, else 0.
int64_t VersionFromDirectory(const std::string& directory);

int RunServe();       // rankd serve (the default)
int RunGenModel();     // rankd gen-model
int RunGenRequests();  // rankd gen-requests
int RunScore();        // rankd score
int RunInspect();      // rankd inspect

}  // namespace rankd::server

#endif  // RANKD_SERVER_TOOLS_COMMANDS_H_
