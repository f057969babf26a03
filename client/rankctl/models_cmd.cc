// rankctl models: every model of the server (or one) with each version's
// state, labels, load and warm-up times, memory and failure reason.
#include <iostream>

#include "client/rankctl/commands.h"
#include "client/rankctl/model_table.h"

namespace rankd::rankctl {

int RunModels() {
  auto client = AdminClientFromFlags();
  if (!client.ok()) return ClientSetupFailed("models", client.status());
  auto list = (*client)->ListModels(ModelFlag());
  if (!list.ok()) {
    std::cerr << "rankctl models: " << DescribeAdminError(list.status()) << "\n";
    return ExitCodeFor(list.status());
  }
  if (JsonFlag()) {
    if (absl::Status printed = PrintJson(*list); !printed.ok()) {
      std::cerr << "rankctl models: " << printed.message() << "\n";
      return kExitFailed;
    }
    return kExitOk;
  }
  std::cout << ModelTable(list->models());
  return std::cout.flush() ? kExitOk : kExitFailed;
}

}  // namespace rankd::rankctl
