// rankctl snapshot: asks the server to write a READY version's live tables
// (with every embedding update applied) and dense weights as a new version
// directory, which it then serves in place. One server (replica) per call.
#include <cstdint>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/rankctl/commands.h"
#include "client/rankctl/model_table.h"

ABSL_FLAG(int64_t, new_version, 0,
          "snapshot: the version number to write (default 0 = one above the highest in the "
          "repository)");

namespace rankd::rankctl {

int RunSnapshot() {
  const std::string model = ModelFlag();
  const int64_t version = VersionFlag().value_or(0);
  const int64_t new_version = absl::GetFlag(FLAGS_new_version);
  if (model.empty()) return UsageError("snapshot", "--model: required (the model to snapshot)");
  if (version < 0) {
    return UsageError("snapshot", absl::StrCat("--version: must be >= 0, got ", version));
  }
  if (new_version < 0) {
    return UsageError("snapshot", absl::StrCat("--new_version: must be >= 0, got ", new_version));
  }
  auto client = AdminClientFromFlags();
  if (!client.ok()) return ClientSetupFailed("snapshot", client.status());
  auto snapshot = (*client)->SaveSnapshot(model, version, new_version);
  if (!snapshot.ok()) return AdminCallFailed("snapshot", snapshot.status());
  int64_t source = version;
  for (const auto& v : snapshot->model().versions()) {
    if (v.version() == snapshot->version() && v.snapshot_of() != 0) source = v.snapshot_of();
  }
  const std::string text = absl::StrCat(
      absl::StrFormat("%s version %s -> version %d: %s, %s (%d bytes) in %.2f s\n", model,
                      source == 0 ? std::string("newest") : absl::StrCat(source),
                      snapshot->version(), snapshot->directory(), HumanBytes(snapshot->bytes()),
                      snapshot->bytes(), snapshot->seconds()),
      ModelTable(snapshot->model()));
  return PrintAdminResult("snapshot", *snapshot, text);
}

}  // namespace rankd::rankctl
