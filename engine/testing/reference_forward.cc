#include "engine/testing/reference_forward.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/embedding_pool.h"
#include "kernels/cpu/hash_table.h"

namespace rankd::engine::testing {
namespace {

using Vec = std::vector<double>;

Vec Dense(const Linear& l, const Vec& in, bool relu) {
  Vec out(l.out);
  for (int o = 0; o < l.out; ++o) {
    double acc = l.bias[o];
    for (int i = 0; i < l.in; ++i) acc += double(l.weight[o * l.in + i]) * in[i];
    out[o] = relu ? std::max(0.0, acc) : acc;
  }
  return out;
}

// Row of `id`, or -1 when it does not resolve.
int64_t Resolve(const EmbeddingTable& t, int64_t id) {
  if (t.dynamic) {
    const int64_t* keys = reinterpret_cast<const int64_t*>(t.keys.data);
    for (int64_t r = 0; r < t.num_rows; ++r) {
      if (keys[r] == id) return r;
    }
    return -1;
  }
  return (id >= 0 && id < t.num_rows) ? id : -1;
}

Vec Pool(const EmbeddingTable& t, const FeatureInput& in, int64_t begin,
         int64_t end) {
  Vec out(t.dim, 0.0);
  if (end == begin) return out;
  if (t.pooling == kernels::Pooling::kMax) {
    std::fill(out.begin(), out.end(), -std::numeric_limits<double>::infinity());
  }
  for (int64_t i = begin; i < end; ++i) {
    const double w = in.weights.empty() ? 1.0 : in.weights[i];
    const int64_t row = Resolve(t, in.ids[i]);
    for (int d = 0; d < t.dim; ++d) {
      double v;
      if (row < 0) {
        v = t.default_vector.empty() ? 0.0 : t.default_vector[d];
      } else {
        v = kernels::RowElementToFloat(t.rows.data, t.row_type, row * t.dim + d);
      }
      v *= w;
      if (t.pooling == kernels::Pooling::kMax) {
        out[d] = std::max(out[d], v);
      } else {
        out[d] += v;
      }
    }
  }
  if (t.pooling == kernels::Pooling::kMean) {
    for (double& v : out) v /= static_cast<double>(end - begin);
  }
  return out;
}

}  // namespace

ReferenceResult ReferenceForward(const Model& m, const Request& req) {
  ReferenceResult result;
  const size_t num_features = m.features.size();
  // Bag offsets per feature.
  std::vector<std::vector<int64_t>> offsets(num_features);
  for (size_t f = 0; f < num_features; ++f) {
    offsets[f].push_back(0);
    for (int32_t len : req.features[f].lengths) offsets[f].push_back(offsets[f].back() + len);
  }
  for (int32_t c = 0; c < req.num_candidates; ++c) {
    Vec x(req.dense.begin() + int64_t(c) * m.num_dense,
          req.dense.begin() + int64_t(c + 1) * m.num_dense);
    for (const Linear& l : m.bottom) x = Dense(l, x, /*relu=*/true);
    std::vector<Vec> e;
    for (size_t f = 0; f < num_features; ++f) {
      const FeatureInput& in = req.features[f];
      const int64_t bag = in.lengths.size() == 1 ? 0 : c;
      e.push_back(Pool(m.tables[m.features[f].table], in, offsets[f][bag],
                       offsets[f][bag + 1]));
    }
    Vec z;
    if (m.interaction == rankd::v1::DOT) {
      std::vector<Vec> t = {x};
      t.insert(t.end(), e.begin(), e.end());
      z = x;
      for (size_t i = 0; i < t.size(); ++i) {
        for (size_t j = 0; j < i + (m.self_interaction ? 1 : 0); ++j) {
          double dot = 0;
          for (size_t d = 0; d < t[i].size(); ++d) dot += t[i][d] * t[j][d];
          z.push_back(dot);
        }
      }
    } else {
      z = x;
      for (const Vec& v : e) z.insert(z.end(), v.begin(), v.end());
      if (m.interaction == rankd::v1::DCN_V2) {
        const Vec x0 = z;
        for (const CrossLayer& cl : m.cross) {
          Vec vx(cl.rank, 0.0);
          for (int r = 0; r < cl.rank; ++r) {
            for (int i = 0; i < cl.n; ++i) vx[r] += double(cl.v[r * cl.n + i]) * z[i];
          }
          Vec next(cl.n);
          for (int i = 0; i < cl.n; ++i) {
            double wv = cl.bias[i];
            for (int r = 0; r < cl.rank; ++r) wv += double(cl.w[i * cl.rank + r]) * vx[r];
            next[i] = x0[i] * wv + z[i];
          }
          z = next;
        }
      }
    }
    for (size_t l = 0; l < m.top.size(); ++l) {
      z = Dense(m.top[l], z, /*relu=*/l + 1 < m.top.size());
    }
    result.logits.push_back(z[0]);
    result.scores.push_back(1.0 / (1.0 + std::exp(-z[0])));
  }
  return result;
}

}  // namespace rankd::engine::testing
