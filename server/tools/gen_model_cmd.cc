// rankd gen-model: a model version directory with random weights in a
// reference preset's shapes.
#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "engine/generator/model_generator.h"
#include "server/tools/commands.h"

ABSL_FLAG(std::string, preset, "mini", "gen-model: mini | kaggle | terabyte | mlperf");
ABSL_FLAG(std::string, out, "", "gen-model: version directory to write (e.g. models/mini/1)");
ABSL_FLAG(double, scale, 1.0, "gen-model: multiply every table's rows by this, in (0, 1]");
ABSL_DECLARE_FLAG(uint64_t, seed);
ABSL_FLAG(std::string, dtype, "fp32", "gen-model: table row type: fp32 | fp16 | bf16");
ABSL_FLAG(std::string, name, "", "gen-model: model name (default: the preset's name)");
ABSL_FLAG(int, num_tables, 0, "gen-model: mini preset only, 3..16 tables (n_sparse sweep); 0 = 3");
ABSL_FLAG(int, dynamic_tables, 0, "gen-model: make the N largest tables DYNAMIC (int64 keys)");
ABSL_FLAG(std::string, init, "file",
          "gen-model: file = write every table's rows to weights.safetensors; random = tables "
          "get `init { kind: RANDOM seed: --seed }` and are generated at load (the file holds "
          "only the dense weights: full-size presets in seconds)");
ABSL_FLAG(std::string, bottom_mlp, "",
          "gen-model: bottom MLP widths in place of the preset's, comma-separated (the last is "
          "the embedding dim); empty = the preset's");
ABSL_FLAG(std::string, top_mlp, "",
          "gen-model: top MLP widths in place of the preset's, comma-separated (the last is 1); "
          "empty = the preset's");

namespace rankd::server {
namespace {

// "512,256,1" -> {512, 256, 1}; empty text -> {}. False (with a message
// naming `flag`) for an item that is not a whole number.
bool ParseWidths(const char* flag, const std::string& text, std::vector<int>* out) {
  out->clear();
  if (text.empty()) return true;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    int w = 0;
    if (!absl::SimpleAtoi(item, &w)) {
      std::cerr << "rankd gen-model: " << flag << ": expected comma-separated whole numbers, got \""
                << text.substr(0, 128) << "\"\n";
      return false;
    }
    out->push_back(w);
  }
  return true;
}

}  // namespace

int RunGenModel() {
  engine::GenerateOptions o;
  o.preset = absl::GetFlag(FLAGS_preset);
  o.scale = absl::GetFlag(FLAGS_scale);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.name = absl::GetFlag(FLAGS_name);
  o.num_tables = absl::GetFlag(FLAGS_num_tables);
  o.dynamic_tables = absl::GetFlag(FLAGS_dynamic_tables);
  if (!ParseWidths("--bottom_mlp", absl::GetFlag(FLAGS_bottom_mlp), &o.bottom_mlp) ||
      !ParseWidths("--top_mlp", absl::GetFlag(FLAGS_top_mlp), &o.top_mlp)) {
    return 2;
  }
  const std::string dtype = absl::AsciiStrToLower(absl::GetFlag(FLAGS_dtype));
  if (dtype == "fp32") {
    o.dtype = rankd::v1::FP32;
  } else if (dtype == "fp16") {
    o.dtype = rankd::v1::FP16;
  } else if (dtype == "bf16") {
    o.dtype = rankd::v1::BF16;
  } else {
    std::cerr << "rankd gen-model: --dtype: expected fp32, fp16 or bf16, got \""
              << dtype << "\"\n";
    return 2;
  }
  const std::string init = absl::AsciiStrToLower(absl::GetFlag(FLAGS_init));
  if (init == "file") {
    o.init = rankd::v1::FILE;
  } else if (init == "random") {
    o.init = rankd::v1::RANDOM;
  } else {
    std::cerr << "rankd gen-model: --init: expected file or random, got \"" << init << "\"\n";
    return 2;
  }
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) {
    std::cerr << "rankd gen-model: --out: required (the version directory to "
                 "write, e.g. models/mini/1)\n";
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = engine::GenerateModel(o, out);
  if (!s.ok()) {
    std::cerr << "rankd gen-model: " << s.message() << "\n";
    return 1;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << "rankd gen-model: wrote " << out << " (preset " << o.preset << ", scale "
            << o.scale << ", " << dtype << (o.init == rankd::v1::RANDOM ? ", init random" : "")
            << ") in " << secs << " s\n";
  return 0;
}

}  // namespace rankd::server
