// The rows of a model's HOST tables in page-locked host memory that every
// GPU reads directly (mapped + portable registration): one copy in host
// memory for every worker and GPU of the process.
//
// Rows that already sit in a page-aligned allocation of their own (tables
// initialised at load, `init: RANDOM`) are registered in place; rows that
// are views into the mapped weights file are first copied (all cores) into
// an anonymous mapping advised for transparent huge pages, which widens the
// GPU's address-translation reach over host memory. Before copying, the
// bytes are checked against the host's available memory, so running out is
// a clear error, not a failed allocation.
//
// Ownership: shared (std::shared_ptr) by the DeviceModels of all GPUs;
// unregisters and frees in its destructor. Immutable after Create.
#ifndef RANKD_ENGINE_CUDA_HOST_TABLES_H_
#define RANKD_ENGINE_CUDA_HOST_TABLES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/host_memory.h"
#include "engine/model/model.h"
#include "engine/model/placement_plan.h"

namespace rankd::engine::cuda {

class HostTables {
 public:
  static absl::StatusOr<std::shared_ptr<HostTables>> Create(std::shared_ptr<const Model> model,
                                                            const PlacementPlan& plan);
  ~HostTables();
  HostTables(const HostTables&) = delete;
  HostTables& operator=(const HostTables&) = delete;

  // Host pointer of table t's pinned rows (nullptr when t is not HOST).
  const void* rows(int table) const { return entries_[table].host; }
  // Its alias on the current CUDA device.
  absl::StatusOr<const void*> DevicePointer(int table) const;
  // Bytes pinned, and of those copied (the rest was registered in place).
  int64_t pinned_bytes() const { return pinned_bytes_; }
  int64_t copied_bytes() const { return copied_bytes_; }
  double copy_seconds() const { return copy_seconds_; }

 private:
  HostTables() = default;
  struct Entry {
    void* host = nullptr;
    int64_t bytes = 0;
    bool registered = false;
    // Registered ranges, each unregistered alone (RegisterInPieces).
    std::vector<void*> pieces;
    std::unique_ptr<HostAllocation> copy;  // our own copy, or null: registered in place
  };
  std::shared_ptr<const Model> model_;  // keeps in-place rows alive
  std::vector<Entry> entries_;
  int64_t pinned_bytes_ = 0;
  int64_t copied_bytes_ = 0;
  double copy_seconds_ = 0;
};

}  // namespace rankd::engine::cuda

#endif  // RANKD_ENGINE_CUDA_HOST_TABLES_H_
