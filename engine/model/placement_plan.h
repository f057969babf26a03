// Where each embedding table of a model lives on a GPU: in device memory
// (HBM), or in pinned host memory read by the GPU (HOST) behind an HBM cache
// of hot rows, within a device-memory budget. Computed from the config alone
// (no weights), so `rankd inspect` prints the same plan `rankd serve` loads,
// and a plan that cannot fit is refused before anything is allocated.
//
// What always takes device memory: the dense weights (MLPs, cross layers),
// the key and row-index arrays of DYNAMIC tables (16 bytes a slot), and the
// rows of tables placed DEVICE. What the budget has left goes to AUTO tables,
// smallest first, as whole tables in HBM (a table in HBM never misses); the
// AUTO tables that do not fit become HOST. What is left then goes to the HOST
// tables' caches: each cached table needs a slot map (4 bytes a row) plus its
// cached rows, and every HOST table caches the same fraction of its rows.
// The CUDA backend pools the cached rows of HOST tables with the same row
// size into one cache (engine/cuda/embedding_cache.h): the plan's per-table
// rows are then each table's warm-start share, and the HBM total is the same.
#ifndef RANKD_ENGINE_MODEL_PLACEMENT_PLAN_H_
#define RANKD_ENGINE_MODEL_PLACEMENT_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/model/model.h"
#include "rankd/v1/model_config.pb.h"

namespace rankd::engine {

// --device_memory_budget: "" (default: whatever the GPU has free, minus the
// workers' reserve), bytes with an optional K/M/G/T (powers of 1024, "B" and
// "iB" accepted: "8G", "8GiB", "512M", "1073741824"), or a fraction of the
// GPU's total memory in (0, 1] ("0.25"). Errors name the flag and the value.
struct MemoryBudget {
  int64_t bytes = 0;      // > 0: absolute
  double fraction = 0.0;  // > 0: of the GPU's total memory
  bool unset() const { return bytes <= 0 && fraction <= 0.0; }
  // Bytes for a GPU with `total_bytes` of memory and `available_bytes` usable
  // now (free minus reserve): an unset budget is `available_bytes`.
  int64_t Resolve(int64_t total_bytes, int64_t available_bytes) const;
  std::string ToString() const;
};
absl::StatusOr<MemoryBudget> ParseMemoryBudget(absl::string_view flag, absl::string_view value);

enum class Tier { kDevice, kHost };

struct TablePlan {
  std::string name;
  rankd::v1::Placement requested = rankd::v1::AUTO;
  Tier tier = Tier::kDevice;
  int64_t row_bytes = 0;    // bytes of one row
  int64_t rows_bytes = 0;   // all rows (in HBM for kDevice, host memory for kHost)
  int64_t index_bytes = 0;  // DYNAMIC: key + row-index arrays, always in HBM
  // kHost only: rows kept in the HBM cache, and the cache's HBM bytes (slot
  // map + cached rows); 0 = every lookup reads host memory.
  int64_t cache_rows = 0;
  int64_t cache_bytes = 0;
  int64_t device_bytes() const {
    return index_bytes + (tier == Tier::kDevice ? rows_bytes : cache_bytes);
  }
};

struct PlacementPlan {
  int64_t budget_bytes = 0;
  int64_t dense_bytes = 0;  // MLP and cross weights (fp32)
  std::vector<TablePlan> tables;  // config order
  int64_t device_bytes() const;   // everything this plan puts in HBM
  int64_t host_bytes() const;     // rows of HOST tables (pinned host memory)
  bool any_host() const;
  // A table of per-table lines for logs and `rankd inspect`.
  std::string Describe() const;
};

// What the planner needs of a model: its tables' shapes and its dense bytes.
struct PlanInput {
  std::string model;
  int64_t dense_bytes = 0;
  struct Table {
    std::string name;
    rankd::v1::Placement placement = rankd::v1::AUTO;
    int64_t num_rows = 0;
    int64_t row_bytes = 0;
    int64_t index_slots = 0;  // DYNAMIC: hash slots (16 bytes each in HBM); 0 = STATIC
    // DYNAMIC: keys the table may hold (num_rows is then max_keys: rows are
    // allocated for all of them); each also has a row key, a score and a
    // free-list entry in HBM (24 bytes).
    int64_t max_keys = 0;
  };
  std::vector<Table> tables;
};
// From a config (validated, defaults filled), e.g. for `rankd inspect`.
PlanInput PlanInputFromConfig(const rankd::v1::ModelConfig& config);
// From a loaded model (what the CUDA backend uploads).
PlanInput PlanInputFromModel(const Model& model);

// Plans within `budget_bytes` of device memory. RESOURCE_EXHAUSTED, with the
// numbers, when what must be in HBM (dense weights, DEVICE tables, dynamic
// indexes) exceeds the budget.
absl::StatusOr<PlacementPlan> PlanPlacement(const PlanInput& input, int64_t budget_bytes);
inline absl::StatusOr<PlacementPlan> PlanPlacement(const rankd::v1::ModelConfig& config,
                                                   int64_t budget_bytes) {
  return PlanPlacement(PlanInputFromConfig(config), budget_bytes);
}

// Dense (MLP + cross) weight bytes of a config, fp32.
int64_t DenseWeightBytes(const rankd::v1::ModelConfig& config);

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_MODEL_PLACEMENT_PLAN_H_
