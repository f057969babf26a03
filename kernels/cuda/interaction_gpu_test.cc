// LaunchDotInteraction / LaunchCrossCombine against their CPU twins
// (kernels/cpu/dense.h) on random inputs (never zero), with poisoned outputs:
// every element is checked, and padding the kernels must not touch is checked
// to still hold the poison. Needs a GPU (tags: gpu, manual).
#include "kernels/cuda/interaction.h"

#include <cuda_runtime_api.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dense.h"
#include "kernels/cuda/gpu_test_util.h"

namespace rankd::kernels::cuda {
namespace {

using testing::DeviceFloats;

// 0xFF bytes: a NaN no kernel computes.
constexpr uint32_t kPoisonBits = 0xffffffffu;
bool IsPoison(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b == kPoisonBits;
}

std::vector<float> RandomNonZero(size_t n, std::mt19937_64& rng, float scale = 1.0f) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) {
    do x = u(rng) * scale; while (x == 0.0f);
  }
  return v;
}

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int count = 0;
    ASSERT_CUDA(cudaGetDeviceCount(&count)) << "no CUDA device: this test needs a GPU";
    ASSERT_GT(count, 0);
    ASSERT_CUDA(cudaStreamCreate(&stream_));
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  cudaStream_t stream_ = nullptr;
};

struct DotCase {
  int n;
  int dim;
  bool self;
  int64_t rows;
  int feats_pad;  // extra floats per input row (0 = contiguous)
  int out_pad;    // extra floats per output row
};

void PrintTo(const DotCase& c, std::ostream* os) {
  *os << "n=" << c.n << " dim=" << c.dim << " self=" << c.self << " rows=" << c.rows
      << " feats_pad=" << c.feats_pad << " out_pad=" << c.out_pad;
}

class DotInteractionTest : public CudaTest, public ::testing::WithParamInterface<DotCase> {};

TEST_P(DotInteractionTest, MatchesCpuTwin) {
  const DotCase c = GetParam();
  std::mt19937_64 rng(1000 * c.n + 10 * c.dim + c.rows + (c.self ? 7 : 0));
  const int64_t row_floats = static_cast<int64_t>(c.n) * c.dim;
  const int64_t feats_stride = row_floats + c.feats_pad;
  const int width = DotInteractionWidth(c.n, c.dim, c.self);
  const int64_t out_stride = width + c.out_pad;

  const std::vector<float> feats = RandomNonZero(c.rows * feats_stride, rng);
  // CPU twin wants contiguous rows.
  std::vector<float> packed(c.rows * row_floats);
  for (int64_t r = 0; r < c.rows; ++r) {
    std::memcpy(&packed[r * row_floats], &feats[r * feats_stride], row_floats * sizeof(float));
  }
  std::vector<float> want(c.rows * out_stride, 0.0f);
  DotInteraction(packed.data(), c.rows, c.n, c.dim, c.self, want.data(), out_stride);

  DeviceFloats d_feats(feats.size());
  DeviceFloats d_out(c.rows * out_stride);
  ASSERT_NE(d_feats.get(), nullptr);
  ASSERT_NE(d_out.get(), nullptr);
  ASSERT_CUDA(cudaMemcpy(d_feats.get(), feats.data(), feats.size() * 4, cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemset(d_out.get(), 0xff, c.rows * out_stride * 4));
  ASSERT_CUDA(LaunchDotInteraction(d_feats.get(), feats_stride, c.rows, c.n, c.dim, c.self,
                                   d_out.get(), out_stride, stream_));
  ASSERT_CUDA(cudaStreamSynchronize(stream_));
  std::vector<float> got(c.rows * out_stride);
  ASSERT_CUDA(cudaMemcpy(got.data(), d_out.get(), got.size() * 4, cudaMemcpyDeviceToHost));

  int64_t bad = 0;
  const int offset = c.self ? 1 : 0;
  for (int64_t r = 0; r < c.rows; ++r) {
    const float* t = &packed[r * row_floats];
    const float* g = &got[r * out_stride];
    const float* w = &want[r * out_stride];
    for (int k = 0; k < c.dim; ++k) {  // x: an exact copy
      if (!(g[k] == w[k]) && bad++ < 10) {
        ADD_FAILURE() << "row " << r << " x[" << k << "]: got " << g[k] << " want " << w[k];
      }
    }
    int p = 0;
    for (int i = 0; i < c.n; ++i) {
      for (int j = 0; j < i + offset; ++j, ++p) {
        double mag = 0;  // sum |a_k b_k|: scale of the rounding error
        for (int k = 0; k < c.dim; ++k) {
          mag += std::fabs(static_cast<double>(t[i * c.dim + k]) * t[j * c.dim + k]);
        }
        const double tol = 2.0 * c.dim * FLT_EPSILON * mag + 1e-30;
        const float gv = g[c.dim + p];
        const float wv = w[c.dim + p];
        if (!(std::fabs(static_cast<double>(gv) - wv) <= tol) && bad++ < 10) {
          ADD_FAILURE() << "row " << r << " pair " << p << " (" << i << "," << j << "): got "
                        << gv << " want " << wv << " tol " << tol
                        << (IsPoison(gv) ? " (never written)" : "");
        }
      }
    }
    for (int64_t k = width; k < out_stride; ++k) {
      if (!IsPoison(g[k]) && bad++ < 10) {
        ADD_FAILURE() << "row " << r << " padding column " << k << " was written";
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

std::vector<DotCase> DotCases() {
  std::vector<DotCase> cases;
  const int shapes[][2] = {{4, 4}, {17, 4}, {27, 16}, {27, 64}, {5, 7}};
  for (const auto& s : shapes) {
    for (bool self : {false, true}) {
      for (int64_t rows : {1, 3, 1000, 4096}) cases.push_back({s[0], s[1], self, rows, 0, 0});
      // Strided rows: an odd pad breaks 16-byte alignment (4-byte path).
      cases.push_back({s[0], s[1], self, 257, 3, 5});
      cases.push_back({s[0], s[1], self, 130, 4, 1});
    }
  }
  // Single vector (no pairs without self interaction) and two vectors.
  cases.push_back({1, 8, false, 100, 0, 0});
  cases.push_back({1, 8, true, 100, 0, 0});
  cases.push_back({2, 3, false, 77, 0, 2});
  // Rows too large to stage in 48 KB: the unstaged global path.
  cases.push_back({3, 4100, false, 37, 0, 0});
  cases.push_back({3, 4100, true, 5, 0, 3});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Shapes, DotInteractionTest, ::testing::ValuesIn(DotCases()));

TEST_F(CudaTest, DotInteractionZeroRowsLaunchesNothing) {
  EXPECT_EQ(LaunchDotInteraction(nullptr, 16, 0, 4, 4, false, nullptr, 10, stream_), cudaSuccess);
  ASSERT_CUDA(cudaStreamSynchronize(stream_));
}

TEST_F(CudaTest, DotInteractionRejectsBadArguments) {
  DeviceFloats a(64), b(64);
  // out_stride smaller than dim + pairs.
  EXPECT_EQ(LaunchDotInteraction(a.get(), 16, 1, 4, 4, false, b.get(), 9, stream_),
            cudaErrorInvalidValue);
  // feats_stride smaller than n * dim.
  EXPECT_EQ(LaunchDotInteraction(a.get(), 15, 1, 4, 4, false, b.get(), 10, stream_),
            cudaErrorInvalidValue);
  EXPECT_EQ(LaunchDotInteraction(a.get(), 16, -1, 4, 4, false, b.get(), 10, stream_),
            cudaErrorInvalidValue);
  EXPECT_EQ(LaunchDotInteraction(nullptr, 16, 1, 4, 4, false, b.get(), 10, stream_),
            cudaErrorInvalidValue);
}

struct CrossCase {
  int64_t rows;
  int n;
  bool alias;     // x_next == x
  bool misalign;  // pointers offset by one float (4-byte path)
};

void PrintTo(const CrossCase& c, std::ostream* os) {
  *os << "rows=" << c.rows << " n=" << c.n << " alias=" << c.alias << " misalign=" << c.misalign;
}

class CrossCombineTest : public CudaTest, public ::testing::WithParamInterface<CrossCase> {};

TEST_P(CrossCombineTest, MatchesCpuTwin) {
  const CrossCase c = GetParam();
  std::mt19937_64 rng(31 * c.rows + c.n + (c.alias ? 1 : 0));
  const int64_t total = c.rows * c.n;
  const int rank = 3;
  // A random low-rank layer; t = W (V x) + b computed like the twin does
  // (two GEMMs + bias) so the twin's x_next and the GPU's agree up to the
  // final rounding.
  const std::vector<float> v = RandomNonZero(static_cast<size_t>(rank) * c.n, rng, 0.5f);
  const std::vector<float> w = RandomNonZero(static_cast<size_t>(rank) * c.n, rng, 0.5f);
  const std::vector<float> bias = RandomNonZero(c.n, rng, 0.1f);
  const std::vector<float> x0 = RandomNonZero(total, rng);
  const std::vector<float> x = RandomNonZero(total, rng);
  const int64_t padded = RoundUpRows(c.rows);
  std::vector<float> low(padded * rank, 0.0f), t(padded * c.n, 0.0f);
  std::vector<float> xp(padded * c.n, 0.0f), x0p(padded * c.n, 0.0f);
  std::copy(x.begin(), x.end(), xp.begin());
  std::copy(x0.begin(), x0.end(), x0p.begin());
  LinearForward(LinearView{v.data(), nullptr, c.n, rank}, xp.data(), c.n, padded,
                Activation::kNone, low.data(), rank);
  LinearForward(LinearView{w.data(), bias.data(), rank, c.n}, low.data(), rank, padded,
                Activation::kNone, t.data(), c.n);
  std::vector<float> want(padded * c.n), scratch(padded * rank);
  CrossLayerForward(CrossLayerView{v.data(), w.data(), bias.data(), c.n, rank}, x0p.data(),
                    xp.data(), padded, scratch.data(), want.data());

  const int off = c.misalign ? 1 : 0;
  DeviceFloats d_x0(total + 1), d_x(total + 1), d_t(total + 1), d_next(total + 1);
  ASSERT_CUDA(cudaMemcpy(d_x0.get() + off, x0.data(), total * 4, cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemcpy(d_x.get() + off, x.data(), total * 4, cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemcpy(d_t.get() + off, t.data(), total * 4, cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemset(d_next.get(), 0xff, (total + 1) * 4));
  float* next = c.alias ? d_x.get() + off : d_next.get() + off;
  ASSERT_CUDA(LaunchCrossCombine(d_x0.get() + off, d_x.get() + off, d_t.get() + off, c.rows, c.n,
                                 next, stream_));
  ASSERT_CUDA(cudaStreamSynchronize(stream_));
  std::vector<float> got(total);
  ASSERT_CUDA(cudaMemcpy(got.data(), next, total * 4, cudaMemcpyDeviceToHost));

  int64_t bad = 0;
  for (int64_t e = 0; e < total; ++e) {
    // The GPU's fma is the correctly rounded x0 * t + x; the twin rounds the
    // product and the sum (and may form t in another order).
    const double exact = static_cast<double>(x0[e]) * t[e] + x[e];
    const double mag = std::fabs(static_cast<double>(x0[e]) * t[e]) + std::fabs(x[e]);
    const bool fma_ok = std::fabs(got[e] - exact) <= 0.51 * FLT_EPSILON * std::fabs(exact) + 1e-38;
    const bool twin_ok = std::fabs(got[e] - want[e]) <= 1e-5 * mag + 1e-30;
    if (!(fma_ok && twin_ok) && bad++ < 10) {
      ADD_FAILURE() << "element " << e << ": got " << got[e] << " twin " << want[e] << " exact "
                    << exact << (IsPoison(got[e]) ? " (never written)" : "");
    }
  }
  EXPECT_EQ(bad, 0);
  if (!c.alias) {
    float edge[1];
    const float* guard = c.misalign ? d_next.get() : d_next.get() + total;
    ASSERT_CUDA(cudaMemcpy(edge, guard, 4, cudaMemcpyDeviceToHost));
    EXPECT_TRUE(IsPoison(edge[0])) << "wrote outside x_next";
  }
}

std::vector<CrossCase> CrossCases() {
  std::vector<CrossCase> cases;
  for (int64_t rows : {1, 3, 1000, 4096}) {
    for (int n : {4, 7, 432}) {
      cases.push_back({rows, n, false, false});
      cases.push_back({rows, n, true, false});
    }
  }
  cases.push_back({1000, 432, false, true});
  cases.push_back({333, 16, true, true});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Shapes, CrossCombineTest, ::testing::ValuesIn(CrossCases()));

TEST_F(CudaTest, CrossCombineZeroRowsLaunchesNothing) {
  EXPECT_EQ(LaunchCrossCombine(nullptr, nullptr, nullptr, 0, 16, nullptr, stream_), cudaSuccess);
  EXPECT_EQ(LaunchCrossCombine(nullptr, nullptr, nullptr, 5, 0, nullptr, stream_), cudaSuccess);
  EXPECT_EQ(LaunchCrossCombine(nullptr, nullptr, nullptr, -1, 16, nullptr, stream_),
            cudaErrorInvalidValue);
  ASSERT_CUDA(cudaStreamSynchronize(stream_));
}

}  // namespace
}  // namespace rankd::kernels::cuda
