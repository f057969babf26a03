#include "server/request_conversion.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace rankd::server {

absl::StatusOr<engine::Request> ToEngineRequest(
    const engine::Model& model, const rankd::v1::ScoreRequest& request,
    const engine::RequestLimits& limits) {
  engine::Request out;
  out.num_candidates = request.num_candidates();
  out.dense = absl::MakeConstSpan(request.dense().data(), request.dense_size());
  out.features.resize(model.features.size());
  std::vector<int> seen_at(model.features.size(), -1);
  for (int i = 0; i < request.sparse_size(); ++i) {
    const rankd::v1::SparseFeature& sf = request.sparse(i);
    int f = -1;
    for (size_t k = 0; k < model.features.size(); ++k) {
      if (model.features[k].name == sf.name()) {
        f = static_cast<int>(k);
        break;
      }
    }
    if (f < 0) {
      std::vector<std::string> names;
      for (const auto& feature : model.features) names.push_back(feature.name);
      return absl::InvalidArgumentError(absl::StrCat(
          "sparse[", i, "].name: unknown feature \"", sf.name(), "\"; model \"",
          model.name, "\" has: ", absl::StrJoin(names, ", ")));
    }
    if (seen_at[f] >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sparse[", i, "].name: feature \"", sf.name(),
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
