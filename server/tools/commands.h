// `rankd` subcommands. Each parses its own abseil flags (already parsed by
// main before the call) and returns the process exit code.
#ifndef RANKD_SERVER_TOOLS_COMMANDS_H_
#define RANKD_SERVER_TOOLS_COMMANDS_H_

namespace rankd::server {

int RunServe();       // rankd serve (the default)
int RunGenModel();     // rankd gen-model
int RunGenRequests();  // rankd gen-requests
int RunScore();        // rankd score
int RunInspect();      // rankd inspect

}  // namespace rankd::server

#endif  // RANKD_SERVER_TOOLS_COMMANDS_H_
