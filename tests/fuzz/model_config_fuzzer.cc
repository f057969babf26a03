// Fuzz target: model.pbtxt text -> text-format parse, defaults and
// validation (engine/model/model_loader.h, ParseModelConfig). A config the
// validation accepts must stay accepted, unchanged, when validated again
// (filling defaults is idempotent), and its derived widths
// (model_shapes.h), which the loader sizes tensors from, must be positive
// (the dense part may be empty in a CAT model without a bottom MLP).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "engine/model/model_loader.h"
#include "engine/model/model_shapes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // ReadModelConfig refuses bigger files before parsing.
  if (size > static_cast<size_t>(rankd::engine::kMaxModelConfigBytes)) return 0;
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<rankd::v1::ModelConfig> config =
      rankd::engine::ParseModelConfig(text, "fuzz/model.pbtxt");
  if (!config.ok()) {
    if (config.status().code() != absl::StatusCode::kInvalidArgument) {
      std::fprintf(stderr, "parse error is not INVALID_ARGUMENT: %s\n",
                   config.status().ToString().c_str());
      std::abort();
    }
    return 0;
  }
  rankd::v1::ModelConfig again = *config;
  absl::Status revalidated = rankd::engine::ValidateModelConfig(&again);
  if (!revalidated.ok()) {
    std::fprintf(stderr, "an accepted config fails validation again: %s\n",
                 revalidated.ToString().c_str());
    std::abort();
  }
  if (again.SerializeAsString() != config->SerializeAsString()) {
    std::fprintf(stderr, "validating an accepted config again changed it\n");
    std::abort();
  }
  // The dense part may be empty only in a CAT model without a bottom MLP
  // (sparse features alone, as tests/reference/selftest.py's "CAT no dense"
  // case serves); everything else stacks or feeds x and needs it.
  const int dense = rankd::engine::DenseOutWidth(*config);
  const bool dense_may_be_empty =
      config->interaction().kind() == rankd::v1::CAT && config->bottom_mlp().empty();
  if (dense < 0 || (dense == 0 && !dense_may_be_empty) ||
      rankd::engine::InteractionWidth(*config) <= 0) {
    std::fprintf(stderr, "an accepted config has a non-positive width\n");
    std::abort();
  }
  return 0;
}
