// ModelManager's private half: applying scans, deciding what to load and
// unload, and doing it.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "engine/model/host_memory.h"
#include "server/lifecycle/model_manager.h"
#include "server/lifecycle/serving_config.h"
#include "server/lifecycle/update_message.h"
#include "spdlog/spdlog.h"

namespace rankd::server {

void ModelManager::ApplyScan(const RepositoryScan& scan) {
  absl::MutexLock lock(&mu_);
  for (const auto& [name, disk] : scan) ApplyModelScan(name, &disk);
  for (auto& [name, slot] : models_) {
    if (scan.count(name) == 0) ApplyModelScan(name, nullptr);
  }
}

void ModelManager::ApplyModelScan(const std::string& name, const ModelOnDisk* disk) {
  ModelSlot& slot = models_[name];
  const absl::Time now = clock_->Now();
  for (auto& [version, v] : slot.versions) v.on_disk = false;
  if (disk == nullptr) {  // the model's directory is gone, serving.pbtxt with it
    ApplyServingConfig(name, ModelOnDisk(), &slot);
    return;
  }
  for (const auto& [version, files] : disk->versions) {
    VersionSlot& v = slot.versions.try_emplace(version, now).first->second;
    v.on_disk = true;
    v.directory = files.directory;
    v.fingerprint = files.fingerprint;
  }
  ApplyServingConfig(name, *disk, &slot);
}

void ModelManager::ApplyServingConfig(const std::string& name, const ModelOnDisk& disk,
                                      ModelSlot* slot) {
  if (disk.serving_config_fingerprint == slot->config_fingerprint) return;
  slot->config_fingerprint = disk.serving_config_fingerprint;
  if (!disk.has_serving_config) {
    slot->config = rankd::v1::ModelServingConfig();  // the file was removed: defaults
    slot->config_error.clear();
  } else if (!disk.serving_config_error.empty()) {
    // Logged once per change of the file; the last good config stays.
    slot->config_error = disk.serving_config_error;
    spdlog::error("model {}: {} (keeping the last good serving config: policy {})", name,
                  slot->config_error, PolicyString(slot->config.version_policy()));
  } else {
    slot->config = disk.serving_config;
    slot->config_error.clear();
    spdlog::info("model {}: serving config: policy {}, {} label(s)", name,
                 PolicyString(slot->config.version_policy()),
                 slot->config.version_labels_size());
  }
  RecomputeLabels(slot);
}

void ModelManager::RecomputeLabels(ModelSlot* slot) {
  std::map<std::string, int64_t> labels(slot->config.version_labels().begin(),
                                        slot->config.version_labels().end());
  for (auto it = slot->overrides.begin(); it != slot->overrides.end();) {
    auto in_file = labels.find(it->first);
    const int64_t file_version = in_file == labels.end() ? 0 : in_file->second;
    if (file_version != it->second.file_version) {
      it = slot->overrides.erase(it);  // the file changed this label since: it wins
      continue;
    }
    if (it->second.version == 0) {
      labels.erase(it->first);
    } else {
      labels[it->first] = it->second.version;
    }
    ++it;
  }
  slot->labels = std::move(labels);
}

void ModelManager::ForgetGone() {
  for (auto it = models_.begin(); it != models_.end();) {
    ModelSlot& slot = it->second;
    for (auto v = slot.versions.begin(); v != slot.versions.end();) {
      const VersionState s = v->second.record.state();
      const bool idle = s == rankd::v1::UNLOADED || s == rankd::v1::FAILED;
      v = (!v->second.on_disk && idle) ? slot.versions.erase(v) : std::next(v);
    }
    it = slot.versions.empty() && slot.config_fingerprint == 0 ? models_.erase(it)
                                                               : std::next(it);
  }
}

ModelManager::Plan ModelManager::MakePlan(const ModelSlot& slot,
                                          const std::set<int64_t>& force) const {
  std::set<int64_t> available;
  for (const auto& [version, v] : slot.versions) {
    if (!v.on_disk) continue;
    const bool forced = force.count(version) > 0;
    if (v.record.state() == rankd::v1::READY) {
      if (forced || v.held_fingerprint != v.fingerprint) available.insert(version);
      continue;
    }
    if (!forced && v.held_fingerprint == v.fingerprint) continue;
    if (v.record.MayLoad(v.fingerprint, forced)) available.insert(version);
  }
  std::set<int64_t> wanted;
  if (options_.mode == Mode::kNone) {
    wanted = available;
  } else if (options_.mode == Mode::kPoll || slot.follow_policy) {
    wanted = SelectVersions(slot.config.version_policy(), available);
  }
  for (int64_t v : slot.wanted) {
    if (available.count(v)) wanted.insert(v);
  }
  if (options_.mode != Mode::kNone) {
    // Labelled versions stay loaded (a stable label next to latest 1).
    for (const auto& [label, v] : slot.labels) {
      if (available.count(v) && (options_.mode == Mode::kPoll || !wanted.empty())) {
        wanted.insert(v);
      }
    }
  }
  for (int64_t v : force) {
    if (available.count(v)) wanted.insert(v);
  }
  Plan plan;
  for (auto it = wanted.rbegin(); it != wanted.rend(); ++it) {
    const VersionSlot& v = slot.versions.at(*it);
    if (v.record.state() != rankd::v1::READY || force.count(*it)) plan.load.push_back(*it);
  }
  for (const auto& [version, v] : slot.versions) {
    if (v.record.state() == rankd::v1::READY && wanted.count(version) == 0) {
      plan.unload.push_back(version);
    }
  }
  return plan;
}

void ModelManager::Reconcile(const std::string& name, const std::set<int64_t>& force) {
  std::set<int64_t> pending_force = force;
  // Each pass loads what the plan wants; a failed load changes the plan (the
  // failed version is out of it), so plan again. Bounded: every pass fails
  // at least one more version or ends.
  for (int pass = 0; pass < 64; ++pass) {
    Plan plan;
    {
      absl::ReaderMutexLock lock(&mu_);
      auto it = models_.find(name);
      if (it == models_.end()) return;
      plan = MakePlan(it->second, pending_force);
    }
    if (options_.transition == Transition::kResource && !plan.load.empty()) {
      for (int64_t v : plan.unload) UnloadVersion(name, v);
      plan.unload.clear();
    }
    bool failed = false;
    for (int64_t v : plan.load) {
      pending_force.erase(v);
      if (!LoadVersion(name, v)) {
        failed = true;
        break;
      }
    }
    if (failed) continue;
    for (int64_t v : plan.unload) UnloadVersion(name, v);
    return;
  }
}

std::string ModelManager::ResidentSummary() const {
  std::vector<std::string> parts;
  for (const auto& [name, slot] : models_) {
    for (const auto& [version, v] : slot.versions) {
      if (v.record.state() != rankd::v1::READY) continue;
      parts.push_back(absl::StrCat(name, " v", version, " (HBM ",
                                   engine::HumanBytes(static_cast<double>(v.device_bytes)),
                                   ", host ", engine::HumanBytes(static_cast<double>(v.host_bytes)),
                                   ")"));
    }
  }
  return parts.empty() ? "none" : absl::StrJoin(parts, ", ");
}

bool ModelManager::LoadVersion(const std::string& name, int64_t version) {
  std::string directory;
  uint64_t fingerprint = 0;
  bool reload = false;
  bool while_serving = false;
  {
    absl::MutexLock lock(&mu_);
    while_serving = !ServedModelsLocked().empty();
    VersionSlot& v = models_[name].versions.at(version);
    directory = v.directory;
    fingerprint = v.fingerprint;
    reload = v.record.state() == rankd::v1::READY;  // a forced reload keeps serving
    if (!reload) (void)v.record.StartLoading(clock_->Now());
  }
  NotifyStates(name);
  spdlog::info("model {} version {}: {} from {}", name, version, reload ? "reloading" : "loading",
               directory);
  {
    absl::MutexLock updates(&updates_mu_);
    ++journals_[name].loading;  // version-0 updates from now on are recorded for it
  }
  const absl::Time start = absl::Now();
  absl::StatusOr<LoadedVersion> loaded = loader_->Load(name, version, directory, while_serving);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  absl::Status outcome = loaded.status();
  std::shared_ptr<ServedVersion> served;
  LogReplay replay;
  if (loaded.ok()) {
    served = std::make_shared<ServedVersion>(
        name, version, std::shared_ptr<engine::ModelInstance>(std::move(loaded->instance)),
        std::move(loaded->live_tables));
    // The update log up to now, while updates go on (they are appended
    // after what this reads; the rest is read below, under the lock).
    if (update_logs_ != nullptr) outcome = ReplayUpdateLog(name, served.get(), &replay);
  }
  std::shared_ptr<ServedVersion> old, discarded;
  // Held from replaying the journal (or the log's last records) until the
  // version is published, so no update falls between the two.
  absl::ReleasableMutexLock updates(&updates_mu_);
  UpdateJournal& journal = journals_[name];
  if (outcome.ok()) {
    if (update_logs_ == nullptr) {
      ReplayJournal(name, journal, served.get());
    } else {
      outcome = ReplayUpdateLog(name, served.get(), &replay);
      if (outcome.ok()) LogReplayed(name, version, replay);
    }
  }
  if (outcome.ok() && listener_ != nullptr && served->live_tables() != nullptr) {
    // Replayed inserts and evictions changed the key counts since the load.
    for (const auto& d : served->live_tables()->DynamicTables()) {
      listener_->OnDynamicTableKeys(name, d.table, d.keys, d.max_keys);
    }
  }
  if (outcome.ok()) {
    if (listener_ != nullptr) listener_->OnVersionReady(name, version);
    absl::MutexLock lock(&mu_);
    VersionSlot& v = models_[name].versions.at(version);
    old = std::exchange(v.served, std::move(served));  // from here Find returns the new one
    if (!reload) (void)v.record.Ready(clock_->Now());
    v.load_seconds = loaded->load_seconds;
    v.warmup_seconds = loaded->warmup_seconds;
    v.device_bytes = loaded->device_bytes;
    v.host_bytes = loaded->host_bytes;
    v.held_fingerprint = 0;
  } else {
    discarded = std::move(served);  // loaded, but its update log could not be replayed
    std::string reason(outcome.message());
    if (loaded.ok()) reason = absl::StrCat("update log replay: ", reason);
    absl::MutexLock lock(&mu_);
    if (outcome.code() == absl::StatusCode::kResourceExhausted) {
      absl::StrAppend(&reason, "; resident versions: ", ResidentSummary());
    }
    spdlog::error("model {} version {} FAILED: {}", name, version, reason);
    VersionSlot& v = models_[name].versions.at(version);
    if (!reload) (void)v.record.Failed(clock_->Now(), reason, fingerprint);
  }
  if (--journal.loading == 0) journal.entries.clear();
  updates.Release();
  if (listener_ != nullptr) listener_->OnLoadFinished(name, version, outcome.ok(), seconds);
  NotifyStates(name);
  if (old != nullptr) DrainAndRelease(std::move(old));
  if (discarded != nullptr) DrainAndRelease(std::move(discarded));
  return outcome.ok();
}

void ModelManager::UnloadVersion(const std::string& name, int64_t version) {
  std::shared_ptr<ServedVersion> served;
  {
    absl::MutexLock lock(&mu_);
    VersionSlot& v = models_[name].versions.at(version);
    if (!v.record.StartDraining(clock_->Now()).ok()) return;
    served = std::move(v.served);  // from here Find no longer returns it
  }
  NotifyStates(name);
  spdlog::info("model {} version {}: draining", name, version);
  const absl::Time start = absl::Now();
  DrainAndRelease(std::move(served));
  {
    absl::MutexLock lock(&mu_);
    VersionSlot& v = models_[name].versions.at(version);
    (void)v.record.Unloaded(clock_->Now());
    v.device_bytes = v.host_bytes = 0;
  }
  if (listener_ != nullptr) listener_->OnVersionUnloaded(name, version);
  spdlog::info("model {} version {}: unloaded (drained and released in {:.3f} s)", name, version,
               absl::ToDoubleSeconds(absl::Now() - start));
  NotifyStates(name);
}

void ModelManager::ReplayJournal(const std::string& name, const UpdateJournal& journal,
                                 ServedVersion* served) {
  if (journal.entries.empty()) return;
  if (served->live_tables() == nullptr) {
    spdlog::warn("model {} version {}: {} embedding updates arrived while it loaded, but its "
                 "tables cannot change; they are not applied to it",
                 name, served->version(), journal.entries.size());
    return;
  }
  int failed = 0;
  absl::Status first;
  for (const UpdateFn& apply : journal.entries) {
    absl::Status s = apply(*served);
    if (!s.ok() && failed++ == 0) first = s;
  }
  spdlog::info("model {} version {}: applied {} embedding updates that arrived while it loaded",
               name, served->version(), journal.entries.size() - failed);
  if (failed > 0) {
    spdlog::warn("model {} version {}: {} updates that arrived while it loaded do not apply to "
                 "it (first: {})",
                 name, served->version(), failed, first.ToString());
  }
}

absl::Status ModelManager::ReplayUpdateLog(const std::string& name, ServedVersion* served,
                                           LogReplay* replay) {
  absl::StatusOr<engine::UpdateLog*> log = update_logs_->Get(name, /*create=*/false);
  if (!log.ok()) return log.status();
  if (*log == nullptr) return absl::OkStatus();  // no update was ever logged
  rankd::v1::EmbeddingUpdate message;
  absl::StatusOr<int64_t> end =
      (*log)->ForEach(replay->end, [&](const engine::UpdateLog::Record& r) -> absl::Status {
        if (r.target_version != 0 && r.target_version != served->version()) {
          ++replay->other_versions;
          return absl::OkStatus();
        }
        if (!message.ParseFromArray(r.payload.data(), static_cast<int>(r.payload.size())) ||
            message.model() != name) {
          return absl::DataLossError(absl::StrCat(
              (*log)->path(), ": record at offset ", r.offset,
              " is not an update message of model \"", name, "\""));
        }
        absl::StatusOr<engine::LiveTables::Applied> applied =
            ApplyUpdateMessage(message, name, served->version(), served->live_tables());
        if (!applied.ok()) {
          if (replay->failed++ == 0) {
            replay->first_failure = absl::Status(
                applied.status().code(),
                absl::StrCat("record at offset ", r.offset, ": ", applied.status().message()));
          }
        } else if (applied->duplicate) {
          ++replay->duplicates;
        } else {
          ++replay->applied;
        }
        return absl::OkStatus();
      });
  if (!end.ok()) return end.status();
  replay->end = *end;
  if (listener_ != nullptr) listener_->OnUpdateLogBytes(name, (*log)->size_bytes());
  return absl::OkStatus();
}

void ModelManager::LogReplayed(const std::string& name, int64_t version,
                               const LogReplay& replay) {
  if (replay.end == 0) return;  // the model has no log
  spdlog::info("model {} version {}: update log replayed: {} messages applied, {} skipped as "
               "already held (sequence <= the version's update position), {} for other "
               "versions",
               name, version, replay.applied, replay.duplicates, replay.other_versions);
  if (replay.failed > 0) {
    spdlog::warn("model {} version {}: {} logged updates do not apply to it (first: {})", name,
                 version, replay.failed, replay.first_failure.ToString());
  }
}

void ModelManager::DrainAndRelease(std::shared_ptr<ServedVersion> served) {
  if (served == nullptr) return;
  // Requests took their reference before the version left Find; each lets go
  // once answered. Nothing can take a new one: only this copy is reachable.
  const absl::Time deadline = absl::Now() + options_.drain_timeout;
  while (served.use_count() > 1 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  if (served.use_count() > 1) {
    spdlog::warn("model {} version {}: {} holder(s) left after {}; shutting down anyway",
                 served->name(), served->version(), served.use_count() - 1,
                 absl::FormatDuration(options_.drain_timeout));
  }
  if (served->instance_shared()) {
    // An adopted snapshot (or the version it came from) still serves this
    // instance and its tables: only this version's name goes.
    served.reset();
    return;
  }
  // Updates already applied stay; later ones are refused, not lost silently.
  if (served->live_tables() != nullptr) served->live_tables()->Close();
  served->instance().Shutdown();  // finishes what is still queued, joins threads
  served.reset();  // the last owner, when every holder let go: frees its memory
}

void ModelManager::NotifyStates(const std::string& name) {
  std::map<VersionState, int> counts = {{rankd::v1::LOADING, 0},
                                        {rankd::v1::READY, 0},
                                        {rankd::v1::DRAINING, 0},
                                        {rankd::v1::UNLOADED, 0},
                                        {rankd::v1::FAILED, 0}};
  bool serving = false, changed = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = models_.find(name);
    if (it == models_.end()) return;
    for (const auto& [version, v] : it->second.versions) ++counts[v.record.state()];
    serving = counts[rankd::v1::READY] > 0;
    changed = serving != it->second.serving;
    it->second.serving = serving;
  }
  if (listener_ == nullptr) return;
  listener_->OnVersionStates(name, counts);
  if (changed) listener_->OnModelServing(name, serving);
}

}  // namespace rankd::server
