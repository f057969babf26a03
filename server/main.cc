// rankd: the ranking server binary and its tools, as subcommands.
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "server/tools/commands.h"

namespace {

constexpr char kUsage[] =
    "rankd <command> [flags]\n"
    "\n"
    "Commands:\n"
    "  serve         (default) serve every model under --model_root over gRPC\n"
    "                  rankd serve --model_root models --grpc_port 8500 --metrics_port 8502\n"
    "  gen-model     write a model version with random weights in a preset's shapes\n"
    "                  rankd gen-model --preset mini --out models/mini/1\n"
    "  gen-requests  write ScoreRequest JSON lines with Zipf-distributed ids\n"
    "                  rankd gen-requests --model models/mini/1 --count 100 --candidates 64\n"
    "  score         score ScoreRequest JSON lines without a server (CPU)\n"
    "                  rankd score --model models/mini/1 --input req.jsonl --output resp.jsonl\n"
    "  inspect       print a model's tables, sizes and MLP shapes (--json: its config;\n"
    "                --check: also load and validate it as serve would, exit 1 on an error)\n"
    "                  rankd inspect --model models/mini/1 --check\n"
    "\n"
    "Flags are listed per command by `rankd <command> --help`; `rankd --helpfull` lists all.";

struct Command {
  const char* name;
  int (*run)();
};

const Command kCommands[] = {
    {"serve", rankd::server::RunServe},
    {"gen-model", rankd::server::RunGenModel},
    {"gen-requests", rankd::server::RunGenRequests},
    {"score", rankd::server::RunScore},
    {"inspect", rankd::server::RunInspect},
};

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  // No command word: `rankd [flags]` is `rankd serve [flags]`.
  std::vector<char*> argv_with_command(argv, argv + argc);
  if (argc < 2 || std::strncmp(argv[1], "-", 1) == 0) {
    static char serve[] = "serve";
    argv_with_command.insert(argv_with_command.begin() + 1, serve);
    argc += 1;
    argv = argv_with_command.data();
  }
  const std::string name = argv[1];
  for (const Command& c : kCommands) {
    if (name != c.name) continue;
    // Parse the flags after the command word; --help shows this command's flags.
    std::vector<char*> args = {argv[0]};
    for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
    absl::FlagsUsageConfig config;
    // `rankd <command> --help` lists that command's flags and the shared ones.
    static std::string help_file;
    help_file = name == "serve" ? "server/serve_cmd.cc"
                                : "server/tools/" + name.substr(0, name.find('-')) +
                                      (name.find('-') == std::string::npos ? "" : "_" + name.substr(name.find('-') + 1)) +
                                      "_cmd.cc";
    config.contains_help_flags = [](absl::string_view file) {
      return absl::EndsWith(file, help_file) || absl::EndsWith(file, "server/tools/common_flags.cc");
    };
    absl::SetFlagsUsageConfig(config);
    std::vector<char*> rest = absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
    if (rest.size() > 1) {
      std::cerr << "rankd " << name << ": unexpected argument \"" << rest[1]
                << "\" (flags are --name=value)\n";
      return 2;
    }
    return c.run();
  }
  std::cerr << "rankd: unknown command \"" << name << "\"\n\n" << kUsage << "\n";
  return 2;
}
