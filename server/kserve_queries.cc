#include "server/kserve_queries.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "server/kserve_conversion.h"

namespace rankd::server {

bool KServeServerReady(const ModelManager& models, const RequestBudget& budget) {
  return !budget.closed() && !models.ServedModels().empty();
}

absl::StatusOr<bool> KServeModelReady(const ModelManager& models, const RequestBudget& budget,
                                      const std::string& name, const std::string& version) {
  absl::StatusOr<int64_t> number = ParseKServeVersion(version);
  if (!number.ok()) return number.status();
  auto found = models.Find(name, *number, "");
  // UNAVAILABLE: the model exists but has no version taking traffic.
  if (!found.ok() && found.status().code() != absl::StatusCode::kUnavailable) {
    return found.status();
  }
  return found.ok() && !budget.closed();
}

absl::Status KServeModelMetadata(const ModelManager& models, const std::string& platform,
                                 const std::string& name, const std::string& version,
                                 inference::ModelMetadataResponse* out) {
  absl::StatusOr<int64_t> number = ParseKServeVersion(version);
  if (!number.ok()) return number.status();
  auto found = models.Find(name, *number, "");
  if (!found.ok()) return found.status();
  const engine::Model& m = (*found)->instance().model();
  out->set_name(m.name);
  for (int64_t v : models.ReadyVersions(m.name)) out->add_versions(absl::StrCat(v));
  out->set_platform(platform);
  KServeModelInputs(m, out);
  (*out->mutable_properties())["version"] = absl::StrCat((*found)->version());
  return absl::OkStatus();
}

}  // namespace rankd::server
