// Synthetic ScoreRequests for a served model, from its ModelInfo (what
// `GetModelInfo` answers: features, tables, rows, dense width), so rankload
// needs nothing but the server to generate traffic.
//
// Per request: the candidate count from a CandidateCount; dense values uniform
// in [0, 4); per sparse feature one bag per candidate, or a single shared bag
// (`lengths` = [n]) for request-level features and for those named in
// `shared_features` (user features a ranking service sends once); bag sizes
// from `ids_per_bag` / `ids_per_bag_by_feature`; ids are Zipf(alpha) ranks
// over the table's rows, scattered over the table (zipf.h). Tables sharing a
// name share the popularity order.
//
// DYNAMIC tables: ModelInfo does not carry the stored keys, so generated keys
// are rank-scattered values in [0, rows) which the table will mostly not hold
// (counted by rankd_ids_missing_total, pooled as the default vector). For
// realistic hit rates replay requests from `rankd gen-requests` instead.
//
// The pool is generated once, before the run, so that generation never sits
// on the sending path; the driver cycles through it.
#ifndef RANKD_LOADTEST_TRAFFIC_REQUEST_GENERATOR_H_
#define RANKD_LOADTEST_TRAFFIC_REQUEST_GENERATOR_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "loadtest/traffic/candidate_count.h"
#include "rankd/v1/ranking.pb.h"

namespace rankd::loadtest {

using RequestPool = std::vector<std::shared_ptr<const rankd::v1::ScoreRequest>>;

struct GeneratorOptions {
  // Model version sent in every request; 0 = the newest (or version_label's).
  int64_t version = 0;
  // Version label sent in every request ("" = none); the server reads it
  // only when version is 0.
  std::string version_label;
  CandidateCount candidates = CandidateCount::Fixed(1);
  // Zipf exponent of id popularity; 0 = uniform ids.
  double zipf_alpha = 1.05;
  // Ids per bag for features not in ids_per_bag_by_feature; >= 1.
  int ids_per_bag = 1;
  // Per-feature bag sizes (e.g. model.pbtxt's typical_ids_per_bag); >= 1 each.
  std::map<std::string, int> ids_per_bag_by_feature;
  // Per-candidate features sent as one bag shared by all candidates.
  std::set<std::string> shared_features;
  // Distinct requests generated; the driver cycles through them. >= 1.
  int pool_size = 1000;
  uint64_t seed = 1;
};

// INVALID_ARGUMENT naming the option for bad options, a shared feature the
// model lacks, or a model without features/dense inputs described.
absl::StatusOr<RequestPool> GenerateRequests(const rankd::v1::ModelInfo& model,
                                             const GeneratorOptions& options);

}  // namespace rankd::loadtest

#endif  // RANKD_LOADTEST_TRAFFIC_REQUEST_GENERATOR_H_
