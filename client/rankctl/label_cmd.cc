// rankctl label: points a version label of a model at a READY version, or
// removes it (--version 0), through the admin API; prints the model's
// versions with their labels.
#include <cstdint>
#include <iostream>
#include <optional>
#include <string>

#include "absl/flags/flag.h"
#include "client/rankctl/commands.h"

ABSL_FLAG(std::string, label, "", "label: the version label to set or remove (e.g. stable)");

namespace rankd::rankctl {

int RunLabel() {
  const std::string model = ModelFlag();
  const std::string label = absl::GetFlag(FLAGS_label);
  const std::optional<int64_t> version = VersionFlag();
  if (model.empty()) {
    std::cerr << "rankctl label: --model: required (a model rankd knows of)\n";
    return kExitUsage;
  }
  if (label.empty()) {
    std::cerr << "rankctl label: --label: required (e.g. --label=stable)\n";
    return kExitUsage;
  }
  // Required, so that a forgotten --version never removes a label.
  if (!version.has_value()) {
    std::cerr << "rankctl label: --version: required (a READY version; 0 removes the label)\n";
    return kExitUsage;
  }
  if (*version < 0) {
    std::cerr << "rankctl label: --version: must be >= 0, got " << *version << "\n";
    return kExitUsage;
  }
  auto client = AdminClientFromFlags();
  if (!client.ok()) return ClientSetupFailed("label", client.status());
  auto labelled = (*client)->SetVersionLabel(model, label, *version);
  if (!labelled.ok()) {
    std::cerr << "rankctl label: " << DescribeAdminError(labelled.status()) << "\n";
    return ExitCodeFor(labelled.status());
  }
  return PrintModelResult("label", *labelled, labelled->model());
}

}  // namespace rankd::rankctl
