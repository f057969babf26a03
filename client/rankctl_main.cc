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
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "client/process_exit.h"
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
    "Admin commands (rankd's admin listener, rankd.v1.ModelControl):\n"
    "  models  list models and versions: state, labels, load and warm-up s, memory\n"
    "            rankctl models [--model mini] [--json]\n"
    "  load    load (or reload) versions and wait until READY or FAILED\n"
    "            rankctl load --model mini [--versions 3,4]\n"
    "  unload  drain and unload versions (every version without --versions)\n"
    "            rankctl unload --model mini [--versions 3]\n"
    "  label   point a version label at a READY version (--version 0 removes it)\n"
    "            rankctl label --model mini --label stable --version 3\n"
    "  update  stream an embedding delta (safetensors: <table>.ids, .rows, .delete)\n"
    "            rankctl update --model mini --input delta.safetensors [--all_replicas]\n"
    "              [--max_rows_per_second 1000000] [--repeat 10] [--repeat_for_s 30]\n"
    "  snapshot  write a version's live tables as a new version and serve it\n"
    "            rankctl snapshot --model mini [--version 2] [--new_version 5]\n"
    "\n"
    "score, info and health take --target (default localhost:8500); the admin\n"
    "commands take --admin_target (default localhost:8503, loopback-only on the\n"
    "server by default). Every command takes --deadline_ms, --max_message_bytes\n"
    "and --connect_timeout_ms. Exit codes: 0 ok, 1 a call failed (health: not\n"
    "SERVING; load: a version failed to load; update: a replica failed), 2 bad flag,\n"
    "3 server unreachable.\n"
    "`rankctl <command> --help` lists a command's flags.";

struct Command {
  const char* name;
  int (*run)();
  bool admin;  // talks to the admin listener (--admin_target), not --target
};

const Command kCommands[] = {
    {"score", rankd::rankctl::RunScore, /*admin=*/false},
    {"info", rankd::rankctl::RunInfo, /*admin=*/false},
    {"health", rankd::rankctl::RunHealth, /*admin=*/false},
    {"models", rankd::rankctl::RunModels, /*admin=*/true},
    {"load", rankd::rankctl::RunLoad, /*admin=*/true},
    {"unload", rankd::rankctl::RunUnload, /*admin=*/true},
    {"label", rankd::rankctl::RunLabel, /*admin=*/true},
    {"update", rankd::rankctl::RunUpdate, /*admin=*/true},
    {"snapshot", rankd::rankctl::RunSnapshot, /*admin=*/true},
};

// `bare` (a flag without its dashes) names flag `name`, as --name or --name=V.
bool IsFlag(absl::string_view bare, absl::string_view name) {
  return bare == name || absl::StartsWith(bare, absl::StrCat(name, "="));
}

// The flags of a command line after the command word, with `--version` of
// info and label rewritten to --model_version; "" and a message naming the
// flag when a flag belongs to the other listener's commands (a --target given
// to an admin command would otherwise be ignored without a word).
std::string RewriteArgs(const Command& c, int argc, char** argv, std::vector<std::string>* out) {
  const std::string name = c.name;
  for (int i = 2; i < argc; ++i) {
    absl::string_view arg = argv[i];
    // abseil owns the name --version (its usage flag), so `info --version V`
    // reaches the flag --model_version.
    const size_t dashes = absl::StartsWith(arg, "--") ? 2 : 1;
    const absl::string_view bare = arg.substr(std::min(dashes, arg.size()));
    if (c.admin && IsFlag(bare, "target")) {
      return "--target: the admin commands take --admin_target (rankd's admin listener, "
             "default localhost:8503)";
    }
    if (!c.admin && IsFlag(bare, "admin_target")) {
      return "--admin_target: only the admin commands (models, load, unload, label, update, "
             "snapshot) take it; "
             "use --target";
    }
    if ((name == "info" || name == "label" || name == "update" || name == "snapshot") &&
        IsFlag(bare, "version")) {
      out->push_back("--model_version" + std::string(bare.substr(strlen("version"))));
    } else {
      out->emplace_back(arg);
    }
  }
  return "";
}

int Main(int argc, char** argv) {
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
    if (const std::string error = RewriteArgs(c, argc, argv, &storage); !error.empty()) {
      std::cerr << "rankctl " << name << ": " << error << "\n";
      return rankd::rankctl::kExitUsage;
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

}  // namespace

// Every command's files are closed when it returns; ExitFlushed then ends the
// process without the exit-time teardown that can race gRPC's own.
int main(int argc, char** argv) { rankd::client::ExitFlushed(Main(argc, argv)); }
