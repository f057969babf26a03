// ModelManager::ApplyUpdate: routing embedding update messages to versions
// (model_manager.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "engine/model/error_text.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "engine/updates/snapshot_writer.h"
#include "server/lifecycle/model_manager.h"
#include "spdlog/spdlog.h"

namespace rankd::server {

absl::Status ModelManager::ApplyUpdate(const std::string& model, int64_t version,
                                       const UpdateFn& apply,
                                       const rankd::v1::EmbeddingUpdate* message) {
  // Serialized before the lock: it copies every row of the message.
  const bool log = update_logs_ != nullptr && message != nullptr;
  std::string payload;
  if (log && !message->SerializeToString(&payload)) {
    return absl::InternalError("update log: cannot serialize the message");
  }
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
        return absl::NotFoundError(absl::StrCat("version: model \"", engine::TruncateForError(model), "\" has no version ",
                                                version, "; versions: ",
                                                absl::StrJoin(known, ", ")));
      }
      const VersionState state = v->second.record.state();
      if (state == rankd::v1::LOADING) {
        return absl::UnavailableError(absl::StrCat("version: model \"", engine::TruncateForError(model), "\" version ",
                                                   version, " is loading; retry when READY"));
      }
      if (state != rankd::v1::READY || v->second.served == nullptr) {
        return absl::FailedPreconditionError(
            absl::StrCat("version: model \"", engine::TruncateForError(model), "\" version ", version, " is ",
                         VersionStateName(state), " (updates go to READY versions)"));
      }
      targets.push_back(v->second.served);
    } else {
      // An adopted snapshot shares its source's tables: update them once.
      std::set<const engine::LiveTables*> tables;
      for (const auto& [n, vs] : slot.versions) {
        if (vs.record.state() != rankd::v1::READY || vs.served == nullptr) continue;
        const engine::LiveTables* live = vs.served->live_tables();
        if (live != nullptr && !tables.insert(live).second) continue;
        targets.push_back(vs.served);
      }
    }
  }
  const bool record = version == 0 && journals_[model].loading > 0;
  if (targets.empty() && !record) {
    return absl::FailedPreconditionError(
        absl::StrCat("model \"", engine::TruncateForError(model), "\" has no READY version to update"));
  }
  for (const std::shared_ptr<ServedVersion>& target : targets) {
    absl::Status s = apply(*target);
    if (!s.ok()) return s;
  }
  // With a log, loading versions replay the log instead of the journal
  // (it holds every message the journal would).
  if (record && update_logs_ == nullptr) journals_[model].entries.push_back(apply);
  // In the same critical section as the apply: log order == apply order.
  if (log) return AppendToUpdateLog(model, version, payload);
  return absl::OkStatus();
}

absl::Status ModelManager::AppendToUpdateLog(const std::string& model, int64_t version,
                                             const std::string& payload) {
  absl::StatusOr<engine::UpdateLog*> log = update_logs_->Get(model, /*create=*/true);
  absl::Status s = log.ok() ? (*log)->Append(version, payload) : log.status();
  if (!s.ok()) {
    // Applied in memory but not durable: not acknowledged. A retry is
    // applied as a duplicate (or again, without a producer id) and logged.
    return absl::UnavailableError(absl::StrCat(
        "update log ", update_logs_->PathOf(model), ": cannot log the message (", s.message(),
        "); it is not acknowledged: send it again"));
  }
  if (listener_ != nullptr) listener_->OnUpdateLogBytes(model, (*log)->size_bytes());
  return absl::OkStatus();
}

std::string ModelManager::UpdateLogAfterSnapshot(const std::string& model, int ready_versions) {
  if (ready_versions > 1) {
    return absl::StrCat("; update log kept (", ready_versions - 1,
                        " other READY version(s) would replay it after a restart)");
  }
  absl::StatusOr<engine::UpdateLog*> log = update_logs_->Get(model, /*create=*/false);
  if (log.ok() && *log == nullptr) return "; no update log to truncate";
  absl::Status s = log.ok() ? (*log)->Truncate() : log.status();
  if (!s.ok()) {
    spdlog::warn("model {}: update log {} not truncated after the snapshot: {} (harmless: a "
                 "replay onto the snapshot skips what it holds)",
                 model, update_logs_->PathOf(model), s.ToString());
    return "; update log NOT truncated (see the warning)";
  }
  if (listener_ != nullptr) listener_->OnUpdateLogBytes(model, (*log)->size_bytes());
  return "; update log truncated";
}

namespace {

absl::Status SyncDirectory(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat(dir, ": open: ", strerror(errno)));
  const int rc = fsync(fd);
  close(fd);
  if (rc != 0) return absl::InternalError(absl::StrCat(dir, ": fsync: ", strerror(errno)));
  return absl::OkStatus();
}

// Writes `live`'s snapshot to tmp_dir (a new directory of `parent`) and renames
// it to final_dir, each step synced; removes tmp_dir on failure.
absl::StatusOr<engine::SnapshotStats> WriteSnapshotDirectory(const engine::LiveTables& live,
                                                             const std::string& parent,
                                                             const std::string& tmp_dir,
                                                             const std::string& final_dir) {
  std::vector<int64_t> keys(live.model().tables.size(), 0);
  for (const auto& d : live.DynamicTables()) {
    for (size_t t = 0; t < keys.size(); ++t) {
      if (live.model().tables[t].name == d.table) keys[t] = d.keys;
    }
  }
  absl::StatusOr<engine::SnapshotStats> stats =
      engine::WriteSnapshot(live.model(), live.primary_store(), keys, live.Positions(), tmp_dir);
  absl::Status s = stats.status();
  std::error_code ec;
  if (s.ok()) s = SyncDirectory(tmp_dir);
  if (s.ok()) {
    std::filesystem::rename(tmp_dir, final_dir, ec);
    if (ec) s = absl::InternalError(absl::StrCat(final_dir, ": rename: ", ec.message()));
  }
  if (s.ok()) s = SyncDirectory(parent);
  if (!s.ok()) {
    std::filesystem::remove_all(tmp_dir, ec);
    return s;
  }
  return stats;
}

}  // namespace

absl::StatusOr<std::shared_ptr<ServedVersion>> ModelManager::SnapshotSource(
    const std::string& model, int64_t version, int64_t* new_version, int* ready_versions) {
  absl::ReaderMutexLock lock(&mu_);
  auto it = models_.find(model);
  if (it == models_.end()) return UnknownModel(model);
  const ModelSlot& slot = it->second;
  *ready_versions = 0;
  for (const auto& [n, vs] : slot.versions) {
    *ready_versions += vs.record.state() == rankd::v1::READY && vs.served != nullptr;
  }
  std::shared_ptr<ServedVersion> source;
  for (auto v = slot.versions.rbegin(); v != slot.versions.rend(); ++v) {
    if ((version == 0 || v->first == version) && v->second.served != nullptr) {
      source = v->second.served;
      break;
    }
  }
  if (source == nullptr) {
    return absl::FailedPreconditionError(
        version > 0
            ? absl::StrCat("version: model \"", engine::TruncateForError(model), "\" version ",
                           version, " is not READY")
            : absl::StrCat("model \"", engine::TruncateForError(model), "\" has no READY version"));
  }
  const int64_t highest = slot.versions.empty() ? 0 : slot.versions.rbegin()->first;
  if (*new_version == 0) *new_version = highest + 1;
  if (slot.versions.count(*new_version) > 0) {
    return absl::AlreadyExistsError(
        absl::StrCat("new_version: model \"", model, "\" already has a version ", *new_version));
  }
  return source;
}

void ModelManager::AdoptSnapshot(const std::string& model, int64_t new_version,
                                 const std::string& directory, int64_t source_version,
                                 std::shared_ptr<ServedVersion> adopted) {
  absl::MutexLock lock(&mu_);
  ModelSlot& slot = models_[model];
  VersionSlot& v = slot.versions.emplace(new_version, VersionSlot(clock_->Now())).first->second;
  (void)v.record.StartLoading(clock_->Now());
  (void)v.record.Ready(clock_->Now());
  v.directory = directory;
  v.on_disk = true;
  v.fingerprint = DirectoryFingerprint(directory);
  v.served = std::move(adopted);
  v.snapshot_of = source_version;
  if (options_.mode == Mode::kExplicit) slot.wanted.insert(new_version);
}

absl::StatusOr<rankd::v1::SaveSnapshotResponse> ModelManager::SaveSnapshot(
    const std::string& model, int64_t version, int64_t new_version) {
  absl::MutexLock control(&control_mu_);
  if (shut_down_) return absl::UnavailableError("the server is shutting down");
  if (new_version < 0 || version < 0) {
    return absl::InvalidArgumentError("version and new_version: must be >= 0");
  }
  int ready_versions = 0;  // of the model, the source included
  absl::StatusOr<std::shared_ptr<ServedVersion>> found =
      SnapshotSource(model, version, &new_version, &ready_versions);
  if (!found.ok()) return found.status();
  const std::shared_ptr<ServedVersion> source = *std::move(found);
  if (source->live_tables() == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model \"", engine::TruncateForError(model), "\" version ", source->version(),
        " cannot be snapshotted (its backend keeps fixed tables)"));
  }
  const std::string parent = absl::StrCat(options_.model_root, "/", model);
  const std::string final_dir = absl::StrCat(parent, "/", new_version);
  const std::string tmp_dir = absl::StrCat(parent, "/.", new_version, ".tmp");
  std::error_code ec;
  if (std::filesystem::exists(final_dir, ec)) {
    return absl::AlreadyExistsError(absl::StrCat("new_version: ", final_dir, " exists"));
  }
  std::filesystem::remove_all(tmp_dir, ec);  // a crashed earlier attempt
  if (!std::filesystem::create_directory(tmp_dir, ec)) {
    return absl::InternalError(absl::StrCat(tmp_dir, ": cannot create: ", ec.message()));
  }
  // No update is applied from here until the snapshot is adopted (scoring
  // goes on: it only reads the tables).
  absl::MutexLock updates(&updates_mu_);
  absl::StatusOr<engine::SnapshotStats> stats =
      WriteSnapshotDirectory(*source->live_tables(), parent, tmp_dir, final_dir);
  if (!stats.ok()) return stats.status();
  AdoptSnapshot(model, new_version, final_dir, source->version(),
                std::make_shared<ServedVersion>(*source, new_version));
  // Still under the update lock: no message lands between the cut and the
  // truncation.
  const std::string log_note =
      update_logs_ != nullptr ? UpdateLogAfterSnapshot(model, ready_versions) : "";
  spdlog::info("model {} version {}: snapshot of version {} written to {} ({} bytes, {:.3f} s) "
               "and adopted in place{}",
               model, new_version, source->version(), final_dir, stats->bytes, stats->seconds,
               log_note);
  if (listener_ != nullptr) listener_->OnVersionReady(model, new_version);
  NotifyStates(model);
  rankd::v1::SaveSnapshotResponse out;
  out.set_version(new_version);
  out.set_directory(final_dir);
  out.set_bytes(stats->bytes);
  out.set_seconds(stats->seconds);
  return out;
}

absl::StatusOr<rankd::v1::SaveSnapshotResponse> ModelManager::SaveSnapshotAndReconcile(
    const std::string& model, int64_t version, int64_t new_version) {
  absl::StatusOr<rankd::v1::SaveSnapshotResponse> out =
      SaveSnapshot(model, version, new_version);
  if (!out.ok()) return out;
  {
    // The version policy now sees the snapshot (e.g. latest 1: the version
    // it came from stops serving under its own number; its memory stays,
    // shared with the snapshot).
    absl::MutexLock control(&control_mu_);
    if (options_.mode != Mode::kNone && !shut_down_) Reconcile(model, {});
  }
  absl::StatusOr<rankd::v1::ModelStatus> status = StatusOrNotFound(model);
  if (status.ok()) *out->mutable_model() = *std::move(status);
  return out;
}

}  // namespace rankd::server
