#include "engine/testing/test_models.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/embedding_pool.h"

namespace rankd::engine::testing {
namespace {

bool Contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

Linear RandomLinear(int in, int out, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Linear l;
  l.in = in;
  l.out = out;
  const float scale = 1.0f / std::sqrt(static_cast<float>(in));
  for (int i = 0; i < in * out; ++i) l.weight.push_back(u(rng) * scale);
  for (int i = 0; i < out; ++i) l.bias.push_back(u(rng) * 0.1f);
  return l;
}

std::vector<float> RandomVector(size_t n, float scale, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) {
    do x = u(rng) * scale; while (x == 0.0f);
  }
  return v;
}

}  // namespace

std::shared_ptr<Model> MakeRandomModel(const RandomModelSpec& spec) {
  std::mt19937_64 rng(spec.seed);
  auto m = std::make_shared<Model>();
  m->name = "test";
  m->version = 1;
  m->num_dense = spec.num_dense;
  m->interaction = spec.interaction;
  m->self_interaction = spec.self_interaction;
  const int num_tables = static_cast<int>(spec.table_rows.size());
  for (int t = 0; t < num_tables; ++t) {
    EmbeddingTable table;
    table.name = absl::StrCat("t", t);
    table.dynamic = Contains(spec.dynamic_tables, t);
    table.num_rows = spec.table_rows[t];
    table.dim = spec.cat_dims.empty() ? spec.dim : spec.cat_dims[t];
    table.row_type = spec.row_type;
    table.pooling = spec.pooling;
    table.id_policy = spec.id_policy;
    if (spec.default_vector && spec.id_policy == rankd::v1::ZERO) {
      table.default_vector = RandomVector(table.dim, 0.5f, rng);
    }
    const int64_t elems = table.num_rows * table.dim;
    std::vector<float> values = RandomVector(elems, 1.0f, rng);
    auto bytes = std::make_shared<std::vector<uint8_t>>(elems * kernels::RowTypeBytes(spec.row_type));
    for (int64_t i = 0; i < elems; ++i) {
      if (spec.row_type == kernels::RowType::kFp32) {
        std::memcpy(bytes->data() + 4 * i, &values[i], 4);
      } else {
        const uint16_t h = spec.row_type == kernels::RowType::kFp16
                               ? kernels::FloatToHalfBits(values[i])
                               : kernels::FloatToBf16Bits(values[i]);
        std::memcpy(bytes->data() + 2 * i, &h, 2);
      }
    }
    table.rows = ByteBuffer{bytes->data(), static_cast<int64_t>(bytes->size()), bytes};
    table.rows.writable = true;  // the model's own vector
    if (table.dynamic) {
      std::set<int64_t> used;
      std::vector<int64_t> keys;
      std::uniform_int_distribution<int64_t> key(-1000000000000LL, 1000000000000LL);
      while (static_cast<int64_t>(keys.size()) < table.num_rows) {
        const int64_t k = key(rng);
        if (used.insert(k).second) keys.push_back(k);
      }
      absl::Status s = kernels::HashTable::Build(keys, 0, &table.hash);
      if (!s.ok()) std::abort();
      auto owned = std::make_shared<std::vector<int64_t>>(keys);
      table.keys = ByteBuffer{reinterpret_cast<const uint8_t*>(owned->data()),
                              static_cast<int64_t>(owned->size() * 8), owned};
    }
    m->tables.push_back(std::move(table));
  }
  for (int f = 0; f < num_tables; ++f) {
    SparseFeature feature;
    feature.name = absl::StrCat("f", f);
    feature.table = f;
    feature.request_level = Contains(spec.request_level_features, f);
    m->features.push_back(feature);
  }
  std::vector<int> bottom = spec.bottom;
  if (spec.interaction != rankd::v1::CAT || !bottom.empty()) bottom.push_back(spec.dim);
  int in = spec.num_dense;
  for (int w : bottom) {
    m->bottom.push_back(RandomLinear(in, w, rng));
    in = w;
  }
  const int x = m->dense_out_width();
  const int n = 1 + num_tables;
  int sum_dims = 0;
  for (const EmbeddingTable& t : m->tables) sum_dims += t.dim;
  switch (spec.interaction) {
    case rankd::v1::DOT:
      m->interaction_width = kernels::DotInteractionWidth(n, x, spec.self_interaction);
      break;
    case rankd::v1::CAT:
      m->interaction_width = x + sum_dims;
      break;
    default: {
      const int width = n * spec.dim;
      m->interaction_width = width;
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      for (int l = 0; l < spec.dcn_layers; ++l) {
        CrossLayer c;
        c.n = width;
        c.rank = spec.dcn_rank;
        c.v = RandomVector(static_cast<size_t>(c.rank) * width, 1.0f / std::sqrt(width), rng);
        c.w = RandomVector(static_cast<size_t>(c.rank) * width, 1.0f / std::sqrt(c.rank), rng);
        c.bias = RandomVector(width, 0.1f, rng);
        m->cross.push_back(std::move(c));
      }
    }
  }
  std::vector<int> top = spec.top;
  top.push_back(1);
  in = m->interaction_width;
  for (int w : top) {
    m->top.push_back(RandomLinear(in, w, rng));
    in = w;
  }
  return m;
}

Request OwnedRequest::view() const {
  Request r;
  r.num_candidates = num_candidates;
  r.dense = dense;
  for (size_t f = 0; f < ids.size(); ++f) {
    r.features.push_back(FeatureInput{ids[f], lengths[f], weights[f]});
  }
  return r;
}

OwnedRequest MakeRandomRequest(const Model& model, const RandomRequestSpec& spec) {
  std::mt19937_64 rng(spec.seed);
  OwnedRequest r;
  r.num_candidates = spec.num_candidates;
  r.dense = RandomVector(static_cast<size_t>(spec.num_candidates) * model.num_dense, 2.0f, rng);
  if (spec.min_bag < 0 || spec.min_bag > spec.max_bag) std::abort();  // a test's own mistake
  std::uniform_int_distribution<int> bag(spec.min_bag, spec.max_bag);
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  std::uniform_real_distribution<float> weight(0.25f, 2.0f);
  for (const SparseFeature& f : model.features) {
    const EmbeddingTable& t = model.tables[f.table];
    const bool shared = f.request_level || spec.share_all_bags;
    const int bags = shared ? 1 : spec.num_candidates;
    std::vector<int32_t> lengths;
    std::vector<int64_t> ids;
    std::vector<float> weights;
    for (int b = 0; b < bags; ++b) {
      const int len = bag(rng);
      lengths.push_back(len);
      for (int i = 0; i < len; ++i) {
        const bool bad = coin(rng) < spec.unresolved_fraction;
        std::uniform_int_distribution<int64_t> row(0, t.num_rows - 1);
        int64_t id;
        if (t.dynamic) {
          id = bad ? static_cast<int64_t>(rng() >> 1) : reinterpret_cast<const int64_t*>(t.keys.data)[row(rng)];
        } else {
          id = bad ? t.num_rows + static_cast<int64_t>(rng() % 5) : row(rng);
        }
        ids.push_back(id);
        if (spec.weighted) weights.push_back(weight(rng));
      }
    }
    r.ids.push_back(std::move(ids));
    r.lengths.push_back(std::move(lengths));
    r.weights.push_back(std::move(weights));
  }
  return r;
}

void MakeTableGrowable(Model* m, int table, int64_t max_keys, rankd::v1::Eviction eviction) {
  EmbeddingTable& t = m->tables[table];
  if (!t.dynamic || max_keys < t.num_rows) std::abort();
  auto rows = std::make_shared<std::vector<uint8_t>>(max_keys * t.row_bytes(), 0);
  std::memcpy(rows->data(), t.rows.data, t.num_rows * t.row_bytes());
  auto keys = std::make_shared<std::vector<int64_t>>(max_keys, kernels::kEmptyKey);
  std::memcpy(keys->data(), t.keys.data, t.num_rows * 8);
  t.rows = ByteBuffer{rows->data(), static_cast<int64_t>(rows->size()), rows};
  t.rows.writable = true;
  t.keys = ByteBuffer{reinterpret_cast<const uint8_t*>(keys->data()),
                      static_cast<int64_t>(keys->size() * 8), keys};
  t.keys.writable = true;
  absl::Status s = kernels::HashTable::Build(
      absl::MakeConstSpan(keys->data(), t.num_rows), 2 * max_keys, &t.hash);
  if (!s.ok()) std::abort();
  t.max_keys = max_keys;
  t.eviction = eviction;
  if (!AttachDynamicState(&t).ok()) std::abort();
}

}  // namespace rankd::engine::testing
