// The engine's own request type: what a model needs to score one request's
// candidates. It holds views (no copies) into memory the caller owns (for the
// server, the decoded ScoreRequest message), so the caller keeps that memory
// alive until scoring finishes. The engine never sees wire messages.
#ifndef RANKD_ENGINE_REQUEST_H_
#define RANKD_ENGINE_REQUEST_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace rankd::engine {

// One sparse feature's bags for a request.
struct FeatureInput {
  absl::Span<const int64_t> ids;      // bags concatenated
  // num_candidates entries, or one entry: a single bag shared by all
  // candidates (request-level features must send exactly one).
  absl::Span<const int32_t> lengths;
  absl::Span<const float> weights;    // empty = unweighted, else one per id
};

struct Request {
  int32_t num_candidates = 0;
  absl::Span<const float> dense;       // num_candidates x num_dense, row-major
  // Indexed like Model::features (config order), one entry per feature.
  std::vector<FeatureInput> features;
};

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_REQUEST_H_
