// rankd gen-requests: synthetic ScoreRequest JSON lines for a model, with
// Zipf-distributed ids (MODELS.md: alpha 1.05 and 1.2) so caches see skew.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/random/zipf_distribution.h"
#include "engine/model/model_loader.h"
#include "google/protobuf/util/json_util.h"
#include "rankd/v1/ranking.pb.h"
#include "server/tools/commands.h"

ABSL_DECLARE_FLAG(std::string, model);
ABSL_DECLARE_FLAG(uint64_t, seed);
ABSL_FLAG(int64_t, count, 100, "gen-requests: number of requests");
ABSL_FLAG(int, candidates, 64, "gen-requests: candidates per request");
ABSL_FLAG(double, zipf, 1.05,
          "gen-requests: Zipf exponent of id popularity (> 1), or 0 for uniform ids");
ABSL_FLAG(int, bag_size, 0,
          "gen-requests: ids per bag; 0 = each feature's typical_ids_per_bag");
ABSL_FLAG(bool, weighted, false, "gen-requests: add per-id weights in [0.5, 1.5)");
ABSL_DECLARE_FLAG(std::string, output);

namespace rankd::server {
namespace {

// Popularity rank -> row through an affine bijection, so hot rows are spread
// over the table instead of being rows 0, 1, 2, ...
struct RankToRow {
  explicit RankToRow(int64_t rows) : rows(rows) {
    mult = static_cast<int64_t>(rows * 0.6180339887) | 1;
    while (std::gcd(mult, rows) != 1) mult += 2;
    mult %= rows;
    if (mult == 0) mult = 1;
  }
  int64_t operator()(int64_t rank) const {
    return static_cast<int64_t>((static_cast<__int128>(rank) * mult + rows / 3) % rows);
  }
  int64_t rows;
  int64_t mult;
};

}  // namespace

int RunGenRequests() {
  const std::string dir = absl::GetFlag(FLAGS_model);
  const int64_t count = absl::GetFlag(FLAGS_count);
  const int candidates = absl::GetFlag(FLAGS_candidates);
  const double zipf = absl::GetFlag(FLAGS_zipf);
  const int bag_size = absl::GetFlag(FLAGS_bag_size);
  if (dir.empty()) {
    std::cerr << "rankd gen-requests: --model: required (a model version directory)\n";
    return 2;
  }
  if (count < 0 || candidates <= 0 || bag_size < 0 || (zipf != 0 && !(zipf > 1.0))) {
    std::cerr << "rankd gen-requests: need --count >= 0, --candidates > 0, --bag_size >= 0 "
                 "and --zipf > 1 (or 0 for uniform); got count "
              << count << ", candidates " << candidates << ", bag_size " << bag_size
              << ", zipf " << zipf << "\n";
    return 2;
  }
  // Dynamic tables need their stored keys, so load the whole model.
  auto model = engine::LoadModel(dir);
  if (!model.ok()) {
    std::cerr << "rankd gen-requests: " << model.status().message() << "\n";
    return 1;
  }
  const engine::Model& m = **model;
  std::ofstream file;
  const std::string output = absl::GetFlag(FLAGS_output);
  if (output != "-") {
    file.open(output);
    if (!file) {
      std::cerr << "rankd gen-requests: --output: cannot write " << output << "\n";
      return 1;
    }
  }
  std::ostream& out = output == "-" ? std::cout : file;
  std::mt19937_64 rng(absl::GetFlag(FLAGS_seed));
  std::uniform_real_distribution<float> dense_value(0.0f, 4.0f);
  std::uniform_real_distribution<float> weight(0.5f, 1.5f);
  std::vector<RankToRow> maps;
  for (const auto& t : m.tables) maps.emplace_back(t.num_rows);
  google::protobuf::util::JsonPrintOptions opts;
  for (int64_t n = 0; n < count; ++n) {
    rankd::v1::ScoreRequest req;
    req.set_model(m.name);
    req.set_num_candidates(candidates);
    for (int i = 0; i < candidates * m.num_dense; ++i) req.add_dense(dense_value(rng));
    for (size_t f = 0; f < m.features.size(); ++f) {
      const engine::SparseFeature& feature = m.features[f];
      const engine::EmbeddingTable& t = m.tables[feature.table];
      const int hint = m.config.sparse_features(f).typical_ids_per_bag();
      const int per_bag = bag_size > 0 ? bag_size : std::max(1, hint);
      const int bags = feature.request_level ? 1 : candidates;
      rankd::v1::SparseFeature* sf = req.add_sparse();
      sf->set_name(feature.name);
      for (int b = 0; b < bags; ++b) {
        sf->add_lengths(per_bag);
        for (int i = 0; i < per_bag; ++i) {
          int64_t rank;
          if (t.num_rows < 2) {
            rank = 0;
          } else if (zipf == 0) {
            rank = std::uniform_int_distribution<int64_t>(0, t.num_rows - 1)(rng);
          } else {
            rank = absl::zipf_distribution<int64_t>(t.num_rows - 1, zipf, 1.0)(rng);
          }
          const int64_t row = maps[feature.table](rank);
          sf->add_ids(t.dynamic ? reinterpret_cast<const int64_t*>(t.keys.data)[row] : row);
          if (absl::GetFlag(FLAGS_weighted)) sf->add_weights(weight(rng));
        }
      }
    }
    std::string line;
    if (!google::protobuf::util::MessageToJsonString(req, &line, opts).ok()) return 1;
    out << line << "\n";
  }
  out.flush();
  return out ? 0 : 1;
}

}  // namespace rankd::server
