// rankctl info: prints a served model's ModelInfo as JSON.
#include <cstdint>
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "client/rankctl/commands.h"
#include "google/protobuf/util/json_util.h"

ABSL_FLAG(std::string, model, "", "info: the model's name");
// Not `--version`: abseil reserves that name for its own usage flag (a flag of
// that name would clash with libabsl's FLAGS_version). rankctl_main rewrites
// `info --version V` into `--model_version V`.
ABSL_FLAG(int64_t, model_version, 0, "info: the model version (also --version); 0 = newest ready");

namespace rankd::rankctl {

int RunInfo() {
  const std::string model = absl::GetFlag(FLAGS_model);
  const int64_t version = absl::GetFlag(FLAGS_model_version);
  if (model.empty()) {
    std::cerr << "rankctl info: --model: required (a served model's name)\n";
    return kExitUsage;
  }
  if (version < 0) {
    std::cerr << "rankctl info: --version: must be >= 0, got " << version << "\n";
    return kExitUsage;
  }
  auto client = ClientFromFlags();
  if (!client.ok()) {
    std::cerr << "rankctl info: " << client.status().message() << "\n";
    return absl::IsInvalidArgument(client.status()) ? kExitUsage : ExitCodeFor(client.status());
  }
  auto info = (*client)->GetModelInfo(model, version);
  if (!info.ok()) {
    std::cerr << "rankctl info: " << DescribeError(info.status()) << "\n";
    return ExitCodeFor(info.status());
  }
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  // A human reads this: show false/0 fields (e.g. request_level) too.
  options.always_print_primitive_fields = true;
  std::string json;
  const auto printed = google::protobuf::util::MessageToJsonString(*info, &json, options);
  if (!printed.ok()) {
    std::cerr << "rankctl info: cannot print ModelInfo as JSON: " << printed.message() << "\n";
    return kExitFailed;
  }
  std::cout << json;
  if (json.empty() || json.back() != '\n') std::cout << "\n";
  return std::cout.flush() ? kExitOk : kExitFailed;
}

}  // namespace rankd::rankctl
