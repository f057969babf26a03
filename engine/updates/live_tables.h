// LiveTables: the update side of one model version being served. It applies
// embedding update messages to every backend store of the version (the CPU
// engine's host tables, or each GPU's DeviceModel) atomically with respect
// to scoring, de-duplicates producers' retries, and keeps the logical clock
// of dynamic tables' LRU scores.
//
// Consistency: a gate (a reader/writer lock with writer priority) and the
// stores' three-step updates (table_store.h). Scoring holds the gate shared
// (BatchScope): the CPU workers for each whole batch (ModelInstance, around
// Worker::Execute); the CUDA workers only while they enqueue a batch's GPU
// work (Worker::AttachLiveTables), because their store orders each update
// on the GPU after every batch enqueued before it and before every batch
// enqueued after (DeviceModel: the update's stream waits on each worker's
// last batch, each worker's next batch on the update). Apply stages the
// message (copies to the GPUs) without the gate, holds the gate exclusively
// only to commit it (CPU: the writes themselves; CUDA: enqueueing them),
// then waits for the writes. So every batch sees all of a message or none of
// it, messages apply in stream order, and a batch that starts after Apply
// returned sees it. The cost per message: on the CPU backend scoring pauses
// while in-flight batches finish and the rows are written; on the CUDA
// backend batches are held back only while the update is enqueued, and on
// the GPU the update's kernels wait for the batches in flight and the next
// batches for them (docs/architecture.md, "Live embeddings").
//
// De-duplication: a message with a producer id and a sequence number > 0 is
// applied only if the sequence is above the last one applied for that
// (producer, table); otherwise it is reported as a duplicate and skipped.
//
// CPU priority: validation and staging, where a message's rows are scanned
// and copied, run on a helper thread at the SCHED_IDLE policy
// (idle_priority_runner.h; Options::idle_priority_staging), so a steady
// stream takes cores serving leaves idle instead of preempting it; the
// commit (under the gate) and the wait run on the calling thread at its own
// priority, so batches never wait behind a starved thread.
//
// Ownership: shares the model and the stores; the stores must be the ones
// the version's workers read. Threading: every method is thread-safe; Apply
// calls run one at a time (apply_mu_, from staging to the result).
#ifndef RANKD_ENGINE_UPDATES_LIVE_TABLES_H_
#define RANKD_ENGINE_UPDATES_LIVE_TABLES_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/model/model.h"
#include "engine/updates/idle_priority_runner.h"
#include "engine/updates/table_delta.h"
#include "engine/updates/table_store.h"

namespace rankd::engine {

// Where a producer's stream of one table stands.
struct ProducerPosition {
  std::string producer_id;
  std::string table;
  uint64_t last_sequence = 0;
  int64_t last_timestamp_unix_us = 0;
};

// Identifies one message for de-duplication; sequence 0 = none.
struct UpdateOrigin {
  std::string producer_id;
  uint64_t sequence = 0;
  int64_t timestamp_unix_us = 0;
};

class LiveTables {
 public:
  struct Options {
    // Validate and stage each message on a helper thread at the SCHED_IDLE
    // CPU policy (see above); false: on the calling thread, at its priority
    // (a saturated host then shares its cores between updates and serving).
    bool idle_priority_staging = true;
  };
  // `stores`: at least one, each holding the version's tables.
  LiveTables(std::shared_ptr<const Model> model, std::vector<std::shared_ptr<TableStore>> stores,
             Options options);
  LiveTables(std::shared_ptr<const Model> model, std::vector<std::shared_ptr<TableStore>> stores)
      : LiveTables(std::move(model), std::move(stores), Options()) {}

  // Held by a worker for one batch, or while it enqueues one (shared gate).
  class BatchScope {
   public:
    explicit BatchScope(LiveTables* live) ABSL_NO_THREAD_SAFETY_ANALYSIS : live_(live) {
      if (live_ != nullptr) live_->gate_.ReaderLock();
    }
    ~BatchScope() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      if (live_ != nullptr) live_->gate_.ReaderUnlock();
    }
    BatchScope(const BatchScope&) = delete;
    BatchScope& operator=(const BatchScope&) = delete;

   private:
    LiveTables* const live_;
  };

  // The scope a request's validation holds: `live`'s shared gate when its
  // validation reads table contents (validation_reads_tables: keys looked up
  // in a DYNAMIC table must not move under it), else none. `live` may be
  // null (a version without live tables).
  static BatchScope ValidationScope(LiveTables* live) {
    return BatchScope(live != nullptr && live->validation_reads_tables() ? live : nullptr);
  }

  // The outcome of one Apply.
  struct Applied {
    bool duplicate = false;  // skipped: its sequence was already applied
    DeltaResult result;
  };

  // Validates `delta` (delta_validation.h; nothing applied on error), skips
  // it when `origin` repeats an applied sequence, else applies it to every
  // store (committed under the exclusive gate) and returns once the writes
  // are complete. INVALID_ARGUMENT for a bad delta or an
  // origin with a sequence and no producer id; FAILED_PRECONDITION once the
  // version is closed (Close); a store's error (INTERNAL) otherwise, after
  // which the version's tables may differ between stores: the server
  // should reload it.
  absl::StatusOr<Applied> Apply(const TableDelta& delta, const UpdateOrigin& origin);

  // Refuses every later Apply with FAILED_PRECONDITION (the version is being
  // unloaded). Waits for an Apply in progress.
  void Close();

  std::vector<ProducerPosition> Positions() const;
  // DYNAMIC tables' key counts now, their maximum and evictions so far.
  struct DynamicTableStats {
    std::string table;
    int64_t keys = 0;
    int64_t max_keys = 0;
    int64_t evictions = 0;
  };
  std::vector<DynamicTableStats> DynamicTables() const;
  // Restores positions (a snapshot's, at load) before any Apply.
  void SetPositions(const std::vector<ProducerPosition>& positions);

  const Model& model() const { return *model_; }
  // Whether request validation reads table contents (a DYNAMIC table with
  // id_policy ERROR: unknown keys are refused), so it must hold a BatchScope.
  bool validation_reads_tables() const { return validation_reads_tables_; }
  // Store 0 (for snapshots: every store holds the same content).
  const TableStore& primary_store() const { return *stores_[0]; }

 private:
  // Validates `delta`, refuses it once closed, marks a duplicate in
  // `applied`, else prepares it in every store (on error: none kept).
  absl::Status Stage(const TableDelta& delta, const UpdateOrigin& origin, Applied* applied,
                     std::vector<std::unique_ptr<TableStore::Update>>* updates);
  // Runs `fn` on the staging thread (on this one without it).
  void OnStagingThread(absl::FunctionRef<void()> fn);

  const std::shared_ptr<const Model> model_;
  const std::vector<std::shared_ptr<TableStore>> stores_;
  const std::unique_ptr<IdlePriorityRunner> staging_;  // null: stage on the caller
  bool validation_reads_tables_ = false;

  absl::Mutex apply_mu_;  // one Apply or Close at a time
  absl::Mutex gate_ ABSL_ACQUIRED_AFTER(apply_mu_);  // shared: batches; exclusive: commits
  mutable absl::Mutex mu_ ABSL_ACQUIRED_AFTER(gate_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  // (producer, table) -> position.
  std::map<std::pair<std::string, std::string>, ProducerPosition> positions_ ABSL_GUARDED_BY(mu_);
  std::vector<DynamicTableStats> dynamic_ ABSL_GUARDED_BY(mu_);  // per table (static: unused)
};

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_UPDATES_LIVE_TABLES_H_
