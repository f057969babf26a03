// rankctl label: points a version label of a model at a READY version, or
// removes it (--version 0), through the admin API; prints the model's
// versions with their labels.
#include <cstdint>
#include <optional>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/rankctl/commands.h"

ABSL_FLAG(std::string, label, "", "label: the version label to set or remove (e.g. stable)");

namespace rankd::rankctl {

int RunLabel() {
  const std::string model = ModelFlag();
  const std::string label = absl::GetFlag(FLAGS_label);
  const std::optional<int64_t> version = VersionFlag();
  if (model.empty()) return UsageError("label", "--model: required (a model rankd knows of)");
  if (label.empty()) return UsageError("label", "--label: required (e.g. --label=stable)");
  // Required, so that a forgotten --version never removes a label.
  if (!version.has_value()) {
    return UsageError("label", "--version: required (a READY version; 0 removes the label)");
  }
  if (*version < 0) {
    return UsageError("label", absl::StrCat("--version: must be >= 0, got ", *version));
  }
  auto client = AdminClientFromFlags();
  if (!client.ok()) return ClientSetupFailed("label", client.status());
  auto labelled = (*client)->SetVersionLabel(model, label, *version);
  if (!labelled.ok()) return AdminCallFailed("label", labelled.status());
  return PrintModelResult("label", *labelled, labelled->model());
}

}  // namespace rankd::rankctl
