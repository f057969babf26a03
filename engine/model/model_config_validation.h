// Checks of a model config on its own (no weights), behind ValidateModelConfig
// (model_loader.h). Split out so ReadModelConfig can prefix each error with the
// file path.
#ifndef RANKD_ENGINE_MODEL_MODEL_CONFIG_VALIDATION_H_
#define RANKD_ENGINE_MODEL_MODEL_CONFIG_VALIDATION_H_

#include "engine/model/error_list.h"
#include "rankd/v1/model_config.pb.h"

namespace rankd::engine {

// Fills defaults, then appends one "<field>: <reason>" line per problem.
void CheckModelConfig(rankd::v1::ModelConfig* config, ErrorList* errors);

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_MODEL_MODEL_CONFIG_VALIDATION_H_
