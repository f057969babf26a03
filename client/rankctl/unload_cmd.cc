// rankctl unload: drains and unloads a model's versions (all of them without
// --versions) through the admin API; prints the model's versions.
#include <iostream>
#include <string>

#include "client/rankctl/commands.h"

namespace rankd::rankctl {

int RunUnload() {
  const std::string model = ModelFlag();
  if (model.empty()) {
    std::cerr << "rankctl unload: --model: required (a model rankd knows of)\n";
    return kExitUsage;
  }
  auto versions = VersionsFromFlags();
  if (!versions.ok()) {
    std::cerr << "rankctl unload: " << versions.status().message() << "\n";
    return kExitUsage;
  }
  auto client = AdminClientFromFlags();
  if (!client.ok()) return ClientSetupFailed("unload", client.status());
  auto unloaded = (*client)->UnloadModel(model, *versions);
  if (!unloaded.ok()) {
    std::cerr << "rankctl unload: " << DescribeAdminError(unloaded.status()) << "\n";
    return ExitCodeFor(unloaded.status());
  }
  return PrintModelResult("unload", *unloaded, unloaded->model());
}

}  // namespace rankd::rankctl
