// ModelManager's admin operations (rankd.v1.ModelControl): load, unload, label.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/model/error_text.h"
#include "server/lifecycle/model_manager.h"
#include "server/lifecycle/serving_config.h"

namespace rankd::server {

absl::Status ModelManager::UnknownModel(const std::string& name) const {
  std::vector<std::string> names;
  for (const auto& [n, slot] : models_) names.push_back(n);
  return absl::NotFoundError(absl::StrCat(
      "model: \"", engine::TruncateForError(name), "\" is not known; models: ",
      names.empty() ? "none"
                    : engine::TruncateForError(absl::StrJoin(names, ", "), 4 * engine::kMaxQuotedBytes)));
}

absl::Status ModelManager::ScanOneModel(const std::string& name) {
  absl::StatusOr<RepositoryScan> scan = ScanRepository(options_.model_root);
  if (!scan.ok()) {
    return absl::Status(scan.status().code(),
                        absl::StrCat("--model_root: ", scan.status().message()));
  }
  auto it = scan->find(name);
  absl::MutexLock lock(&mu_);
  if (it == scan->end()) {
    std::vector<std::string> names;
    for (const auto& [n, disk] : *scan) names.push_back(n);
    if (models_.count(name) > 0) ApplyModelScan(name, nullptr);
    return absl::NotFoundError(absl::StrCat(
        "model: \"", engine::TruncateForError(name), "\" is not in the repository ",
        options_.model_root, "; models there: ",
        names.empty() ? "none"
                      : engine::TruncateForError(absl::StrJoin(names, ", "), 4 * engine::kMaxQuotedBytes)));
  }
  ApplyModelScan(name, &it->second);
  return absl::OkStatus();
}

absl::Status ModelManager::CheckVersionsChangeable(absl::string_view rpc) const {
  if (shut_down_) return absl::UnavailableError("the server is shutting down");
  if (options_.mode == Mode::kNone) {
    return absl::FailedPreconditionError(absl::StrCat(
        rpc, ": the server runs with --model_control none (models are fixed at start)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<rankd::v1::ModelStatus> ModelManager::Load(const std::string& model,
                                                          const std::vector<int64_t>& versions) {
  absl::MutexLock control(&control_mu_);
  if (absl::Status s = CheckVersionsChangeable("LoadModel"); !s.ok()) return s;
  if (absl::Status s = ScanOneModel(model); !s.ok()) return s;
  {
    absl::MutexLock lock(&mu_);
    ModelSlot& slot = models_[model];
    std::vector<int64_t> on_disk;
    for (const auto& [v, vs] : slot.versions) {
      if (vs.on_disk) on_disk.push_back(v);
    }
    for (int64_t v : versions) {
      if (std::find(on_disk.begin(), on_disk.end(), v) == on_disk.end()) {
        return absl::NotFoundError(absl::StrCat("versions: model \"", engine::TruncateForError(model), "\" has no version ",
                                                v, " in the repository; versions there: ",
                                                on_disk.empty() ? "none" : absl::StrJoin(on_disk, ", ")));
      }
    }
    if (options_.mode == Mode::kExplicit) {
      if (versions.empty()) slot.follow_policy = true;
      slot.wanted.insert(versions.begin(), versions.end());
    }
    // An operator's load lifts an earlier unload of the versions it names (of
    // every version when it names none).
    for (auto& [v, vs] : slot.versions) {
      if (versions.empty() || std::count(versions.begin(), versions.end(), v)) vs.held_fingerprint = 0;
    }
  }
  std::set<int64_t> force(versions.begin(), versions.end());
  if (versions.empty()) {
    // Retry FAILED versions the policy wants, even with unchanged files.
    absl::ReaderMutexLock lock(&mu_);
    for (const auto& [v, vs] : models_[model].versions) {
      if (vs.record.state() == rankd::v1::FAILED && vs.on_disk) force.insert(v);
    }
  }
  Reconcile(model, force);
  absl::ReaderMutexLock lock(&mu_);
  const ModelSlot& slot = models_.at(model);
  for (int64_t v : versions) {
    const VersionSlot& vs = slot.versions.at(v);
    if (vs.record.state() == rankd::v1::FAILED) {
      return absl::FailedPreconditionError(absl::StrCat("model \"", engine::TruncateForError(model), "\" version ", v,
                                                        " FAILED: ", vs.record.reason()));
    }
  }
  return StatusOf(model, slot);
}

absl::StatusOr<rankd::v1::ModelStatus> ModelManager::Unload(const std::string& model,
                                                            const std::vector<int64_t>& versions) {
  absl::MutexLock control(&control_mu_);
  if (absl::Status s = CheckVersionsChangeable("UnloadModel"); !s.ok()) return s;
  {
    absl::MutexLock lock(&mu_);
    auto it = models_.find(model);
    if (it == models_.end()) {
      return UnknownModel(model);
    }
    ModelSlot& slot = it->second;
    std::vector<int64_t> known;
    for (const auto& [v, vs] : slot.versions) known.push_back(v);
    for (int64_t v : versions) {
      if (slot.versions.count(v) == 0) {
        return absl::NotFoundError(absl::StrCat("versions: model \"", engine::TruncateForError(model), "\" has no version ",
                                                v, "; versions: ", absl::StrJoin(known, ", ")));
      }
    }
    if (options_.mode == Mode::kExplicit) {
      if (versions.empty()) {
        slot.follow_policy = false;
        slot.wanted.clear();
      }
      for (int64_t v : versions) slot.wanted.erase(v);
    }
    // Held (kPoll, and kExplicit when the policy is followed): not loaded
    // again while its files stay the same.
    for (auto& [v, vs] : slot.versions) {
      if (versions.empty() || std::count(versions.begin(), versions.end(), v)) {
        vs.held_fingerprint = vs.fingerprint;
      }
    }
  }
  Reconcile(model, {});
  return StatusOrNotFound(model);
}

absl::StatusOr<rankd::v1::ModelStatus> ModelManager::SetLabel(const std::string& model,
                                                              const std::string& label,
                                                              int64_t version) {
  if (absl::Status s = CheckLabelName(label, "label"); !s.ok()) return s;
  if (version < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("version: must be > 0 (or 0 to remove the label), got ", version));
  }
  absl::MutexLock control(&control_mu_);
  absl::MutexLock lock(&mu_);
  auto it = models_.find(model);
  if (it == models_.end()) {
    return UnknownModel(model);
  }
  ModelSlot& slot = it->second;
  if (version > 0) {
    auto v = slot.versions.find(version);
    if (v == slot.versions.end() || v->second.served == nullptr) {
      std::vector<int64_t> ready;
      for (const auto& [n, vs] : slot.versions) {
        if (vs.served != nullptr) ready.push_back(n);
      }
      return absl::FailedPreconditionError(absl::StrCat(
          "version: version ", version, " of model \"", engine::TruncateForError(model), "\" is ",
          v == slot.versions.end() ? "unknown" : VersionStateName(v->second.record.state()),
          ", not READY; ready versions: ", ready.empty() ? "none" : absl::StrJoin(ready, ", ")));
    }
  }
  auto in_file = slot.config.version_labels().find(label);
  slot.overrides[label] = LabelOverride{
      version, in_file == slot.config.version_labels().end() ? 0 : in_file->second};
  RecomputeLabels(&slot);
  return StatusOf(model, slot);
}

}  // namespace rankd::server
