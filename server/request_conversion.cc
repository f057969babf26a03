#include "server/request_conversion.h"

#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/model/error_text.h"

namespace rankd::server {

absl::StatusOr<engine::Request> ToEngineRequest(
    const engine::Model& model, const rankd::v1::ScoreRequest& request,
    const engine::RequestLimits& limits) {
  engine::Request out;
  out.num_candidates = request.num_candidates();
  out.dense = absl::MakeConstSpan(request.dense().data(), request.dense_size());
  out.features.resize(model.features.size());
  // On the stack for every model up to 64 features (no allocation per
  // request on the hot path).
  absl::InlinedVector<int, 64> seen_at(model.features.size(), -1);
  const int num_features = static_cast<int>(model.features.size());
  for (int i = 0; i < request.sparse_size(); ++i) {
    const rankd::v1::SparseFeature& sf = request.sparse(i);
    int f = -1;
    // Clients (rankload, gen-requests, the client library) send features in
    // config order: try position i first, one compare instead of a scan.
    if (i < num_features && model.features[i].name == sf.name()) {
      f = i;
    } else {
      for (int k = 0; k < num_features; ++k) {
        if (model.features[k].name == sf.name()) {
          f = k;
          break;
        }
      }
    }
    if (f < 0) {
      std::vector<std::string> names;
      for (const auto& feature : model.features) names.push_back(feature.name);
      return absl::InvalidArgumentError(absl::StrCat(
          "sparse[", i, "].name: unknown feature \"", engine::TruncateForError(sf.name()),
          "\"; model \"", model.name, "\" has: ",
          engine::TruncateForError(absl::StrJoin(names, ", "), 4 * engine::kMaxQuotedBytes)));
    }
    if (seen_at[f] >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sparse[", i, "].name: feature \"", engine::TruncateForError(sf.name()),
          "\" appears twice (also sparse[", seen_at[f], "])"));
    }
    seen_at[f] = i;
    out.features[f] = engine::FeatureInput{
        absl::MakeConstSpan(sf.ids().data(), sf.ids_size()),
        absl::MakeConstSpan(sf.lengths().data(), sf.lengths_size()),
        absl::MakeConstSpan(sf.weights().data(), sf.weights_size())};
  }
  for (size_t f = 0; f < model.features.size(); ++f) {
    if (seen_at[f] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sparse: feature \"", model.features[f].name,
          "\" is missing (every sparse feature of the model must be sent)"));
    }
  }
  absl::Status valid = engine::ValidateRequest(model, out, limits);
  if (!valid.ok()) return valid;
  return out;
}

}  // namespace rankd::server
