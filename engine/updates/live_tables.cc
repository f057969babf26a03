#include "engine/updates/live_tables.h"

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "engine/updates/delta_validation.h"

namespace rankd::engine {

LiveTables::LiveTables(std::shared_ptr<const Model> model,
                       std::vector<std::shared_ptr<TableStore>> stores, Options options)
    : model_(std::move(model)),
      stores_(std::move(stores)),
      staging_(options.idle_priority_staging
                   ? std::make_unique<IdlePriorityRunner>("rankd-update")
                   : nullptr) {
  for (const EmbeddingTable& t : model_->tables) {
    validation_reads_tables_ |= t.dynamic && t.id_policy == rankd::v1::ERROR;
    dynamic_.push_back({t.name, t.dynamic ? t.num_rows : 0, t.dynamic ? t.max_keys : 0, 0});
  }
}

absl::Status LiveTables::Stage(const TableDelta& delta, const UpdateOrigin& origin,
                               Applied* applied,
                               std::vector<std::unique_ptr<TableStore::Update>>* updates) {
  absl::Status valid = ValidateDelta(*model_, delta);
  if (!valid.ok()) return valid;
  const std::string& table = model_->tables[delta.table].name;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "model ", model_->name, " version ", model_->version, " is being unloaded"));
    }
    if (origin.sequence > 0) {
      auto it = positions_.find({origin.producer_id, table});
      if (it != positions_.end() && origin.sequence <= it->second.last_sequence) {
        applied->duplicate = true;
        return absl::OkStatus();
      }
    }
  }
  // Staging (copies to the devices) runs while batches go on.
  for (const auto& store : stores_) {
    absl::StatusOr<std::unique_ptr<TableStore::Update>> update = store->Prepare(delta);
    if (!update.ok()) {
      updates->clear();  // on this thread, which staged them
      return absl::Status(update.status().code(),
                          absl::StrCat("table ", table, ": ", update.status().message()));
    }
    updates->push_back(*std::move(update));
  }
  return absl::OkStatus();
}

void LiveTables::OnStagingThread(absl::FunctionRef<void()> fn) {
  if (staging_ != nullptr) {
    staging_->Run(fn);
  } else {
    fn();
  }
}

absl::StatusOr<LiveTables::Applied> LiveTables::Apply(const TableDelta& delta,
                                                      const UpdateOrigin& origin) {
  if (origin.sequence > 0 && origin.producer_id.empty()) {
    return absl::InvalidArgumentError(
        "producer_id: empty, but a sequence number is set (sequences are per producer)");
  }
  Applied applied;
  // One update at a time, from staging to its result; Close waits for it.
  absl::MutexLock one_at_a_time(&apply_mu_);
  // Validation and staging (the message's CPU-heavy part) run on the staging
  // thread, and so does the release of what they staged (a store's Update
  // may hold a lock its staging took); commit and wait run here.
  std::vector<std::unique_ptr<TableStore::Update>> updates;
  absl::Status staged;
  OnStagingThread([&] { staged = Stage(delta, origin, &applied, &updates); });
  if (!staged.ok()) return staged;
  if (applied.duplicate) return applied;
  absl::Cleanup release = [&] { OnStagingThread([&] { updates.clear(); }); };
  const std::string& table = model_->tables[delta.table].name;
  const uint64_t now = model_->score_clock->fetch_add(1, std::memory_order_relaxed) + 1;
  absl::Status status;
  size_t committed = 0;
  {
    // Exclusive gate: no batch runs on the host, none is being enqueued.
    absl::WriterMutexLock gate(&gate_);
    for (; committed < updates.size() && status.ok(); ++committed) {
      status = updates[committed]->Commit(now);
    }
  }
  for (size_t s = 0; s < committed; ++s) {
    DeltaResult result;
    const absl::Status waited = updates[s]->Wait(&result);
    if (status.ok()) status = waited;
    if (s == 0) applied.result = result;
  }
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("table ", table, ": ", status.message()));
  }
  absl::MutexLock lock(&mu_);
  DynamicTableStats& stats = dynamic_[delta.table];
  stats.keys += applied.result.keys_inserted - applied.result.keys_deleted -
                applied.result.keys_evicted;
  stats.evictions += applied.result.keys_evicted;
  if (origin.sequence > 0) {
    ProducerPosition& position = positions_[{origin.producer_id, table}];
    position.producer_id = origin.producer_id;
    position.table = table;
    position.last_sequence = origin.sequence;
    position.last_timestamp_unix_us = origin.timestamp_unix_us;
  }
  return applied;
}

void LiveTables::Close() {
  absl::MutexLock one_at_a_time(&apply_mu_);
  absl::WriterMutexLock gate(&gate_);
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

std::vector<ProducerPosition> LiveTables::Positions() const {
  absl::MutexLock lock(&mu_);
  std::vector<ProducerPosition> out;
  out.reserve(positions_.size());
  for (const auto& [key, p] : positions_) out.push_back(p);
  return out;
}

std::vector<LiveTables::DynamicTableStats> LiveTables::DynamicTables() const {
  absl::MutexLock lock(&mu_);
  std::vector<DynamicTableStats> out;
  for (size_t t = 0; t < dynamic_.size(); ++t) {
    if (model_->tables[t].dynamic) out.push_back(dynamic_[t]);
  }
  return out;
}

void LiveTables::SetPositions(const std::vector<ProducerPosition>& positions) {
  absl::MutexLock lock(&mu_);
  for (const ProducerPosition& p : positions) positions_[{p.producer_id, p.table}] = p;
}

}  // namespace rankd::engine
