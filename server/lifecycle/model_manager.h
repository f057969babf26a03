// ModelManager: which model versions the server serves, and their life.
//
// It owns the model repository (--model_root): it scans
// `<root>/<name>/<version>/` and each model's serving.pbtxt (model_repository.h)
// and drives every version through LOADING -> READY -> DRAINING -> UNLOADED
// (or FAILED with its reason; version_state.h), by the control mode:
//   kNone      every version on disk is loaded at Start; any failure fails
//              Start; nothing changes afterwards (rankd's original rule).
//   kPoll      Poll() (every --repository_poll_s and on SIGHUP) re-scans the
//              root; versions the model's policy selects (plus versions its
//              labels name) are loaded, others unloaded. A version whose load
//              failed is retried only once its files change.
//   kExplicit  Start loads the models named in Options::load_models; then
//              only Load / Unload (the admin API) change anything.
//
// Swapping without failures: a new version loads and warms up while the old
// one serves; it becomes "newest ready" atomically (Find sees one or the
// other); the old version leaves Find, then the manager waits until no
// request holds it (every admitted request finished: a Find result is a
// shared_ptr that the request keeps until it is answered), shuts its instance
// down and destroys it, releasing its GPU memory, host memory and threads.
// With Transition::kResource the old versions a load will displace are
// unloaded first (requests in that gap get UNAVAILABLE naming the version
// being loaded).
//
// Ownership: owns every ModelInstance (through ServedVersion); borrows the
// loader, listener and clock, which must outlive it.
// Threading: Find, Labels, ReadyVersions and List are thread-safe and never
// wait for a load (a short reader lock). Start, Poll, Load, Unload, SetLabel
// and Shutdown are thread-safe and run one at a time (a control lock held
// across loads and drains). Listener methods run on the thread of the control
// operation, never under the reader lock.
#ifndef RANKD_SERVER_LIFECYCLE_MODEL_MANAGER_H_
#define RANKD_SERVER_LIFECYCLE_MODEL_MANAGER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/serving/clock.h"
#include "engine/serving/model_instance.h"
#include "engine/updates/live_tables.h"
#include "rankd/v1/model_control.pb.h"
#include "rankd/v1/model_serving.pb.h"
#include "server/lifecycle/model_repository.h"
#include "server/lifecycle/update_logs.h"
#include "server/lifecycle/version_loader.h"
#include "server/lifecycle/version_state.h"

namespace rankd::server {

// One READY version as a request sees it. A request holds the shared_ptr from
// Find until it is answered; the version is shut down only after every such
// holder let go. A snapshot adopted in place (SaveSnapshot) is a second
// ServedVersion over the same instance and tables: the instance is shut
// down when the last ServedVersion sharing it is released.
class ServedVersion {
 public:
  ServedVersion(std::string name, int64_t version, std::shared_ptr<engine::ModelInstance> instance,
                std::shared_ptr<engine::LiveTables> live_tables = nullptr)
      : name_(std::move(name)),
        version_(version),
        instance_(std::move(instance)),
        live_tables_(std::move(live_tables)) {}
  // The same instance and tables served as another version (a snapshot).
  ServedVersion(const ServedVersion& from, int64_t version)
      : name_(from.name_),
        version_(version),
        instance_(from.instance_),
        live_tables_(from.live_tables_) {}
  const std::string& name() const { return name_; }
  int64_t version() const { return version_; }
  engine::ModelInstance& instance() const { return *instance_; }
  // The version's update side; null when its tables cannot change.
  engine::LiveTables* live_tables() const { return live_tables_.get(); }
  // Whether another ServedVersion shares this one's instance (an adopted
  // snapshot, or the version it was taken from).
  bool instance_shared() const { return instance_.use_count() > 1; }

 private:
  const std::string name_;
  const int64_t version_;
  const std::shared_ptr<engine::ModelInstance> instance_;
  const std::shared_ptr<engine::LiveTables> live_tables_;
};

// Applies one embedding update message to one version (server/embedding_updates.h).
using UpdateFn = std::function<absl::Status(ServedVersion& version)>;

class ModelManager {
 public:
  enum class Mode { kNone, kPoll, kExplicit };
  enum class Transition { kAvailability, kResource };

  struct Options {
    std::string model_root;  // required
    Mode mode = Mode::kPoll;
    // kAvailability: a new version loads beside the old (memory for both; if
    // it does not fit it fails and the old keeps serving). kResource: the old
    // versions it displaces are drained and unloaded first.
    Transition transition = Transition::kAvailability;
    // kExplicit: models loaded at Start ("*" = every model in the root).
    std::vector<std::string> load_models;
    // kPoll / kExplicit: a version failing at Start fails Start (kNone: always).
    bool exit_on_load_error = false;
    // Longest wait of an unload for the requests still holding the version;
    // past it the instance is shut down anyway (its queue is still drained).
    absl::Duration drain_timeout = absl::Seconds(30);
    // Directory of the models' update logs (update_logs.h); empty = none
    // (default): updates since a model's last snapshot are lost at a
    // restart. With it, every update message accepted is appended to its
    // model's log (synced) before it is acknowledged, and replayed onto
    // each version of the model that loads, before it takes traffic.
    std::string update_log_dir;
  };

  // What the server does with lifecycle events (metrics, health). Every
  // method has a no-op default.
  class Listener {
   public:
    virtual ~Listener() = default;
    // Before the version takes traffic.
    virtual void OnVersionReady(const std::string& model, int64_t version) {}
    // After the version was released.
    virtual void OnVersionUnloaded(const std::string& model, int64_t version) {}
    // After every load attempt; `seconds` = load + warm-up.
    virtual void OnLoadFinished(const std::string& model, int64_t version, bool ok,
                                double seconds) {}
    // Versions per state (every state present, zeros included) after a change.
    virtual void OnVersionStates(const std::string& model,
                                 const std::map<VersionState, int>& counts) {}
    // The model gained its first READY version (true) or lost its last.
    virtual void OnModelServing(const std::string& model, bool serving) {}
    // The model's update log has this many bytes (after an append, a
    // replay or a truncation). Runs under the update lock: keep it short.
    virtual void OnUpdateLogBytes(const std::string& model, int64_t bytes) {}
    // A DYNAMIC table's key count and maximum, once a loaded version has
    // replayed the update log or journal (before it takes traffic). Runs
    // under the update lock: keep it short.
    virtual void OnDynamicTableKeys(const std::string& model, const std::string& table,
                                    int64_t keys, int64_t max_keys) {}
  };

  // INVALID_ARGUMENT naming the option for bad options. `listener` may be
  // null; `clock` null = the real clock.
  static absl::StatusOr<std::unique_ptr<ModelManager>> Create(const Options& options,
                                                              VersionLoader* loader,
                                                              Listener* listener,
                                                              const engine::Clock* clock);
  // Shutdown().
  ~ModelManager();

  // The first load, by mode (see the class comment). kNone: NOT_FOUND when
  // the root holds no version, else the first failure. kPoll / kExplicit:
  // errors for the root itself or an unknown --load_model name, and with
  // exit_on_load_error the first failed version.
  absl::Status Start();
  // kPoll: re-scan and reconcile every model. Errors only for the root (the
  // versions serving keep serving).
  absl::Status Poll();

  // The version a request names: `version` > 0 that version; else the
  // version `label` points at when `label` is set; else the newest READY.
  // NOT_FOUND naming what exists for an unknown model, version or label;
  // INVALID_ARGUMENT for a label no label can be (CheckLabelName);
  // UNAVAILABLE when the model or label's version exists but is not READY.
  absl::StatusOr<std::shared_ptr<ServedVersion>> Find(const std::string& model, int64_t version,
                                                      const std::string& label) const;
  // Labels in force (label -> version) and READY versions (ascending).
  std::map<std::string, int64_t> Labels(const std::string& model) const;
  std::vector<int64_t> ReadyVersions(const std::string& model) const;
  // Models with at least one READY version.
  std::vector<std::string> ServedModels() const;

  // The admin API (model_control.proto). Errors as documented there.
  absl::StatusOr<rankd::v1::ListModelsResponse> List(const std::string& model) const;
  absl::StatusOr<rankd::v1::ModelStatus> Load(const std::string& model,
                                              const std::vector<int64_t>& versions);
  absl::StatusOr<rankd::v1::ModelStatus> Unload(const std::string& model,
                                                const std::vector<int64_t>& versions);
  absl::StatusOr<rankd::v1::ModelStatus> SetLabel(const std::string& model,
                                                  const std::string& label, int64_t version);
  // Embedding updates (one message): runs `apply` on the version it names:
  // `version` > 0 that READY version (FAILED_PRECONDITION when it is
  // draining or unloaded, UNAVAILABLE while it loads, NOT_FOUND naming what
  // exists); 0 = every READY version of the model (FAILED_PRECONDITION
  // when none is), and, while versions of the model load, it is recorded and
  // run on each of them before it takes traffic, so a swap loses no update.
  // Updates run one at a time (server-wide), never while a version is being
  // published. Returns the first error of `apply` (the versions before it
  // keep the message).
  // With Options::update_log_dir, `message` (the message as received; null
  // = not logged, for tests) is then appended to the model's update log
  // and synced before ApplyUpdate returns, so it is acknowledged only once
  // durable; duplicates too (a retry of a message whose earlier append
  // failed makes it durable that way). If the append fails: UNAVAILABLE
  // naming the file; the message stays applied in memory, and the sender
  // should send it again (its sequence number makes that safe).
  absl::Status ApplyUpdate(const std::string& model, int64_t version, const UpdateFn& apply,
                           const rankd::v1::EmbeddingUpdate* message = nullptr);

  // Writes a READY version's tables and dense weights as version
  // `new_version` (0 = one above the highest) of the model, through the
  // publishing protocol (`.N.tmp`, then a rename), while updates wait and
  // scoring goes on; then serves it in place: version N is the same
  // instance and tables (no reload, no update lost), and the version
  // policy is applied (SaveSnapshotAndReconcile). Errors: NOT_FOUND,
  // FAILED_PRECONDITION (not READY, fixed tables, an empty dynamic table),
  // ALREADY_EXISTS (new_version taken), INTERNAL naming the file.
  // With an update log: when the source was the model's only READY version,
  // the snapshot holds everything the log says, and the log is truncated
  // (durably, before SaveSnapshot returns). With other READY versions the
  // log is kept: a restart loads them from their own directories, and they
  // need it (replaying it onto the snapshot is harmless: its
  // update_positions skip what it holds).
  absl::StatusOr<rankd::v1::SaveSnapshotResponse> SaveSnapshotAndReconcile(
      const std::string& model, int64_t version, int64_t new_version);

  // Shuts every served version down (admitted requests finish) and releases
  // it. Idempotent.
  void Shutdown();

 private:
  struct VersionSlot {
    explicit VersionSlot(absl::Time now) : record(now) {}
    VersionRecord record;
    std::string directory;
    uint64_t fingerprint = 0;  // of the files last scanned
    bool on_disk = false;
    std::shared_ptr<ServedVersion> served;  // READY only
    double load_seconds = 0, warmup_seconds = 0;
    int64_t device_bytes = 0, host_bytes = 0;
    // An operator unloaded it (kPoll): not loaded again while its files
    // have this fingerprint, unless LoadModel names it.
    uint64_t held_fingerprint = 0;
    int64_t snapshot_of = 0;  // adopted in place from this version (0 = loaded)
  };
  struct LabelOverride {
    int64_t version = 0;       // 0 = label removed
    int64_t file_version = 0;  // the file's value when set (0 = none)
  };
  struct ModelSlot {
    std::map<int64_t, VersionSlot> versions;
    rankd::v1::ModelServingConfig config;  // last good serving.pbtxt
    uint64_t config_fingerprint = 0;
    std::string config_error;
    std::map<std::string, LabelOverride> overrides;  // SetVersionLabel
    std::map<std::string, int64_t> labels;           // in force
    bool follow_policy = false;   // kExplicit: LoadModel without versions
    std::set<int64_t> wanted;     // kExplicit: versions an operator loaded
    bool serving = false;         // last OnModelServing
  };
  struct UpdateJournal {
    int loading = 0;               // loads of the model in progress
    std::vector<UpdateFn> entries; // version-0 updates since the oldest began
  };
  struct Plan {
    std::vector<int64_t> load;    // newest first
    std::vector<int64_t> unload;  // READY versions no longer wanted
  };

  ModelManager(const Options& options, VersionLoader* loader, Listener* listener,
               const engine::Clock* clock, std::unique_ptr<UpdateLogs> update_logs);

  // Scan bookkeeping (control lock held).
  void ApplyScan(const RepositoryScan& scan) ABSL_EXCLUSIVE_LOCKS_REQUIRED(control_mu_);
  void ApplyModelScan(const std::string& name, const ModelOnDisk* disk)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(control_mu_, mu_);
  void ApplyServingConfig(const std::string& name, const ModelOnDisk& disk, ModelSlot* slot)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void RecomputeLabels(ModelSlot* slot);
  void ForgetGone() ABSL_EXCLUSIVE_LOCKS_REQUIRED(control_mu_, mu_);

  // Loads and unloads until `name` serves what its mode wants. `force`:
  // versions an operator named (loaded even if FAILED, reloaded if READY).
  void Reconcile(const std::string& name, const std::set<int64_t>& force)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(control_mu_);
  Plan MakePlan(const ModelSlot& slot, const std::set<int64_t>& force) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  bool LoadVersion(const std::string& name, int64_t version)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(control_mu_);
  void UnloadVersion(const std::string& name, int64_t version)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(control_mu_);
  absl::StatusOr<rankd::v1::SaveSnapshotResponse> SaveSnapshot(const std::string& model,
                                                                int64_t version,
                                                                int64_t new_version);
  // SaveSnapshot's source: `version` of `model` (0 = its newest) while it
  // serves. Resolves *new_version (0 = the highest version + 1; one that exists
  // is ALREADY_EXISTS) and counts the model's READY versions.
  absl::StatusOr<std::shared_ptr<ServedVersion>> SnapshotSource(const std::string& model,
                                                                int64_t version,
                                                                int64_t* new_version,
                                                                int* ready_versions)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Registers the snapshot written to `directory` as `new_version`, READY and
  // serving `adopted` (the source's tables).
  void AdoptSnapshot(const std::string& model, int64_t new_version, const std::string& directory,
                     int64_t source_version, std::shared_ptr<ServedVersion> adopted)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Runs the updates recorded while `served` loaded on it (errors logged).
  void ReplayJournal(const std::string& name, const UpdateJournal& journal,
                     ServedVersion* served) ABSL_EXCLUSIVE_LOCKS_REQUIRED(updates_mu_);
  // What replaying the update log did to one loading version.
  struct LogReplay {
    int64_t end = 0;  // offset read up to (0: nothing read yet)
    int64_t applied = 0, duplicates = 0, other_versions = 0, failed = 0;
    absl::Status first_failure;
  };
  // Replays the model's update log from replay->end onto `served` (not yet
  // routable): records for version 0 or served's version, in log order,
  // without appending them again. A record that does not apply is counted
  // (and logged by the caller); errors only for a log that cannot be read
  // (DATA_LOSS / INTERNAL naming the file): the version must not serve.
  absl::Status ReplayUpdateLog(const std::string& name, ServedVersion* served,
                               LogReplay* replay);
  // One info line for a replay (a warning for records that did not apply).
  static void LogReplayed(const std::string& name, int64_t version, const LogReplay& replay);
  // Appends an applied message to its model's log (UNAVAILABLE naming the
  // file if that fails).
  absl::Status AppendToUpdateLog(const std::string& model, int64_t version,
                                 const std::string& payload)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(updates_mu_);
  // After a snapshot whose source was one of `ready_versions` READY
  // versions of the model: empties the model's log when it was the only
  // one (errors logged: the log then stays, which is harmless), else keeps
  // it. Returns what the snapshot's log line says about the log.
  std::string UpdateLogAfterSnapshot(const std::string& model, int ready_versions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(updates_mu_);
  // Waits for the holders of `served`, shuts it down and destroys it.
  void DrainAndRelease(std::shared_ptr<ServedVersion> served);
  // Resident versions' memory, for an out-of-memory load's reason.
  std::string ResidentSummary() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Listener calls after a change of `name` (outside mu_).
  void NotifyStates(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(control_mu_);

  rankd::v1::ModelStatus StatusOf(const std::string& name, const ModelSlot& slot) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  std::vector<std::string> ServedModelsLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::StatusOr<rankd::v1::ModelStatus> StatusOrNotFound(const std::string& name) const;
  absl::Status ScanOneModel(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(control_mu_);
  // Whether the admin call `rpc` (LoadModel, UnloadModel) may change which
  // versions are loaded: UNAVAILABLE after shutdown, FAILED_PRECONDITION
  // under --model_control none.
  absl::Status CheckVersionsChangeable(absl::string_view rpc) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(control_mu_);
  // NOT_FOUND naming the models the manager knows.
  absl::Status UnknownModel(const std::string& name) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const Options options_;
  VersionLoader* const loader_;
  Listener* const listener_;
  const engine::Clock* const clock_;
  const std::unique_ptr<UpdateLogs> update_logs_;  // null: no --update_log_dir

  absl::Mutex control_mu_;  // one control operation at a time
  bool shut_down_ ABSL_GUARDED_BY(control_mu_) = false;
  std::string last_scan_error_ ABSL_GUARDED_BY(control_mu_);

  // Serializes updates with each other and with publishing a loaded
  // version; never held across a load (only across replaying the journal).
  absl::Mutex updates_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::map<std::string, UpdateJournal> journals_ ABSL_GUARDED_BY(updates_mu_);
  mutable absl::Mutex mu_;  // the slots; held briefly, never across a load
  std::map<std::string, ModelSlot> models_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rankd::server

#endif  // RANKD_SERVER_LIFECYCLE_MODEL_MANAGER_H_
