// rankctl models: every model of the server (or one) with each version's
// state, labels, load and warm-up times, memory and failure reason.
#include "client/rankctl/commands.h"
#include "client/rankctl/model_table.h"

namespace rankd::rankctl {

int RunModels() {
  auto client = AdminClientFromFlags();
  if (!client.ok()) return ClientSetupFailed("models", client.status());
  auto list = (*client)->ListModels(ModelFlag());
  if (!list.ok()) return AdminCallFailed("models", list.status());
  return PrintAdminResult("models", *list, ModelTable(list->models()));
}

}  // namespace rankd::rankctl
