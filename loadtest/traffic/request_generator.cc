#include "loadtest/traffic/request_generator.h"

#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "loadtest/traffic/zipf.h"

namespace rankd::loadtest {

absl::StatusOr<RequestPool> GenerateRequests(const rankd::v1::ModelInfo& model,
                                             const GeneratorOptions& options) {
  if (options.pool_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("pool_size: must be >= 1, got ", options.pool_size));
  }
  if (options.ids_per_bag < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("ids_per_bag: must be >= 1, got ", options.ids_per_bag));
  }
  if (model.num_dense() < 0 || (model.num_dense() == 0 && model.features_size() == 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model \"", model.name(), "\": ModelInfo describes no inputs"));
  }
  std::set<std::string> names;
  for (const auto& f : model.features()) names.insert(f.name());
  for (const auto& s : options.shared_features) {
    if (!names.count(s)) {
      return absl::InvalidArgumentError(
          absl::StrCat("shared_features: model \"", model.name(), "\" has no feature \"", s, "\""));
    }
  }
  for (const auto& [name, n] : options.ids_per_bag_by_feature) {
    if (n < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("ids_per_bag_by_feature: feature \"", name, "\": must be >= 1, got ", n));
    }
  }

  struct FeaturePlan {
    const rankd::v1::ModelInfo::Feature* info;
    bool shared;
    int per_bag;
    ZipfSampler zipf;
    IdScatter scatter;
  };
  std::vector<FeaturePlan> plans;
  for (const auto& f : model.features()) {
    if (f.num_rows() < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("model \"", model.name(), "\": feature \"", f.name(), "\" has no rows"));
    }
    auto zipf = ZipfSampler::Create(f.num_rows(), options.zipf_alpha);
    if (!zipf.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("zipf_alpha: ", zipf.status().message()));
    }
    auto it = options.ids_per_bag_by_feature.find(f.name());
    plans.push_back(FeaturePlan{&f, f.request_level() || options.shared_features.count(f.name()) > 0,
                                it != options.ids_per_bag_by_feature.end() ? it->second
                                                                           : options.ids_per_bag,
                                *zipf, IdScatter(f.num_rows())});
  }

  std::mt19937_64 rng(options.seed);
  std::uniform_real_distribution<float> dense(0.0f, 4.0f);
  RequestPool pool;
  pool.reserve(options.pool_size);
  for (int r = 0; r < options.pool_size; ++r) {
    auto req = std::make_shared<rankd::v1::ScoreRequest>();
    const int b = options.candidates.Sample(rng);
    req->set_model(model.name());
    req->set_version(options.version);
    req->set_version_label(options.version_label);
    req->set_num_candidates(b);
    req->mutable_dense()->Reserve(b * model.num_dense());
    for (int i = 0; i < b * model.num_dense(); ++i) req->add_dense(dense(rng));
    for (const FeaturePlan& p : plans) {
      rankd::v1::SparseFeature* sf = req->add_sparse();
      sf->set_name(p.info->name());
      const int bags = p.shared ? 1 : b;
      sf->mutable_lengths()->Reserve(bags);
      sf->mutable_ids()->Reserve(bags * p.per_bag);
      for (int g = 0; g < bags; ++g) {
        sf->add_lengths(p.per_bag);
        for (int i = 0; i < p.per_bag; ++i) sf->add_ids(p.scatter(p.zipf(rng)));
      }
    }
    pool.push_back(std::move(req));
  }
  return pool;
}

}  // namespace rankd::loadtest
