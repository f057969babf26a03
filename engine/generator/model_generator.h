// Writes model version directories with random weights in the exact shapes of
// the reference presets (mini, kaggle, terabyte, mlperf; docs/model-format.md):
// `rankd gen-model`. Weights follow DLRM_Net's initialisation (embeddings
// U(-1/sqrt(rows), 1/sqrt(rows)), linear weights N(0, sqrt(2/(in+out))), biases
// N(0, sqrt(1/out))) so scores are spread out, not saturated. Deterministic:
// the same options give the same bytes on every machine (counter-based random
// numbers, per tensor).
#ifndef RANKD_ENGINE_GENERATOR_MODEL_GENERATOR_H_
#define RANKD_ENGINE_GENERATOR_MODEL_GENERATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rankd/v1/model_config.pb.h"

namespace rankd::engine {

struct GenerateOptions {
  // mini | kaggle | terabyte | mlperf.
  std::string preset = "mini";
  // Model name; empty = the preset's name.
  std::string name;
  // Multiplies every table's row count (rounded, at least 1); (0, 1] shrinks
  // big presets to fit small machines.
  double scale = 1.0;
  uint64_t seed = 1;
  // Row storage type of every table.
  rankd::v1::DataType dtype = rankd::v1::FP32;
  // mini only: number of tables for the n_sparse sweep (3 to 16); 0 = 3.
  int num_tables = 0;
  // Make the N largest tables DYNAMIC (random unique int64 keys).
  int dynamic_tables = 0;
  // FILE: every table's rows (and keys) are written to weights.safetensors.
  // RANDOM: tables get `init { kind: RANDOM seed: <seed> }` and the file
  // holds only the dense weights, so a full-size preset (mlperf: 52 GB of
  // fp16 rows) is written in seconds; the loader generates the rows.
  rankd::v1::TableInitKind init = rankd::v1::FILE;
  // Layer widths of the bottom / top MLP in place of the preset's (empty =
  // the preset's). The bottom MLP's last width must be the preset's embedding
  // dim, the top MLP's last 1; the top MLP's input width follows from the
  // interaction as always. Each width is in [1, kMaxGeneratedWidth], at most
  // kMaxGeneratedLayers of them. For
  // models heavier on the GPU than the presets (overload tests of a GPU-bound
  // server, wide-MLP rankers).
  std::vector<int> bottom_mlp;
  std::vector<int> top_mlp;
};

// Largest MLP width GenerateOptions::bottom_mlp / top_mlp take, and most
// layers of each.
inline constexpr int kMaxGeneratedWidth = 65536;
inline constexpr size_t kMaxGeneratedLayers = 64;

// The preset's config (validated, defaults not yet filled).
absl::StatusOr<rankd::v1::ModelConfig> PresetConfig(const GenerateOptions& options);

// Preset names, for help texts.
std::vector<std::string> PresetNames();

// Writes `<out_dir>/model.pbtxt` and `<out_dir>/weights.safetensors`,
// creating out_dir (and parents) as needed. Streams big tables in chunks.
absl::Status GenerateModel(const GenerateOptions& options, const std::string& out_dir);

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_GENERATOR_MODEL_GENERATOR_H_
