// CudaTableStore: the CUDA backend's TableStore (engine/updates): a model
// version's tables on every GPU it serves on. Each GPU is updated in place:
// STATIC rows in HBM, or in pinned host memory written by the GPU, plus their
// HBM cache slots (DeviceModel::WriteStaticRows); DYNAMIC tables by the GPU
// insert / erase / evict kernels (DeviceModel::ApplyDynamic). Snapshots read
// the first GPU.
//
// Each GPU keeps its own eviction scores (its lookups touch them), so with
// several GPUs a full table may evict different keys on each; the result
// reported is the first GPU's. DYNAMIC tables with id_policy ERROR refuse
// updates (FAILED_PRECONDITION): requests are validated against the host
// hash table built at load, which updates do not change on this backend.
//
// Updates are ordered on each GPU (DeviceModel::Update): Prepare copies the
// delta to every GPU, Commit enqueues the writes behind the batches already
// enqueued there, Wait waits for them. Apply runs all three (tests).
//
// Threading: TableStore's (LiveTables serializes calls and holds the gate).
#ifndef RANKD_ENGINE_CUDA_CUDA_TABLE_STORE_H_
#define RANKD_ENGINE_CUDA_CUDA_TABLE_STORE_H_

#include <memory>
#include <vector>

#include "engine/cuda/device_model.h"
#include "engine/updates/table_store.h"

namespace rankd::engine::cuda {

class CudaTableStore final : public TableStore {
 public:
  explicit CudaTableStore(std::vector<std::shared_ptr<const DeviceModel>> devices)
      : devices_(std::move(devices)) {}

  absl::Status Apply(const TableDelta& delta, uint64_t now, DeltaResult* result) override;
  absl::StatusOr<std::unique_ptr<Update>> Prepare(const TableDelta& delta) override;
  absl::Status ReadTable(int table, const TableSink& sink) const override;

 private:
  absl::Status ReadDynamic(int table, const TableSink& sink) const;

  const std::vector<std::shared_ptr<const DeviceModel>> devices_;
};

}  // namespace rankd::engine::cuda

#endif  // RANKD_ENGINE_CUDA_CUDA_TABLE_STORE_H_
