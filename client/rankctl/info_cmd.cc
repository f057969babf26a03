// rankctl info: prints a served model's ModelInfo as JSON.
#include <cstdint>
#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/rankctl/commands.h"
#include "rankd/v1/ranking.pb.h"

namespace rankd::rankctl {

int RunInfo() {
  rankd::v1::GetModelInfoRequest request;
  request.set_model(ModelFlag());
  request.set_version(VersionFlag().value_or(0));
  request.set_version_label(VersionLabelFlag());
  if (request.model().empty()) {
    return UsageError("info", "--model: required (a served model's name)");
  }
  if (request.version() < 0) {
    return UsageError("info", absl::StrCat("--version: must be >= 0, got ", request.version()));
  }
  if (request.version() > 0 && !request.version_label().empty()) {
    return UsageError("info", "--version_label: give --version or --version_label, not both");
  }
  auto client = ClientFromFlags();
  if (!client.ok()) return ClientSetupFailed("info", client.status());
  auto info = (*client)->GetModelInfo(request);
  if (!info.ok()) return CallFailed("info", info.status());
  // A human reads this: PrintJson shows false/0 fields (e.g. request_level) too.
  if (absl::Status printed = PrintJson(*info); !printed.ok()) {
    std::cerr << "rankctl info: " << printed.message() << "\n";
    return kExitFailed;
  }
  return kExitOk;
}

}  // namespace rankd::rankctl
