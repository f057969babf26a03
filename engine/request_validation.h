// Checks a Request against a model before it is queued or computed. Every
// error is INVALID_ARGUMENT and names the field (wire names: num_candidates,
// dense, sparse feature "<name>".ids / .lengths / .weights) and the index.
#ifndef RANKD_ENGINE_REQUEST_VALIDATION_H_
#define RANKD_ENGINE_REQUEST_VALIDATION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "engine/model/model.h"
#include "engine/request.h"

namespace rankd::engine {

// Limits a deployment sets on top of the model's own (server flags).
struct RequestLimits {
  // Most candidates in one request; 0 = no limit.
  int32_t max_candidates = 0;
  // Most ids in one feature of one request; 0 = no limit.
  int64_t max_ids_per_feature = 0;
  // Largest |value| of a dense feature or a per-id weight; 0 = no bound
  // (values must still be finite). Finite but huge inputs (dense 3e38,
  // weights 1e30) overflow the model's float32 arithmetic to Inf / NaN;
  // bounding them refuses such requests up front, naming the field. It is
  // not a proof against overflow (that depends on the model's weights):
  // the serving path also refuses any non-finite score (ModelInstance).
  float max_abs_input = 0;
};

// Checks: num_candidates in [1, max]; dense has num_candidates * num_dense
// finite values; one input per model feature; lengths has num_candidates
// entries (or 1; exactly 1 for request-level features), none negative, none
// over the feature's max_ids_per_bag; ids count = sum of lengths and within
// max_ids_per_feature; weights empty or one finite value per id; dense
// values and weights within max_abs_input; ids of tables with the ERROR
// policy resolve (in range / key stored).
absl::Status ValidateRequest(const Model& model, const Request& request,
                             const RequestLimits& limits = {});

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_REQUEST_VALIDATION_H_
