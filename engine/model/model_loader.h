// Loads model versions from disk: `<dir>/model.pbtxt` (text rankd.v1.ModelConfig)
// and `<dir>/weights.safetensors` (tensors named as in docs/model-format.md).
// Every problem is an absl::Status that names the file, the field or tensor,
// and what was expected.
#ifndef RANKD_ENGINE_MODEL_MODEL_LOADER_H_
#define RANKD_ENGINE_MODEL_MODEL_LOADER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model.h"
#include "rankd/v1/model_config.pb.h"

namespace rankd::engine {

// Parses text-format `path` into a config, fills defaults and validates it
// (ValidateModelConfig). INVALID_ARGUMENT with "<path>:<line>:<col>: ..." for a
// syntax error, or "<path>: <field>: <reason>" for a semantic one.
absl::StatusOr<rankd::v1::ModelConfig> ReadModelConfig(const std::string& path);

// Fills defaults (documented in model_config.proto) and checks the config on
// its own: unique names, widths > 0, features name known tables, DOT/DCN_V2
// dims agree, top MLP ends in 1, etc. Errors name the field, e.g.
// "tables[2].dim: must be > 0, got 0".
absl::Status ValidateModelConfig(rankd::v1::ModelConfig* config);

// Loads one version directory. `expected_name` (if not empty) must equal the
// config's name. Tables are mapped from the file, not copied, when their
// dtype matches.
absl::StatusOr<std::shared_ptr<const Model>> LoadModel(
    const std::string& directory, int64_t version = 0,
    const std::string& expected_name = "");

// One model version found under a model root.
struct ModelVersionPath {
  std::string name;
  int64_t version = 0;
  std::string directory;
};

// Lists `<root>/<name>/<version>/` directories (version = positive integer
// directory name; other entries are ignored with no error). Sorted by name,
// then version ascending. NOT_FOUND if root does not exist.
absl::StatusOr<std::vector<ModelVersionPath>> ListModelVersions(
    const std::string& root);

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_MODEL_MODEL_LOADER_H_
