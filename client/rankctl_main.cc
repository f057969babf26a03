// rankctl: command-line client of a rankd server (gRPC only).
#include <algorithm>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "client/rankctl/commands.h"

namespace {

constexpr char kUsage[] =
    "rankctl <command> [flags]\n"
    "\n"
    "Commands:\n"
    "  score   send ScoreRequest JSON lines, write ScoreResponse JSON lines in order\n"
    "            rankctl score --input req.jsonl --output resp.jsonl --concurrency 8\n"
    "  info    print a served model's ModelInfo as JSON\n"
    "            rankctl info --model mini [--version 2]\n"
    "  health  print the serving status; exit 0 only when SERVING\n"
    "            rankctl health [--service mini]\n"
    "\n"
    "Every command takes --target (default localhost:8500), --deadline_ms,\n"
    "--max_message_bytes and --connect_timeout_ms. Exit codes: 0 ok, 1 a call\n"
    "failed (health: not SERVING), 2 bad flag, 3 server unreachable.\n"
    "`rankctl <command> --help` lists a command's flags.";

struct Command {
  const char* name;
  int (*run)();
};

const Command kCommands[] = {
    {"score", rankd::rankctl::RunScore},
    {"info", rankd::rankctl::RunInfo},
    {"health", rankd::rankctl::RunHealth},
};

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  if (argc < 2 || std::strncmp(argv[1], "-", 1) == 0) {
    if (argc >= 2) absl::ParseCommandLine(argc, argv);  // --help, --helpfull
    std::cerr << kUsage << "\n";
    return rankd::rankctl::kExitUsage;
  }
  const std::string name = argv[1];
  for (const Command& c : kCommands) {
    if (name != c.name) continue;
    // Parse the flags after the command word; --help shows rankctl's flags.
    std::vector<std::string> storage = {argv[0]};
    for (int i = 2; i < argc; ++i) {
      absl::string_view arg = argv[i];
      // abseil owns the name --version (its usage flag), so `info --version V`
      // reaches the flag --model_version.
      const size_t dashes = absl::StartsWith(arg, "--") ? 2 : 1;
      const absl::string_view bare = arg.substr(std::min(dashes, arg.size()));
      if (name == "info" && (bare == "version" || absl::StartsWith(bare, "version="))) {
        storage.push_back("--model_version" + std::string(bare.substr(strlen("version"))));
      } else {
        storage.emplace_back(arg);
      }
    }
    std::vector<char*> args;
    for (std::string& s : storage) args.push_back(s.data());
    absl::FlagsUsageConfig config;
    config.contains_help_flags = [](absl::string_view file) {
      return absl::StrContains(file, "client/rankctl");
    };
    absl::SetFlagsUsageConfig(config);
    std::vector<char*> rest = absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
    if (rest.size() > 1) {
      std::cerr << "rankctl " << name << ": unexpected argument \"" << rest[1]
                << "\" (flags are --name=value)\n";
      return rankd::rankctl::kExitUsage;
    }
    return c.run();
  }
  std::cerr << "rankctl: unknown command \"" << name << "\"\n\n" << kUsage << "\n";
  return rankd::rankctl::kExitUsage;
}
