// rankctl load: loads (or reloads) a model's versions through the admin API
// and waits until each is READY or FAILED; prints the model's versions and
// exits 1 when a version failed to load (stderr: which and why).
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "client/rankctl/commands.h"

namespace rankd::rankctl {
namespace {

// The versions this load failed, as "version N: why" lines. With `asked`
// versions: each of them that is not READY now. Without: the FAILED versions
// that entered that state since `start_unix_ms` (a version that failed in an
// earlier load stays listed as FAILED; it is not this load's failure). The
// server's clock is compared with ours: the same clock on the default,
// loopback admin listener.
std::vector<std::string> Failures(const rankd::v1::ModelStatus& model,
                                  const std::vector<int64_t>& asked, int64_t start_unix_ms) {
  std::vector<std::string> failures;
  for (const auto& v : model.versions()) {
    const bool failure =
        asked.empty() ? v.state() == rankd::v1::FAILED && v.state_since_unix_ms() >= start_unix_ms
                      : std::find(asked.begin(), asked.end(), v.version()) != asked.end() &&
                            v.state() != rankd::v1::READY;
    if (!failure) continue;
    std::string line =
        "version " + std::to_string(v.version()) + ": " + rankd::v1::VersionState_Name(v.state());
    if (!v.reason().empty()) line += ": " + v.reason();
    failures.push_back(std::move(line));
  }
  for (int64_t version : asked) {
    const bool listed = std::any_of(model.versions().begin(), model.versions().end(),
                                    [&](const auto& v) { return v.version() == version; });
    if (!listed) failures.push_back("version " + std::to_string(version) + ": not listed");
  }
  return failures;
}

}  // namespace

int RunLoad() {
  const std::string model = ModelFlag();
  if (model.empty()) {
    return UsageError("load", "--model: required (a model in rankd's model repository)");
  }
  auto versions = VersionsFromFlags();
  if (!versions.ok()) return UsageError("load", versions.status().message());
  auto client = AdminClientFromFlags();
  if (!client.ok()) return ClientSetupFailed("load", client.status());
  const int64_t start_unix_ms = absl::ToUnixMillis(absl::Now());
  auto loaded = (*client)->LoadModel(model, *versions);
  if (!loaded.ok()) return AdminCallFailed("load", loaded.status());
  const int printed = PrintModelResult("load", *loaded, loaded->model());
  const std::vector<std::string> failures = Failures(loaded->model(), *versions, start_unix_ms);
  for (const std::string& failure : failures) {
    std::cerr << "rankctl load: " << model << " " << failure << "\n";
  }
  return failures.empty() ? printed : kExitFailed;
}

}  // namespace rankd::rankctl
