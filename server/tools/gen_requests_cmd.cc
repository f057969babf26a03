// rankd gen-requests: synthetic ScoreRequest JSON lines for a model, with
// Zipf-distributed ids (MODELS.md: alpha 1.05 and 1.2) so caches see skew.
// Reads model.pbtxt and, for DYNAMIC tables with file keys, only the keys
// tensor of weights.safetensors (read): generating traffic for a 100 GB
// model never loads its rows. RANDOM tables' keys are computed
// (engine/model/table_init.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/random/zipf_distribution.h"
#include "engine/model/model_loader.h"
#include "engine/model/safetensors.h"
#include "engine/model/table_init.h"
#include "engine/model/tensor_layout.h"
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
ABSL_FLAG(double, miss_fraction, 0,
          "gen-requests: fraction of DYNAMIC-table ids that are not stored keys (new ids, "
          "pooled as the table's default vector), in [0, 1]. RANDOM tables: keys of rows past "
          "the table, never stored; file tables: random non-negative ids (stored with "
          "probability ~rows/2^63)");
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

// Where one table's ids come from.
struct TableIds {
  int64_t rows = 0;
  bool dynamic = false;
  bool random = false;              // DYNAMIC: keys computed from the config
  uint64_t stream = 0;              // RANDOM: table_init.h stream
  std::vector<int64_t> file_keys;   // FILE DYNAMIC: the keys tensor, read

  // Stored key of `row` (DYNAMIC) or the row itself (STATIC).
  int64_t Id(int64_t row) const {
    if (!dynamic) return row;
    if (random) return engine::RandomTableKey(stream, row);
    return file_keys[row];
  }
};

// Where each table's ids come from. FILE DYNAMIC tables read their keys
// tensor from dir/weights.safetensors, opened once and only if one needs it;
// the file's errors are returned as they are.
absl::StatusOr<std::vector<TableIds>> ReadTableIds(const std::string& dir,
                                                   const rankd::v1::ModelConfig& c) {
  const engine::ModelTensorLayout layout = engine::ExpectedTensorLayout(c);
  std::shared_ptr<const engine::SafetensorsFile> weights;  // opened once
  std::vector<TableIds> tables(c.tables_size());
  for (int k = 0; k < c.tables_size(); ++k) {
    const rankd::v1::TableConfig& tc = c.tables(k);
    TableIds& t = tables[k];
    t.rows = tc.num_rows();
    t.dynamic = tc.kind() == rankd::v1::DYNAMIC;
    t.random = tc.init().kind() == rankd::v1::RANDOM;
    t.stream = engine::RandomTableStream(tc.init().seed(), tc.name());
    if (!t.dynamic || t.random) continue;
    if (weights == nullptr) {
      auto file = engine::SafetensorsFile::Open(dir + "/weights.safetensors");
      if (!file.ok()) return file.status();
      weights = *std::move(file);
    }
    const engine::TensorSpec& spec = *layout.tables[k].keys;
    auto keys = weights->Get(spec.name, spec.dtype, spec.shape);
    if (!keys.ok()) return keys.status();
    t.file_keys.resize(static_cast<size_t>((*keys)->size_bytes / 8));
    if (absl::Status s = weights->ReadTensor(**keys, 0, (*keys)->size_bytes,
                                             t.file_keys.data());
        !s.ok()) {
      return s;
    }
  }
  return tables;
}

// The generator's flags.
struct GenOptions {
  int candidates = 0;
  double zipf = 0;       // 0 = uniform ids
  int bag_size = 0;      // 0 = each feature's typical_ids_per_bag
  double miss = 0;       // --miss_fraction
  bool weighted = false;
};

// Draws the requests, one after the other, from one random stream seeded by
// --seed: the draws happen in a fixed order (dense values, then per feature,
// bag and id: the rank, the miss, the weight), so a seed always gives the
// same requests.
class RequestGenerator {
 public:
  RequestGenerator(const rankd::v1::ModelConfig& c, const std::vector<TableIds>& tables,
                   const GenOptions& o, uint64_t seed)
      : c_(c), tables_(tables), o_(o), rng_(seed), is_miss_(o.miss) {
    for (const auto& f : c.sparse_features()) {
      for (int k = 0; k < c.tables_size(); ++k) {
        if (c.tables(k).name() == f.table()) feature_table_.push_back(k);
      }
    }
    for (const TableIds& t : tables) maps_.emplace_back(t.rows);
  }

  rankd::v1::ScoreRequest Next() {
    rankd::v1::ScoreRequest req;
    req.set_model(c_.name());
    req.set_num_candidates(o_.candidates);
    for (int i = 0; i < o_.candidates * c_.num_dense(); ++i) req.add_dense(dense_value_(rng_));
    for (int f = 0; f < c_.sparse_features_size(); ++f) {
      const rankd::v1::SparseFeatureConfig& feature = c_.sparse_features(f);
      const int hint = feature.typical_ids_per_bag();
      const int per_bag = o_.bag_size > 0 ? o_.bag_size : std::max(1, hint);
      const int bags = feature.request_level() ? 1 : o_.candidates;
      rankd::v1::SparseFeature* sf = req.add_sparse();
      sf->set_name(feature.name());
      for (int b = 0; b < bags; ++b) {
        sf->add_lengths(per_bag);
        for (int i = 0; i < per_bag; ++i) {
          sf->add_ids(DrawId(feature_table_[f]));
          if (o_.weighted) sf->add_weights(weight_(rng_));
        }
      }
    }
    return req;
  }

 private:
  // One id of table `k`: a popularity rank (--zipf, or uniform) mapped to a
  // row's id, or with --miss_fraction sometimes an id that is not stored.
  int64_t DrawId(int k) {
    const TableIds& t = tables_[k];
    int64_t rank;
    if (t.rows < 2) {
      rank = 0;
    } else if (o_.zipf == 0) {
      rank = std::uniform_int_distribution<int64_t>(0, t.rows - 1)(rng_);
    } else {
      rank = absl::zipf_distribution<int64_t>(t.rows - 1, o_.zipf, 1.0)(rng_);
    }
    const int64_t row = maps_[k](rank);
    // Drawn only when asked for, so --miss_fraction 0 gives the same
    // requests as before the flag existed.
    if (t.dynamic && o_.miss > 0 && is_miss_(rng_)) {
      // Misses are skewed like hits: popular new ids recur.
      return t.random ? engine::RandomTableKey(t.stream, t.rows + rank)
                      : static_cast<int64_t>(rng_() >> 1);
    }
    return t.Id(row);
  }

  const rankd::v1::ModelConfig& c_;
  const std::vector<TableIds>& tables_;
  const GenOptions o_;
  std::vector<int> feature_table_;  // each sparse feature's table index
  std::vector<RankToRow> maps_;     // per table
  std::mt19937_64 rng_;
  std::uniform_real_distribution<float> dense_value_{0.0f, 4.0f};
  std::uniform_real_distribution<float> weight_{0.5f, 1.5f};
  std::bernoulli_distribution is_miss_;
};

}  // namespace

int RunGenRequests() {
  const std::string dir = absl::GetFlag(FLAGS_model);
  const int64_t count = absl::GetFlag(FLAGS_count);
  GenOptions o;
  o.candidates = absl::GetFlag(FLAGS_candidates);
  o.zipf = absl::GetFlag(FLAGS_zipf);
  o.bag_size = absl::GetFlag(FLAGS_bag_size);
  o.miss = absl::GetFlag(FLAGS_miss_fraction);
  o.weighted = absl::GetFlag(FLAGS_weighted);
  if (dir.empty()) {
    std::cerr << "rankd gen-requests: --model: required (a model version directory)\n";
    return 2;
  }
  if (count < 0 || o.candidates <= 0 || o.bag_size < 0 || (o.zipf != 0 && !(o.zipf > 1.0)) ||
      !(o.miss >= 0 && o.miss <= 1)) {
    std::cerr << "rankd gen-requests: need --count >= 0, --candidates > 0, --bag_size >= 0, "
                 "--zipf > 1 (or 0 for uniform) and --miss_fraction in [0, 1]; got count "
              << count << ", candidates " << o.candidates << ", bag_size " << o.bag_size
              << ", zipf " << o.zipf << ", miss_fraction " << o.miss << "\n";
    return 2;
  }
  absl::StatusOr<rankd::v1::ModelConfig> config =
      engine::ReadModelConfig(dir + "/model.pbtxt");
  if (!config.ok()) {
    std::cerr << "rankd gen-requests: " << config.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<std::vector<TableIds>> tables = ReadTableIds(dir, *config);
  if (!tables.ok()) {
    std::cerr << "rankd gen-requests: " << tables.status().message() << "\n";
    return 1;
  }

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
  RequestGenerator generator(*config, *tables, o, absl::GetFlag(FLAGS_seed));
  google::protobuf::util::JsonPrintOptions opts;
  for (int64_t n = 0; n < count; ++n) {
    std::string line;
    if (!google::protobuf::util::MessageToJsonString(generator.Next(), &line, opts).ok()) return 1;
    out << line << "\n";
  }
  out.flush();
  return out ? 0 : 1;
}

}  // namespace rankd::server
