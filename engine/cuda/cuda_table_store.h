// CudaTableStore: the CUDA backend's TableStore (engine/updates): a model
// version's tables on every GPU it serves on. STATIC tables are updated in
// place on each GPU (rows in HBM, or in pinned host memory written by the GPU,
// plus their HBM cache slots) and read back for snapshots from the first
// GPU. DYNAMIC tables keep their hash state on the GPU, where online inserts
// and evictions are not wired yet: updates and snapshots of them answer
// FAILED_PRECONDITION naming the table (the CPU backend supports them).
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
  absl::Status ReadTable(int table, const TableSink& sink) const override;

 private:
  const std::vector<std::shared_ptr<const DeviceModel>> devices_;
};

}  // namespace rankd::engine::cuda

#endif  // RANKD_ENGINE_CUDA_CUDA_TABLE_STORE_H_
