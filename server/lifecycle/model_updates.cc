// ModelManager::ApplyUpdate: routing embedding update messages to versions
// (model_manager.h).
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/lifecycle/model_manager.h"

namespace rankd::server {

absl::Status ModelManager::ApplyUpdate(const std::string& model, int64_t version,
                                       const UpdateFn& apply) {
  absl::MutexLock updates(&updates_mu_);
  std::vector<std::shared_ptr<ServedVersion>> targets;
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = models_.find(model);
    if (it == models_.end()) return UnknownModel(model);
    const ModelSlot& slot = it->second;
    if (version > 0) {
      auto v = slot.versions.find(version);
      if (v == slot.versions.end()) {
        std::vector<int64_t> known;
        for (const auto& [n, vs] : slot.versions) known.push_back(n);
        return absl::NotFoundError(absl::StrCat("version: model \"", model, "\" has no version ",
                                                version, "; versions: ",
                                                absl::StrJoin(known, ", ")));
      }
      const VersionState state = v->second.record.state();
      if (state == rankd::v1::LOADING) {
        return absl::UnavailableError(absl::StrCat("version: model \"", model, "\" version ",
                                                   version, " is loading; retry when READY"));
      }
      if (state != rankd::v1::READY || v->second.served == nullptr) {
        return absl::FailedPreconditionError(
            absl::StrCat("version: model \"", model, "\" version ", version, " is ",
                         VersionStateName(state), " (updates go to READY versions)"));
      }
      targets.push_back(v->second.served);
    } else {
      for (const auto& [n, vs] : slot.versions) {
        if (vs.record.state() == rankd::v1::READY && vs.served != nullptr) {
          targets.push_back(vs.served);
        }
      }
    }
  }
  const bool record = version == 0 && journals_[model].loading > 0;
  if (targets.empty() && !record) {
    return absl::FailedPreconditionError(
        absl::StrCat("model \"", model, "\" has no READY version to update"));
  }
  for (const std::shared_ptr<ServedVersion>& target : targets) {
    absl::Status s = apply(*target);
    if (!s.ok()) return s;
  }
  if (record) journals_[model].entries.push_back(apply);
  return absl::OkStatus();
}

}  // namespace rankd::server
