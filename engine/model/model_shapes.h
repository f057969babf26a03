// Widths derived from a model config, shared by validation, the tensor layout,
// the loader and tools that generate models, so they can never disagree.
#ifndef RANKD_ENGINE_MODEL_MODEL_SHAPES_H_
#define RANKD_ENGINE_MODEL_MODEL_SHAPES_H_

#include "rankd/v1/model_config.pb.h"

namespace rankd::engine {

// Width of x: the bottom MLP's last width, or num_dense without a bottom MLP.
int DenseOutWidth(const rankd::v1::ModelConfig& config);

// Embedding width of sparse feature `f` (its table's dim); 0 if the feature
// names no table of the config.
int FeatureDim(const rankd::v1::ModelConfig& config, int f);

// Width of the interaction output (= the top MLP's input), assuming a config
// that passed ValidateModelConfig (so defaults are filled and dims agree):
//   DOT:    d + n*(n-1)/2, n = 1 + F   (n*(n+1)/2 with self_interaction)
//   CAT:    DenseOutWidth + sum of the features' dims
//   DCN_V2: (1 + F) * d
// with F = number of sparse features and d = DenseOutWidth (= every dim).
int64_t InteractionWidth(const rankd::v1::ModelConfig& config);

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_MODEL_MODEL_SHAPES_H_
