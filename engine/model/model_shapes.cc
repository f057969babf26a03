#include "engine/model/model_shapes.h"

#include <cstdint>
#include <string>

namespace rankd::engine {

int DenseOutWidth(const rankd::v1::ModelConfig& config) {
  const int n = config.bottom_mlp_size();
  return n == 0 ? config.num_dense() : config.bottom_mlp(n - 1);
}

int FeatureDim(const rankd::v1::ModelConfig& config, int f) {
  const std::string& table = config.sparse_features(f).table();
  for (const rankd::v1::TableConfig& t : config.tables()) {
    if (t.name() == table) return t.dim();
  }
  return 0;
}

// int64: a config with absurd widths must produce an error message in
// validation, not an overflowed width.
int64_t InteractionWidth(const rankd::v1::ModelConfig& config) {
  const int64_t d = DenseOutWidth(config);
  const int64_t f = config.sparse_features_size();
  switch (config.interaction().kind()) {
    case rankd::v1::CAT: {
      int64_t width = d;
      for (int i = 0; i < f; ++i) width += FeatureDim(config, i);
      return width;
    }
    case rankd::v1::DCN_V2:
      return (1 + f) * d;
    case rankd::v1::DOT:
    default: {
      const int64_t n = 1 + f;
      return d + (config.interaction().self_interaction() ? n * (n + 1) / 2
                                                          : n * (n - 1) / 2);
    }
  }
}

}  // namespace rankd::engine
