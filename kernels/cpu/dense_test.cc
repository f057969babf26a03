#include "kernels/cpu/dense.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/types.h"

namespace rankd::kernels {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Random value in +-[0.05, 1]: never zero, so a skipped term shows.
float NonZero(std::mt19937_64& rng) {
  std::uniform_real_distribution<float> mag(0.05f, 1.0f);
  return (rng() & 1) ? mag(rng) : -mag(rng);
}

std::vector<float> Random(int64_t n, std::mt19937_64& rng) {
  std::vector<float> v(n);
  for (float& x : v) x = NonZero(rng);
  return v;
}

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// A dense layer with its own storage.
struct Layer {
  std::vector<float> weight, bias;
  LinearView view;
};

Layer MakeLayer(int in, int out, std::mt19937_64& rng, bool with_bias = true) {
  Layer l;
  l.weight = Random(static_cast<int64_t>(in) * out, rng);
  if (with_bias) l.bias = Random(out, rng);
  l.view =
      LinearView{l.weight.data(), with_bias ? l.bias.data() : nullptr, in, out};
  return l;
}

struct CrossLayer {
  std::vector<float> v, w, bias;
  CrossLayerView view;
};

CrossLayer MakeCross(int n, int rank, std::mt19937_64& rng) {
  CrossLayer c;
  c.v = Random(static_cast<int64_t>(rank) * n, rng);
  c.w = Random(static_cast<int64_t>(n) * rank, rng);
  c.bias = Random(n, rng);
  c.view = CrossLayerView{c.v.data(), c.w.data(), c.bias.data(), n, rank};
  return c;
}

// ---------------------------------------------------------------------------
// LinearForward

void CheckLinear(int in, int out, int64_t rows, int64_t in_stride,
                 int64_t out_stride, Activation act, bool with_bias,
                 uint64_t seed) {
  SCOPED_TRACE(testing::Message()
               << "in=" << in << " out=" << out << " rows=" << rows
               << " in_stride=" << in_stride << " out_stride=" << out_stride
               << " act=" << static_cast<int>(act) << " bias=" << with_bias);
  std::mt19937_64 rng(seed);
  const Layer layer = MakeLayer(in, out, rng, with_bias);
  // Input padding columns hold NaN: reading them would poison the result.
  std::vector<float> x(rows * in_stride, kNaN);
  for (int64_t r = 0; r < rows; ++r) {
    for (int c = 0; c < in; ++c) x[r * in_stride + c] = NonZero(rng);
  }
  std::vector<float> y(rows * out_stride, kNaN);
  LinearForward(layer.view, x.data(), in_stride, rows, act, y.data(),
                out_stride);
  for (int64_t r = 0; r < rows; ++r) {
    for (int o = 0; o < out; ++o) {
      double acc = with_bias ? layer.bias[o] : 0.0;
      double scale = with_bias ? std::abs(layer.bias[o]) : 0.0;
      for (int c = 0; c < in; ++c) {
        const double term = static_cast<double>(x[r * in_stride + c]) *
                            layer.weight[o * in + c];
        acc += term;
        scale += std::abs(term);
      }
      double tol = 1e-5 * scale;
      if (act == Activation::kRelu) acc = std::max(acc, 0.0);
      if (act == Activation::kSigmoid) {
        acc = Sigmoid(acc);
        tol = 0.25 * tol + 1e-6 * acc;  // sigmoid' <= 1/4, plus exp's rounding
      }
      ASSERT_NEAR(y[r * out_stride + o], acc, tol)
          << "row " << r << " col " << o;
    }
    for (int64_t o = out; o < out_stride; ++o) {
      ASSERT_TRUE(std::isnan(y[r * out_stride + o])) << "wrote padding";
    }
  }
}

TEST(LinearForwardTest, MatchesReference) {
  struct Shape {
    int in, out;
  };
  uint64_t seed = 1;
  for (const Shape& s :
       {Shape{1, 1}, Shape{2, 1}, Shape{1, 2}, Shape{13, 7}, Shape{7, 13},
        Shape{64, 33}, Shape{100, 1}, Shape{1000, 5}, Shape{256, 128}}) {
    for (int64_t rows : {16, 48}) {
      for (Activation act :
           {Activation::kNone, Activation::kRelu, Activation::kSigmoid}) {
        CheckLinear(s.in, s.out, rows, s.in, s.out, act, true, seed++);
        const bool with_bias = seed % 2 == 0;
        CheckLinear(s.in, s.out, rows, s.in + 3, s.out + 5, act, with_bias,
                    seed++);
      }
    }
  }
}

TEST(LinearForwardTest, SigmoidSaturates) {
  const float w[1] = {1.0f};
  const float b[1] = {0.0f};
  LinearView layer{w, b, 1, 1};
  std::vector<float> x(16, 0.0f);
  x[0] = -200.0f;
  x[1] = 200.0f;
  std::vector<float> y(16, kNaN);
  LinearForward(layer, x.data(), 1, 16, Activation::kSigmoid, y.data(), 1);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 1.0f);
  EXPECT_EQ(y[2], 0.5f);
}

// ---------------------------------------------------------------------------
// DotInteraction

// The index lists of DLRM_Net.interact_features (arch_interaction_op='dot'):
//   offset = 1 if self_interaction else 0
//   li = [i for i in range(ni) for j in range(i + offset)]
//   lj = [j for i in range(ni) for j in range(i + offset)]
void DlrmPairs(int ni, bool self_interaction, std::vector<int>* li,
               std::vector<int>* lj) {
  const int offset = self_interaction ? 1 : 0;
  for (int i = 0; i < ni; ++i) {
    for (int j = 0; j < i + offset; ++j) {
      li->push_back(i);
      lj->push_back(j);
    }
  }
}

TEST(DotInteractionTest, WidthAndPairOrder) {
  EXPECT_EQ(DotInteractionWidth(1, 4, false), 4);
  EXPECT_EQ(DotInteractionWidth(4, 16, false), 16 + 6);
  EXPECT_EQ(DotInteractionWidth(4, 16, true), 16 + 10);
  EXPECT_EQ(DotInteractionWidth(27, 128, false), 128 + 351);

  // Vectors chosen so each pair's product is unique: e_i = 2^i in one lane.
  const int n = 4, dim = 1;
  std::vector<float> feats(16 * n * dim, 0.0f);
  for (int i = 0; i < n; ++i) feats[i] = static_cast<float>(1 << i);
  std::vector<float> out(16 * 7, kNaN);
  DotInteraction(feats.data(), 16, n, dim, false, out.data(), 7);
  const float want[7] = {1, 2 * 1, 4 * 1, 4 * 2, 8 * 1, 8 * 2, 8 * 4};
  for (int k = 0; k < 7; ++k) EXPECT_EQ(out[k], want[k]) << k;
}

void CheckDot(int num_vectors, int dim, bool self_interaction, int64_t rows,
              int64_t extra_stride, uint64_t seed) {
  SCOPED_TRACE(testing::Message()
               << "n=" << num_vectors << " dim=" << dim
               << " self=" << self_interaction << " rows=" << rows);
  std::mt19937_64 rng(seed);
  const std::vector<float> feats = Random(rows * num_vectors * dim, rng);
  const int width = DotInteractionWidth(num_vectors, dim, self_interaction);
  const int64_t stride = width + extra_stride;
  std::vector<float> out(rows * stride, kNaN);
  DotInteraction(feats.data(), rows, num_vectors, dim, self_interaction,
                 out.data(), stride);
  std::vector<int> li, lj;
  DlrmPairs(num_vectors, self_interaction, &li, &lj);
  ASSERT_EQ(dim + static_cast<int>(li.size()), width);
  for (int64_t r = 0; r < rows; ++r) {
    const float* t = feats.data() + r * num_vectors * dim;
    const float* o = out.data() + r * stride;
    for (int d = 0; d < dim; ++d) ASSERT_EQ(o[d], t[d]) << "x copy, row " << r;
    for (size_t p = 0; p < li.size(); ++p) {
      double acc = 0.0, scale = 0.0;
      for (int d = 0; d < dim; ++d) {
        const double term =
            static_cast<double>(t[li[p] * dim + d]) * t[lj[p] * dim + d];
        acc += term;
        scale += std::abs(term);
      }
      ASSERT_NEAR(o[dim + p], acc, 1e-5 * scale)
          << "row " << r << " pair (" << li[p] << "," << lj[p] << ")";
    }
    for (int64_t k = width; k < stride; ++k) {
      ASSERT_TRUE(std::isnan(o[k])) << "wrote padding";
    }
  }
}

TEST(DotInteractionTest, MatchesDlrmReference) {
  uint64_t seed = 100;
  for (int n : {1, 2, 3, 9, 27}) {
    for (int dim : {1, 3, 16, 13, 128}) {
      for (bool self : {false, true}) {
        CheckDot(n, dim, self, 16, seed % 3, seed);
        ++seed;
      }
    }
  }
  CheckDot(27, 128, false, 64, 0, 7);
}

// ---------------------------------------------------------------------------
// CrossLayerForward

void CheckCross(int n, int rank, int64_t rows, uint64_t seed) {
  SCOPED_TRACE(testing::Message()
               << "n=" << n << " rank=" << rank << " rows=" << rows);
  std::mt19937_64 rng(seed);
  const CrossLayer layer = MakeCross(n, rank, rng);
  const std::vector<float> x0 = Random(rows * n, rng);
  const std::vector<float> x = Random(rows * n, rng);
  std::vector<float> scratch(rows * rank, kNaN);
  std::vector<float> next(rows * n + 1, kNaN);
  CrossLayerForward(layer.view, x0.data(), x.data(), rows, scratch.data(),
                    next.data());
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * n;
    const float* x0r = x0.data() + r * n;
    std::vector<double> low(rank), low_abs(rank);
    for (int k = 0; k < rank; ++k) {
      for (int c = 0; c < n; ++c) {
        const double term = static_cast<double>(layer.v[k * n + c]) * xr[c];
        low[k] += term;
        low_abs[k] += std::abs(term);
      }
    }
    for (int c = 0; c < n; ++c) {
      double t = layer.bias[c], t_abs = std::abs(layer.bias[c]);
      for (int k = 0; k < rank; ++k) {
        t += layer.w[c * rank + k] * low[k];
        t_abs += std::abs(layer.w[c * rank + k]) * low_abs[k];
      }
      const double want = x0r[c] * t + xr[c];
      const double scale = std::abs(x0r[c]) * t_abs + std::abs(xr[c]);
      ASSERT_NEAR(next[r * n + c], want, 2e-5 * scale)
          << "row " << r << " col " << c;
    }
  }
  EXPECT_TRUE(std::isnan(next.back())) << "wrote past the end";
}

TEST(CrossLayerForwardTest, MatchesReference) {
  uint64_t seed = 500;
  for (int n : {1, 13, 48, 100, 432}) {
    for (int rank : {1, 3, 8, 64}) {
      CheckCross(n, rank, 16, seed++);
      CheckCross(n, rank, 32, seed++);
    }
  }
}

// ---------------------------------------------------------------------------
// Batch independence: a row's output is bit-identical whatever block it is in
// (sizes 16..256, any position, zero padding rows or random neighbours).

// Block of `rows` rows of width `width` (stride `stride`) with `target` at
// row `pos` and the others random (or zero).
std::vector<float> Block(const std::vector<float>& target, int64_t rows,
                         int64_t pos, int64_t stride, bool zero_others,
                         std::mt19937_64& rng) {
  std::vector<float> block(rows * stride);
  for (float& v : block) v = zero_others ? 0.0f : NonZero(rng);
  std::copy(target.begin(), target.end(), block.begin() + pos * stride);
  return block;
}

struct Placement {
  int64_t rows;
  int64_t pos;
  bool zero_others;
};

std::vector<Placement> Placements() {
  std::vector<Placement> p;
  for (int64_t rows : {16, 32, 48, 256}) {
    for (int64_t pos : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{3},
                        int64_t{5}, int64_t{13}, rows / 2 + 1, rows - 1}) {
      p.push_back({rows, pos, false});
    }
  }
  p.push_back({16, 0, true});
  p.push_back({16, 9, true});
  p.push_back({256, 200, true});
  return p;
}

TEST(BatchIndependenceTest, LinearForward) {
  struct Shape {
    int in, out;
    int64_t in_stride;
  };
  std::mt19937_64 rng(1);
  // Tiny shapes take Eigen's coefficient-based product at 16 rows, out == 1
  // its GEMV; odd strides move each row's alignment with its position; 1000
  // inputs block the depth.
  for (const Shape& s :
       {Shape{1, 1, 1}, Shape{2, 1, 3}, Shape{1, 2, 1}, Shape{13, 7, 13},
        Shape{13, 7, 15}, Shape{64, 1, 65}, Shape{256, 128, 256},
        Shape{1000, 5, 1001}, Shape{479, 1024, 479}}) {
    for (Activation act :
         {Activation::kNone, Activation::kRelu, Activation::kSigmoid}) {
      SCOPED_TRACE(testing::Message() << "in=" << s.in << " out=" << s.out
                                      << " in_stride=" << s.in_stride
                                      << " act=" << static_cast<int>(act));
      const Layer layer = MakeLayer(s.in, s.out, rng);
      std::vector<float> target(s.in_stride);
      for (float& v : target) v = NonZero(rng) * 3.0f;
      std::vector<float> first;
      for (const Placement& p : Placements()) {
        const std::vector<float> x =
            Block(target, p.rows, p.pos, s.in_stride, p.zero_others, rng);
        std::vector<float> y(p.rows * s.out, kNaN);
        LinearForward(layer.view, x.data(), s.in_stride, p.rows, act, y.data(),
                      s.out);
        std::vector<float> row(y.begin() + p.pos * s.out,
                               y.begin() + (p.pos + 1) * s.out);
        if (first.empty()) {
          first = row;
          continue;
        }
        ASSERT_EQ(std::memcmp(row.data(), first.data(), s.out * sizeof(float)),
                  0)
            << "rows=" << p.rows << " pos=" << p.pos
            << " zeros=" << p.zero_others;
      }
    }
  }
}

TEST(BatchIndependenceTest, DotInteraction) {
  struct Shape {
    int n, dim;
  };
  std::mt19937_64 rng(2);
  for (const Shape& s : {Shape{2, 1}, Shape{3, 3}, Shape{5, 13}, Shape{27, 16},
                         Shape{27, 128}, Shape{9, 7}}) {
    for (bool self : {false, true}) {
      SCOPED_TRACE(testing::Message()
                   << "n=" << s.n << " dim=" << s.dim << " self=" << self);
      const int64_t in_width = static_cast<int64_t>(s.n) * s.dim;
      const int width = DotInteractionWidth(s.n, s.dim, self);
      std::vector<float> target(in_width);
      for (float& v : target) v = NonZero(rng);
      std::vector<float> first;
      for (const Placement& p : Placements()) {
        const std::vector<float> feats =
            Block(target, p.rows, p.pos, in_width, p.zero_others, rng);
        std::vector<float> out(p.rows * width, kNaN);
        DotInteraction(feats.data(), p.rows, s.n, s.dim, self, out.data(),
                       width);
        std::vector<float> row(out.begin() + p.pos * width,
                               out.begin() + (p.pos + 1) * width);
        if (first.empty()) {
          first = row;
          continue;
        }
        ASSERT_EQ(std::memcmp(row.data(), first.data(), width * sizeof(float)),
                  0)
            << "rows=" << p.rows << " pos=" << p.pos;
      }
    }
  }
}

TEST(BatchIndependenceTest, CrossLayerForward) {
  struct Shape {
    int n, rank;
  };
  std::mt19937_64 rng(3);
  for (const Shape& s : {Shape{1, 1}, Shape{13, 1}, Shape{13, 3}, Shape{48, 8},
                         Shape{432, 64}, Shape{101, 17}}) {
    SCOPED_TRACE(testing::Message() << "n=" << s.n << " rank=" << s.rank);
    const CrossLayer layer = MakeCross(s.n, s.rank, rng);
    std::vector<float> target_x0(s.n), target_x(s.n);
    for (float& v : target_x0) v = NonZero(rng);
    for (float& v : target_x) v = NonZero(rng);
    std::vector<float> first;
    for (const Placement& p : Placements()) {
      const std::vector<float> x0 =
          Block(target_x0, p.rows, p.pos, s.n, p.zero_others, rng);
      const std::vector<float> x =
          Block(target_x, p.rows, p.pos, s.n, p.zero_others, rng);
      std::vector<float> scratch(p.rows * s.rank, kNaN);
      std::vector<float> next(p.rows * s.n, kNaN);
      CrossLayerForward(layer.view, x0.data(), x.data(), p.rows, scratch.data(),
                        next.data());
      std::vector<float> row(next.begin() + p.pos * s.n,
                             next.begin() + (p.pos + 1) * s.n);
      if (first.empty()) {
        first = row;
        continue;
      }
      ASSERT_EQ(std::memcmp(row.data(), first.data(), s.n * sizeof(float)), 0)
          << "rows=" << p.rows << " pos=" << p.pos;
    }
  }
}

}  // namespace
}  // namespace rankd::kernels
