#include "server/lifecycle/model_manager.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/model/error_text.h"
#include "server/lifecycle/serving_config.h"
#include "spdlog/spdlog.h"

namespace rankd::server {
namespace {

std::string Quoted(const std::vector<std::string>& names) {
  if (names.empty()) return "none";
  // Repository names, not the client's text, but there may be many.
  return engine::TruncateForError(absl::StrCat("\"", absl::StrJoin(names, "\", \""), "\""),
                                  4 * engine::kMaxQuotedBytes);
}

std::string VersionList(const std::vector<int64_t>& versions) {
  return versions.empty() ? "none" : absl::StrJoin(versions, ", ");
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelManager>> ModelManager::Create(const Options& options,
                                                                   VersionLoader* loader,
                                                                   Listener* listener,
                                                                   const engine::Clock* clock) {
  if (options.model_root.empty()) {
    return absl::InvalidArgumentError("--model_root: required (a directory of <name>/<version>/)");
  }
  if (loader == nullptr) return absl::InvalidArgumentError("ModelManager: loader is null");
  if (options.drain_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("drain_timeout: must be >= 0");
  }
  if (options.mode == Mode::kExplicit) {
    for (const std::string& name : options.load_models) {
      if (name.empty()) return absl::InvalidArgumentError("--load_model: an empty model name");
    }
  }
  std::unique_ptr<UpdateLogs> update_logs;
  if (!options.update_log_dir.empty()) {
    absl::StatusOr<std::unique_ptr<UpdateLogs>> logs = UpdateLogs::Create(options.update_log_dir);
    if (!logs.ok()) return logs.status();
    update_logs = *std::move(logs);
  }
  return std::unique_ptr<ModelManager>(
      new ModelManager(options, loader, listener, clock != nullptr ? clock : engine::RealClock::Get(),
                       std::move(update_logs)));
}

ModelManager::ModelManager(const Options& options, VersionLoader* loader, Listener* listener,
                           const engine::Clock* clock, std::unique_ptr<UpdateLogs> update_logs)
    : options_(options),
      loader_(loader),
      listener_(listener),
      clock_(clock),
      update_logs_(std::move(update_logs)) {}

ModelManager::~ModelManager() { Shutdown(); }

absl::Status ModelManager::Start() {
  absl::MutexLock control(&control_mu_);
  absl::StatusOr<RepositoryScan> scan = ScanRepository(options_.model_root);
  if (!scan.ok()) {
    return absl::Status(scan.status().code(),
                        absl::StrCat("--model_root: ", scan.status().message()));
  }
  std::vector<std::string> names;
  int versions_on_disk = 0;
  for (const auto& [name, disk] : *scan) {
    names.push_back(name);
    versions_on_disk += static_cast<int>(disk.versions.size());
  }
  if (options_.mode == Mode::kNone && versions_on_disk == 0) {
    return absl::NotFoundError(absl::StrCat(
        "--model_root: no model versions under ", options_.model_root,
        " (expected <name>/<version>/model.pbtxt; make one with `rankd gen-model`)"));
  }
  ApplyScan(*scan);
  std::vector<std::string> to_load = names;
  if (options_.mode == Mode::kExplicit) {
    const bool all = std::count(options_.load_models.begin(), options_.load_models.end(), "*") > 0;
    if (!all) to_load = options_.load_models;
    absl::MutexLock lock(&mu_);
    for (const std::string& name : to_load) {
      if (scan->count(name) == 0) {
        return absl::NotFoundError(absl::StrCat("--load_model: no model \"",
                                                engine::TruncateForError(name), "\" under ",
                                                options_.model_root, "; models there: ",
                                                Quoted(names)));
      }
      models_[name].follow_policy = true;
    }
  }
  for (const std::string& name : to_load) Reconcile(name, {});
  for (const std::string& name : names) NotifyStates(name);
  if (options_.mode != Mode::kNone && !options_.exit_on_load_error) return absl::OkStatus();
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [name, slot] : models_) {
    for (const auto& [version, v] : slot.versions) {
      if (v.record.state() == rankd::v1::FAILED) {
        return absl::FailedPreconditionError(
            absl::StrCat("model ", name, " version ", version, ": ", v.record.reason()));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ModelManager::Poll() {
  absl::MutexLock control(&control_mu_);
  if (shut_down_) return absl::OkStatus();
  absl::StatusOr<RepositoryScan> scan = ScanRepository(options_.model_root);
  if (!scan.ok()) {
    // Once per distinct error: a root that stays missing does not flood the log.
    if (last_scan_error_ != scan.status().message()) {
      last_scan_error_ = std::string(scan.status().message());
      spdlog::error("repository poll: {} (serving versions keep serving)", last_scan_error_);
    }
    return scan.status();
  }
  last_scan_error_.clear();
  ApplyScan(*scan);
  std::vector<std::string> names;
  {
    absl::ReaderMutexLock lock(&mu_);
    for (const auto& [name, slot] : models_) names.push_back(name);
  }
  for (const std::string& name : names) Reconcile(name, {});
  {
    absl::MutexLock lock(&mu_);
    ForgetGone();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<ServedVersion>> ModelManager::Find(const std::string& model,
                                                                  int64_t version,
                                                                  const std::string& label) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = models_.find(model);
  if (it == models_.end() || it->second.versions.empty()) {
    return absl::NotFoundError(absl::StrCat("model: \"", engine::TruncateForError(model),
                                            "\" is not served; served models: ",
                                            Quoted(ServedModelsLocked())));
  }
  const ModelSlot& slot = it->second;
  auto ready = [&slot](int64_t v) -> const VersionSlot* {
    auto vs = slot.versions.find(v);
    return vs != slot.versions.end() && vs->second.served != nullptr ? &vs->second : nullptr;
  };
  std::vector<int64_t> ready_versions;
  for (const auto& [v, vs] : slot.versions) {
    if (vs.served != nullptr) ready_versions.push_back(v);
  }
  if (version > 0) {
    if (const VersionSlot* vs = ready(version)) return vs->served;
    auto vs = slot.versions.find(version);
    return absl::NotFoundError(absl::StrCat(
        "version: model \"", engine::TruncateForError(model), "\" has no ready version ", version,
        vs == slot.versions.end() ? "" : absl::StrCat(" (it is ", VersionStateName(vs->second.record.state()), ")"),
        "; ready versions: ", VersionList(ready_versions)));
  }
  if (!label.empty()) {
    // A label that could never exist (too long, odd characters) is the
    // caller's mistake, and is not echoed back whole.
    if (absl::Status s = CheckLabelName(label, "version_label"); !s.ok()) return s;
    auto l = slot.labels.find(label);
    if (l == slot.labels.end()) {
      std::vector<std::string> labels;
      for (const auto& [name, v] : slot.labels) labels.push_back(absl::StrCat(name, "=", v));
      return absl::NotFoundError(absl::StrCat("version_label: model \"",
                                              engine::TruncateForError(model), "\" has no label \"",
                                              engine::TruncateForError(label), "\"; labels: ",
                                              labels.empty() ? "none" : absl::StrJoin(labels, ", ")));
    }
    if (const VersionSlot* vs = ready(l->second)) return vs->served;
    auto vs = slot.versions.find(l->second);
    return absl::UnavailableError(absl::StrCat(
        "version_label: \"", engine::TruncateForError(label), "\" of model \"",
        engine::TruncateForError(model), "\" points at version ", l->second,
        ", which is ", vs == slot.versions.end() ? "not in the repository"
                                                  : VersionStateName(vs->second.record.state()),
        "; ready versions: ", VersionList(ready_versions)));
  }
  if (!ready_versions.empty()) return slot.versions.at(ready_versions.back()).served;
  std::vector<std::string> states;
  for (const auto& [v, vs] : slot.versions) {
    states.push_back(absl::StrCat(v, " ", VersionStateName(vs.record.state())));
  }
  return absl::UnavailableError(absl::StrCat("model: \"", engine::TruncateForError(model),
                                             "\" has no ready version (",
                                             absl::StrJoin(states, ", "), ")"));
}

std::map<std::string, int64_t> ModelManager::Labels(const std::string& model) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = models_.find(model);
  return it == models_.end() ? std::map<std::string, int64_t>() : it->second.labels;
}

std::vector<int64_t> ModelManager::ReadyVersions(const std::string& model) const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<int64_t> out;
  auto it = models_.find(model);
  if (it == models_.end()) return out;
  for (const auto& [v, vs] : it->second.versions) {
    if (vs.served != nullptr) out.push_back(v);
  }
  return out;
}

std::vector<std::string> ModelManager::ServedModelsLocked() const {
  std::vector<std::string> out;
  for (const auto& [name, slot] : models_) {
    for (const auto& [v, vs] : slot.versions) {
      if (vs.served != nullptr) {
        out.push_back(name);
        break;
      }
    }
  }
  return out;
}

std::vector<std::string> ModelManager::ServedModels() const {
  absl::ReaderMutexLock lock(&mu_);
  return ServedModelsLocked();
}

rankd::v1::ModelStatus ModelManager::StatusOf(const std::string& name,
                                              const ModelSlot& slot) const {
  rankd::v1::ModelStatus out;
  out.set_name(name);
  out.set_policy(options_.mode == Mode::kNone ? "all (--model_control none)"
                                              : PolicyString(slot.config.version_policy()));
  out.set_config_error(slot.config_error);
  for (const auto& [label, v] : slot.labels) (*out.mutable_labels())[label] = v;
  for (const auto& [version, v] : slot.versions) {
    rankd::v1::VersionStatus* s = out.add_versions();
    s->set_version(version);
    s->set_state(v.record.state());
    s->set_reason(v.record.reason());
    for (const auto& [label, lv] : slot.labels) {
      if (lv == version) s->add_labels(label);
    }
    s->set_load_seconds(v.load_seconds);
    s->set_warmup_seconds(v.warmup_seconds);
    s->set_device_bytes(v.device_bytes);
    s->set_host_bytes(v.host_bytes);
    s->set_directory(v.directory);
    s->set_state_since_unix_ms(absl::ToUnixMillis(v.record.since()));
    s->set_snapshot_of(v.snapshot_of);
    if (v.served != nullptr && v.served->live_tables() != nullptr) {
      for (const engine::ProducerPosition& p : v.served->live_tables()->Positions()) {
        rankd::v1::ProducerPosition* out_p = s->add_update_positions();
        out_p->set_producer_id(p.producer_id);
        out_p->set_table(p.table);
        out_p->set_last_sequence(p.last_sequence);
        out_p->set_last_timestamp_unix_us(p.last_timestamp_unix_us);
      }
      for (const auto& d : v.served->live_tables()->DynamicTables()) {
        rankd::v1::DynamicTableStatus* out_d = s->add_dynamic_tables();
        out_d->set_table(d.table);
        out_d->set_keys(d.keys);
        out_d->set_max_keys(d.max_keys);
        out_d->set_evictions(d.evictions);
      }
    }
  }
  return out;
}

absl::StatusOr<rankd::v1::ListModelsResponse> ModelManager::List(const std::string& model) const {
  absl::ReaderMutexLock lock(&mu_);
  rankd::v1::ListModelsResponse out;
  for (const auto& [name, slot] : models_) {
    if (model.empty() || model == name) *out.add_models() = StatusOf(name, slot);
  }
  if (!model.empty() && out.models().empty()) return UnknownModel(model);
  return out;
}

absl::StatusOr<rankd::v1::ModelStatus> ModelManager::StatusOrNotFound(
    const std::string& name) const {
  absl::StatusOr<rankd::v1::ListModelsResponse> list = List(name);
  if (!list.ok()) return list.status();
  return list->models(0);
}

void ModelManager::Shutdown() {
  absl::MutexLock control(&control_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  std::vector<std::shared_ptr<ServedVersion>> served;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [name, slot] : models_) {
      for (auto& [version, v] : slot.versions) {
        if (v.served == nullptr) continue;
        (void)v.record.StartDraining(clock_->Now());
        served.push_back(std::move(v.served));
      }
    }
  }
  // Every instance stops admitting and finishes its queue (in parallel would
  // be faster; a stopping server has the time).
  for (auto& s : served) s->instance().Shutdown();
  absl::MutexLock lock(&mu_);
  for (auto& [name, slot] : models_) {
    for (auto& [version, v] : slot.versions) {
      if (v.record.state() == rankd::v1::DRAINING) (void)v.record.Unloaded(clock_->Now());
    }
  }
}

}  // namespace rankd::server
