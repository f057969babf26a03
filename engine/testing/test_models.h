// Test helpers: small random models built in memory (no files) and random
// requests for them. Inputs are never zeros (MODELS.md / METHOD.md: zeros hide
// unwritten outputs and wrong indexing).
#ifndef RANKD_ENGINE_TESTING_TEST_MODELS_H_
#define RANKD_ENGINE_TESTING_TEST_MODELS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/model/model.h"
#include "engine/request.h"
#include "kernels/cpu/types.h"
#include "rankd/v1/model_config.pb.h"

namespace rankd::engine::testing {

struct RandomModelSpec {
  rankd::v1::InteractionKind interaction = rankd::v1::DOT;
  bool self_interaction = false;
  int num_dense = 5;
  int dim = 4;
  std::vector<int64_t> table_rows = {7, 11, 13};
  // CAT only: per-table dims (empty = all `dim`).
  std::vector<int> cat_dims;
  kernels::RowType row_type = kernels::RowType::kFp32;
  kernels::Pooling pooling = kernels::Pooling::kSum;
  // Tables with these indices are DYNAMIC (random int64 keys).
  std::vector<int> dynamic_tables;
  rankd::v1::IdPolicy id_policy = rankd::v1::ERROR;
  bool default_vector = false;  // give ZERO-policy tables a random default
  std::vector<int> bottom = {8};  // hidden widths; the last (dim) is appended
  std::vector<int> top = {6};     // hidden widths; the final 1 is appended
  int dcn_layers = 2;
  int dcn_rank = 3;
  // Features with these indices are request-level.
  std::vector<int> request_level_features;
  uint64_t seed = 1;
};

std::shared_ptr<Model> MakeRandomModel(const RandomModelSpec& spec);

// Gives DYNAMIC table `table` of `m` room for `max_keys` keys (its rows and
// keys copied into buffers of that size, hash slots for 2 * max_keys) and
// its update state (AttachDynamicState), as LoadModel does for max_keys.
void MakeTableGrowable(Model* m, int table, int64_t max_keys,
                       rankd::v1::Eviction eviction = rankd::v1::LRU);

// A request that owns its arrays; view() gives the engine's Request.
struct OwnedRequest {
  int32_t num_candidates = 0;
  std::vector<float> dense;
  std::vector<std::vector<int64_t>> ids;
  std::vector<std::vector<int32_t>> lengths;
  std::vector<std::vector<float>> weights;
  Request view() const;
};

struct RandomRequestSpec {
  int32_t num_candidates = 4;
  int min_bag = 0;               // bag sizes in [min_bag, max_bag]
  int max_bag = 3;
  bool weighted = false;
  bool share_all_bags = false;   // every feature sends a single shared bag
  double unresolved_fraction = 0;  // ids that do not resolve (ZERO policy)
  uint64_t seed = 2;
};

OwnedRequest MakeRandomRequest(const Model& model, const RandomRequestSpec& spec);

}  // namespace rankd::engine::testing

#endif  // RANKD_ENGINE_TESTING_TEST_MODELS_H_
