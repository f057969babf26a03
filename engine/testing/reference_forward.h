// An independent, deliberately plain double-precision forward pass over a
// Model, for tests: no Eigen, no kernels, loops written from the definitions
// in DESIGN.md and model_config.proto. Engines are compared against it.
#ifndef RANKD_ENGINE_TESTING_REFERENCE_FORWARD_H_
#define RANKD_ENGINE_TESTING_REFERENCE_FORWARD_H_

#include <vector>

#include "engine/model/model.h"
#include "engine/request.h"

namespace rankd::engine::testing {

// Probabilities for every candidate (sigmoid of the logit), and the logits.
struct ReferenceResult {
  std::vector<double> scores;
  std::vector<double> logits;
};

ReferenceResult ReferenceForward(const Model& model, const Request& request);

}  // namespace rankd::engine::testing

#endif  // RANKD_ENGINE_TESTING_REFERENCE_FORWARD_H_
