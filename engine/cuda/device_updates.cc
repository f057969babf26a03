// DeviceModel's online updates, ordered on the GPU (device_model.h, "Online
// updates"): staging, commit behind the workers' batch events, wait.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/cuda/device_model.h"
#include "kernels/cuda/dynamic_table.h"
#include "kernels/cuda/embedding_lookup.h"
#include "kernels/cuda/row_scatter.h"

namespace rankd::engine::cuda {
namespace {

size_t Align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

DeviceModel::Update::Update(const DeviceModel* dm) : dm_(dm) {}

DeviceModel::Update::~Update() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // Committed writes read the staging buffer: finish them before another
  // update may reuse it.
  if (committed_ && !waited_) {
    cudaSetDevice(dm_->device_);
    (void)dm_->SyncUpdateStream("finish an update");  // nothing to report it to
  }
  dm_->refresh_mu_.Unlock();
}

absl::Status DeviceModel::SyncUpdateStream(const char* what) const {
  RANKD_RETURN_IF_CUDA_ERROR(cudaEventRecord(update_sync_, refresh_stream_), what);
  return CudaStatus(cudaEventSynchronize(update_sync_), what);
}

void DeviceModel::AddBatchEvent(cudaEvent_t event) const {
  absl::MutexLock lock(&events_mu_);
  batch_events_.push_back(event);
}

void DeviceModel::RemoveBatchEvent(cudaEvent_t event) const {
  absl::MutexLock lock(&events_mu_);
  batch_events_.erase(std::remove(batch_events_.begin(), batch_events_.end(), event),
                      batch_events_.end());
}

absl::StatusOr<std::unique_ptr<DeviceModel::Update>> DeviceModel::StageStaticRows(
    int table, absl::Span<const int64_t> ids, absl::Span<const uint8_t> rows) const
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  refresh_mu_.Lock();  // released by ~Update
  std::unique_ptr<Update> u(new Update(this));
  u->table_ = table;
  u->n_ = static_cast<int64_t>(ids.size());
  u->off_rows_ = Align256(8 * ids.size());
  RANKD_RETURN_IF_CUDA_ERROR(cudaSetDevice(device_), "cudaSetDevice");
  if (absl::Status s = EnsureUpdateStaging(u->off_rows_ + rows.size()); !s.ok()) return s;
  uint8_t* staging = update_staging_.as<uint8_t>();
  if (u->n_ > 0) {
    RANKD_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(staging, ids.data(), 8 * ids.size(),
                                               cudaMemcpyHostToDevice, refresh_stream_),
                               "copy update ids");
    RANKD_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(staging + u->off_rows_, rows.data(), rows.size(),
                                               cudaMemcpyHostToDevice, refresh_stream_),
                               "copy update rows");
    if (absl::Status s = SyncUpdateStream("copy update rows"); !s.ok()) return s;
  }
  return u;
}

absl::StatusOr<std::unique_ptr<DeviceModel::Update>> DeviceModel::StageDynamic(
    int table, absl::Span<const int64_t> delete_keys, absl::Span<const int64_t> keys,
    absl::Span<const uint8_t> rows) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
  const kernels::DynamicTableView& v = dynamic_[table];
  if (v.max_keys == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("table ", model_->tables[table].name, " is not DYNAMIC"));
  }
  refresh_mu_.Lock();  // released by ~Update
  std::unique_ptr<Update> u(new Update(this));
  u->table_ = table;
  u->dynamic_ = true;
  u->n_ = static_cast<int64_t>(keys.size());
  u->m_ = static_cast<int64_t>(delete_keys.size());
  // Staging: keys | delete keys | rows | stats[2] | row of each key | upsert scratch.
  u->off_delete_ = Align256(8 * keys.size());
  u->off_rows_ = u->off_delete_ + Align256(8 * delete_keys.size());
  u->off_stats_ = u->off_rows_ + Align256(rows.size());
  u->off_rowidx_ = u->off_stats_ + Align256(2 * sizeof(kernels::DynamicStats));
  u->off_scratch_ = u->off_rowidx_ + Align256(8 * keys.size());
  u->scratch_bytes_ = kernels::cuda::DynamicUpsertScratchBytes(v.max_keys, u->n_);
  RANKD_RETURN_IF_CUDA_ERROR(cudaSetDevice(device_), "cudaSetDevice");
  absl::Status s = EnsureUpdateStaging(u->off_scratch_ + Align256(u->scratch_bytes_));
  if (s.ok() && update_counts_.bytes() == 0) {
    s = update_counts_.Allocate(2 * sizeof(kernels::DynamicStats), "update counts");
  }
  if (!s.ok()) return s;
  uint8_t* base = update_staging_.as<uint8_t>();
  const cudaStream_t st = refresh_stream_;
  if (u->n_ > 0) {
    RANKD_RETURN_IF_CUDA_ERROR(
        cudaMemcpyAsync(base, keys.data(), 8 * u->n_, cudaMemcpyHostToDevice, st),
        "copy update keys");
    RANKD_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(base + u->off_rows_, rows.data(), rows.size(),
                                               cudaMemcpyHostToDevice, st),
                               "copy update rows");
  }
  if (u->m_ > 0) {
    RANKD_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(base + u->off_delete_, delete_keys.data(),
                                               8 * u->m_, cudaMemcpyHostToDevice, st),
                               "copy keys to delete");
  }
  RANKD_RETURN_IF_CUDA_ERROR(
      cudaMemsetAsync(base + u->off_stats_, 0, 2 * sizeof(kernels::DynamicStats), st),
      "zero update stats");
  if (absl::Status s = SyncUpdateStream("copy update keys and rows"); !s.ok()) return s;
  return u;
}

absl::Status DeviceModel::Update::WaitForBatches() {
  absl::MutexLock lock(&dm_->events_mu_);
  for (cudaEvent_t e : dm_->batch_events_) {
    RANKD_RETURN_IF_CUDA_ERROR(cudaStreamWaitEvent(dm_->refresh_stream_, e, 0),
                               "order an update after the batches in flight");
  }
  return absl::OkStatus();
}

absl::Status DeviceModel::Update::Commit(uint64_t now) {
  if (committed_) return absl::FailedPreconditionError("update committed twice");
  RANKD_RETURN_IF_CUDA_ERROR(cudaSetDevice(dm_->device_), "cudaSetDevice");
  if (absl::Status s = WaitForBatches(); !s.ok()) return s;
  committed_ = true;  // from here the stream may read the staging buffer
  absl::Status s = dynamic_ ? CommitDynamic(now) : CommitStatic();
  if (!s.ok()) return s;
  // Batches enqueued from now on wait for the writes.
  return CudaStatus(cudaEventRecord(dm_->updates_done_, dm_->refresh_stream_),
                    "record the update's event");
}

absl::Status DeviceModel::Update::CommitStatic() {
  if (n_ == 0) return absl::OkStatus();
  const kernels::cuda::DeviceTable& d = dm_->table_descriptors_[table_];
  const int64_t row_bytes = dm_->model_->tables[table_].row_bytes();
  uint8_t* staging = dm_->update_staging_.as<uint8_t>();
  const auto* dev_ids = reinterpret_cast<const int64_t*>(staging);
  const uint8_t* dev_rows = staging + off_rows_;
  const cudaStream_t st = dm_->refresh_stream_;
  RANKD_RETURN_IF_CUDA_ERROR(kernels::cuda::LaunchScatterRows(const_cast<void*>(d.rows), row_bytes,
                                                              dev_ids, n_, dev_rows, st),
                             "scatter update rows");
  if (d.cache_slot != nullptr) {
    RANKD_RETURN_IF_CUDA_ERROR(
        kernels::cuda::LaunchCacheWriteThrough(d.cache_slot, const_cast<void*>(d.cache_rows),
                                               row_bytes, dev_ids, n_, dev_rows, st),
        "write updated rows through the cache");
  }
  return absl::OkStatus();
}

absl::Status DeviceModel::Update::CommitDynamic(uint64_t now) {
  const kernels::DynamicTableView& v = dm_->dynamic_[table_];
  const EmbeddingTable& t = dm_->model_->tables[table_];
  const kernels::cuda::DeviceTable& d = dm_->table_descriptors_[table_];
  uint8_t* base = dm_->update_staging_.as<uint8_t>();
  const auto* dev_keys = reinterpret_cast<const int64_t*>(base);
  const auto* dev_delete = reinterpret_cast<const int64_t*>(base + off_delete_);
  const uint8_t* dev_rows = base + off_rows_;
  auto* dev_stats = reinterpret_cast<kernels::DynamicStats*>(base + off_stats_);
  auto* dev_rowidx = reinterpret_cast<int64_t*>(base + off_rowidx_);
  const cudaStream_t st = dm_->refresh_stream_;
  RANKD_RETURN_IF_CUDA_ERROR(
      kernels::cuda::LaunchDynamicErase(v, dev_delete, m_, dev_stats, st), "erase keys");
  RANKD_RETURN_IF_CUDA_ERROR(
      kernels::cuda::LaunchDynamicUpsert(v, dev_keys, n_, dev_rows, t.eviction_policy(), now,
                                         base + off_scratch_, scratch_bytes_, dev_stats + 1,
                                         /*evicted_keys=*/nullptr, st),
      "upsert keys");
  if (n_ > 0 && d.cache_slot != nullptr) {
    // Rows freed by erases or evictions may be cached with their old bytes;
    // a key that now takes such a row must not be served them.
    RANKD_RETURN_IF_CUDA_ERROR(kernels::cuda::LaunchHashLookup(d.hash, dev_keys, n_, dev_rowidx, st),
                               "rows of the upserted keys");
    RANKD_RETURN_IF_CUDA_ERROR(
        kernels::cuda::LaunchCacheWriteThrough(d.cache_slot, const_cast<void*>(d.cache_rows),
                                               v.row_bytes, dev_rowidx, n_, dev_rows, st),
        "write upserted rows through the cache");
  }
  // Pinned destination: the copy does not block the caller (who holds the gate).
  RANKD_RETURN_IF_CUDA_ERROR(
      cudaMemcpyAsync(dm_->update_counts_.as<void>(), dev_stats,
                      2 * sizeof(kernels::DynamicStats), cudaMemcpyDeviceToHost, st),
      "update stats");
  return absl::OkStatus();
}

absl::Status DeviceModel::Update::Wait(kernels::DynamicStats* erased,
                                       kernels::DynamicStats* upserted) {
  *erased = {};
  *upserted = {};
  if (!committed_) return absl::FailedPreconditionError("update waited on before its commit");
  RANKD_RETURN_IF_CUDA_ERROR(cudaSetDevice(dm_->device_), "cudaSetDevice");
  const absl::Status s = dm_->SyncUpdateStream("apply an update");
  waited_ = true;
  if (!s.ok()) return s;
  if (dynamic_) {
    const auto* counts = dm_->update_counts_.as<kernels::DynamicStats>();
    *erased = counts[0];
    *upserted = counts[1];
  }
  return absl::OkStatus();
}

}  // namespace rankd::engine::cuda
