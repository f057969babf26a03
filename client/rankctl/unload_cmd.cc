// rankctl unload: drains and unloads a model's versions (all of them without
// --versions) through the admin API; prints the model's versions.
#include <string>

#include "client/rankctl/commands.h"

namespace rankd::rankctl {

int RunUnload() {
  const std::string model = ModelFlag();
  if (model.empty()) return UsageError("unload", "--model: required (a model rankd knows of)");
  auto versions = VersionsFromFlags();
  if (!versions.ok()) return UsageError("unload", versions.status().message());
  auto client = AdminClientFromFlags();
  if (!client.ok()) return ClientSetupFailed("unload", client.status());
  auto unloaded = (*client)->UnloadModel(model, *versions);
  if (!unloaded.ok()) return AdminCallFailed("unload", unloaded.status());
  return PrintModelResult("unload", *unloaded, unloaded->model());
}

}  // namespace rankd::rankctl
