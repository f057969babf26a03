// The tensors a model's weights.safetensors must hold, by name, dtype and
// shape (docs/model-format.md). One source of truth for the loader and for
// tools that write model files, so the two cannot drift apart.
//
// DOT and CAT models use facebookresearch/dlrm DLRM_Net state_dict names
// (emb_l.{k}.weight, bot_l.{2i}.weight, top_l.{2i}.bias, ...); DCN_V2 models
// use TorchRec DLRM_DCN names (dense_arch..., sparse_arch...,
// inter_arch.crossnet..., over_arch...).
#ifndef RANKD_ENGINE_MODEL_TENSOR_LAYOUT_H_
#define RANKD_ENGINE_MODEL_TENSOR_LAYOUT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/model/safetensors.h"
#include "rankd/v1/model_config.pb.h"

namespace rankd::engine {

struct TensorSpec {
  std::string name;
  TensorDtype dtype = TensorDtype::kF32;
  std::vector<int64_t> shape;
  // Also accept `shape` with a trailing 1 appended (the crossnet bias is
  // [N] in TorchRec, [N, 1] in some exports).
  bool allow_trailing_one = false;
};

struct LinearTensors {
  TensorSpec weight;  // F32 [out, in]
  TensorSpec bias;    // F32 [out]
};

struct TableTensors {
  TensorSpec weight;                // [num_rows, dim] of the table's dtype
  std::optional<TensorSpec> keys;  // DYNAMIC only: I64 [num_rows]
  // False for `init { kind: RANDOM }` tables: their rows (and keys) are made
  // at load, and the file must not hold these tensors.
  bool in_file = true;
};

struct CrossTensors {
  TensorSpec v;     // F32 [rank, N]
  TensorSpec w;     // F32 [N, rank]
  TensorSpec bias;  // F32 [N] (or [N, 1])
};

struct ModelTensorLayout {
  std::vector<TableTensors> tables;  // config table order
  std::vector<LinearTensors> bottom;
  std::vector<CrossTensors> cross;  // DCN_V2 only
  std::vector<LinearTensors> top;

  // Every tensor the file holds, in file-listing order (tables, bottom,
  // cross, top): the specs above except those of RANDOM tables.
  std::vector<const TensorSpec*> All() const;
};

// For a config that passed ValidateModelConfig.
ModelTensorLayout ExpectedTensorLayout(const rankd::v1::ModelConfig& config);

// safetensors dtype of a table's rows.
TensorDtype TableTensorDtype(rankd::v1::DataType dtype);

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_MODEL_TENSOR_LAYOUT_H_
