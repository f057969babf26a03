// LaunchNarrowMlp against its CPU twin (kernels::LinearForward once per
// layer on TF32-rounded inputs and weights), on the GPU machine. Chains of 1-4 layers with random widths up to
// the limit and random row counts (0 to several thousand, past one wave of
// blocks so blocks loop over tiles), padded leading dimensions whose unread
// columns are NaN, misaligned weights (the scalar staging path), layers with
// and without bias and ReLU. Outputs are poisoned before every launch, so a
// row or column the kernel skipped shows, and the padding it must not touch
// is checked to still be poison. Chains of small integers must match the CPU
// exactly (every sum is exact in fp32, whatever its order, and both sides
// round it to TF32 alike); random chains within fp32 rounding of the sums'
// magnitudes carried through the layers. A
// second launch chained (programmatic dependent) on the first's output,
// captured into a CUDA graph and replayed, checks that the chained kernel
// waits for its input. RANKD_TEST_SEED replays a run.
#include "kernels/cuda/narrow_mlp.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dense.h"
#include "kernels/cpu/types.h"
#include "kernels/cuda/gpu_test_util.h"

namespace rankd::kernels::cuda {
namespace {

using testing::DeviceFloats;

bool IsPoison(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return bits == 0xFFFFFFFFu;
}

// A chain's host side: shapes, weights and the expected output.
struct Chain {
  std::vector<int> widths;  // widths[0] = in of the first layer, then each out
  std::vector<bool> bias, relu;
  std::vector<std::vector<float>> w, b;
  int64_t rows = 0, x_ld = 0, y_ld = 0;
  int w_off = 0;  // floats past an aligned address (odd: the scalar staging path)
  bool integers = false;

  int layers() const { return static_cast<int>(widths.size()) - 1; }
  std::string Name() const {
    std::string s = "widths=";
    for (int v : widths) s += std::to_string(v) + ",";
    return s + " rows=" + std::to_string(rows) + " x_ld=" + std::to_string(x_ld) +
           " y_ld=" + std::to_string(y_ld) + " w_off=" + std::to_string(w_off) +
           (integers ? " integers" : "");
  }
};

// Integer draws: -3..3 for scale >= 1 (inputs), else -1..1 (weights of
// layers wider than one input, biases), so that four layers of width 32 keep
// every sum below 2^24.
float Draw(bool integers, float scale, std::mt19937_64* rng) {
  if (integers) {
    const int half = scale >= 1.0f ? 3 : 1;
    return static_cast<float>(static_cast<int>((*rng)() % (2 * half + 1)) - half);
  }
  std::uniform_real_distribution<float> u(-scale, scale);
  return u(*rng);
}

void FillWeights(Chain* c, std::mt19937_64* rng) {
  for (int i = 0; i < c->layers(); ++i) {
    const int in = c->widths[i], out = c->widths[i + 1];
    const float scale = 1.0f / std::sqrt(static_cast<float>(in));
    c->w.emplace_back(static_cast<size_t>(in) * out);
    c->b.emplace_back(out);
    for (float& v : c->w.back()) v = Draw(c->integers, scale, rng);
    for (float& v : c->b.back()) v = Draw(c->integers, 0.5f, rng);
  }
}

// x rounded to TF32 as the kernel rounds it (cvt.rna: to nearest, ties away
// from zero).
float RoundTf32(float x) {
  if (!std::isfinite(x)) return x;
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits = (bits + 0x1000u) & ~0x1FFFu;
  std::memcpy(&x, &bits, 4);
  return x;
}

std::vector<float> RoundedTf32(std::vector<float> v) {
  for (float& f : v) f = RoundTf32(f);
  return v;
}

// CPU twin, layer by layer on TF32-rounded inputs and weights; also carries
// |x| through |W| and |b| (in double) for the rounding bound of each output.
void Expected(const Chain& c, const std::vector<float>& x, std::vector<float>* want,
              std::vector<double>* magnitude) {
  std::vector<float> cur = RoundedTf32(x);
  int64_t cur_ld = c.x_ld;
  std::vector<double> mag(static_cast<size_t>(c.rows) * c.widths[0]);
  for (int64_t r = 0; r < c.rows; ++r) {
    for (int k = 0; k < c.widths[0]; ++k) mag[r * c.widths[0] + k] = std::fabs(x[r * c.x_ld + k]);
  }
  for (int i = 0; i < c.layers(); ++i) {
    const int in = c.widths[i], out = c.widths[i + 1];
    std::vector<float> next(static_cast<size_t>(std::max<int64_t>(c.rows, 1)) * out);
    const std::vector<float> w = RoundedTf32(c.w[i]);
    LinearForward(LinearView{w.data(), c.bias[i] ? c.b[i].data() : nullptr, in, out}, cur.data(),
                  cur_ld, c.rows, c.relu[i] ? Activation::kRelu : Activation::kNone,
                  next.data(), out);
    std::vector<double> next_mag(static_cast<size_t>(c.rows) * out);
    for (int64_t r = 0; r < c.rows; ++r) {
      for (int o = 0; o < out; ++o) {
        double m = c.bias[i] ? std::fabs(c.b[i][o]) : 0.0;
        for (int k = 0; k < in; ++k) m += mag[r * in + k] * std::fabs(c.w[i][o * in + k]);
        next_mag[r * out + o] = m;
      }
    }
    cur = i + 1 < c.layers() ? RoundedTf32(std::move(next)) : std::move(next);
    cur_ld = out;
    mag.swap(next_mag);
  }
  want->swap(cur);
  magnitude->swap(mag);
}

class NarrowMlpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    seed_ = testing::TestSeed();
    rng_.seed(seed_);
    ASSERT_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // Uploads the chain's weights; fills args' layers (pointers into dw).
  void Upload(const Chain& c, std::deque<DeviceFloats>* dw, NarrowMlpArgs* a) {
    a->num_layers = c.layers();
    for (int i = 0; i < c.layers(); ++i) {
      dw->emplace_back(c.w[i].size() + 4);
      DeviceFloats& w = dw->back();
      cudaMemcpy(w.get() + c.w_off, c.w[i].data(), 4 * c.w[i].size(), cudaMemcpyHostToDevice);
      dw->emplace_back(c.b[i]);
      a->layers[i].weight = w.get() + c.w_off;
      a->layers[i].bias = c.bias[i] ? dw->back().get() : nullptr;
      a->layers[i].in = c.widths[i];
      a->layers[i].out = c.widths[i + 1];
      a->layers[i].act = c.relu[i] ? Activation::kRelu : Activation::kNone;
    }
  }

  // x with NaN past each row's `in` columns.
  std::vector<float> Input(const Chain& c) {
    std::vector<float> x(static_cast<size_t>(std::max<int64_t>(c.rows, 1)) * c.x_ld);
    for (int64_t r = 0; r < c.rows; ++r) {
      for (int64_t k = 0; k < c.x_ld; ++k) {
        x[r * c.x_ld + k] = k < c.widths[0] ? Draw(c.integers, 1.0f, &rng_) : std::nanf("");
      }
    }
    return x;
  }

  // Compares y ([rows + 1, y_ld], the last row sentinels) with the twin.
  void Compare(const Chain& c, const std::vector<float>& got, const std::vector<float>& want,
               const std::vector<double>& magnitude) {
    const int out = c.widths.back();
    int bad = 0;
    for (int64_t r = 0; r <= c.rows; ++r) {
      for (int64_t o = 0; o < c.y_ld; ++o) {
        const float g = got[r * c.y_ld + o];
        const std::string where = "y[" + std::to_string(r) + "," + std::to_string(o) + "]";
        if (r == c.rows || o >= out) {
          if (!IsPoison(g) && ++bad <= 5) ADD_FAILURE() << "wrote outside the output: " << where;
          continue;
        }
        const double w = want[r * out + o];
        // fp32 sums in another order; past the first layer an input may
        // round to the TF32 value next to the twin's (one part in 2^11).
        const double rel = c.layers() == 1 ? 1e-5 : 1e-3;
        const double tol = c.integers ? 0.0 : rel * magnitude[r * out + o] + 1e-30;
        if (!(std::fabs(g - w) <= tol) && ++bad <= 5) {
          ADD_FAILURE() << where << " = " << g << ", cpu " << w << " (tolerance " << tol << ")"
                        << (IsPoison(g) ? " never written" : "");
        }
      }
    }
    EXPECT_EQ(bad, 0);
  }

  void Check(const Chain& c) {
    SCOPED_TRACE(c.Name() + " seed=" + std::to_string(seed_));
    std::deque<DeviceFloats> dw;
    NarrowMlpArgs a;
    Upload(c, &dw, &a);
    ASSERT_TRUE(NarrowMlpFits(a.layers, a.num_layers));
    const std::vector<float> x = Input(c);
    DeviceFloats dx(x);
    DeviceFloats dy(static_cast<size_t>(c.rows + 1) * c.y_ld);  // + one row of sentinels
    dy.Poison();
    a.x = dx.get();
    a.x_ld = c.x_ld;
    a.rows = c.rows;
    a.y = dy.get();
    a.y_ld = c.y_ld;
    ASSERT_CUDA(LaunchNarrowMlp(a, /*chained=*/(c.rows & 1) != 0, stream_));
    ASSERT_CUDA(cudaStreamSynchronize(stream_));
    std::vector<float> want;
    std::vector<double> magnitude;
    Expected(c, x, &want, &magnitude);
    Compare(c, dy.ToHost(), want, magnitude);
  }

  Chain Random(int layers, int64_t max_rows, bool integers) {
    Chain c;
    c.integers = integers;
    // Integer chains stay narrow and short so every sum is exact in fp32.
    const int max_width = integers ? 32 : kNarrowMlpMaxWidth;
    do {
      c.widths.clear();
      for (int i = 0; i <= layers; ++i) c.widths.push_back(1 + static_cast<int>(rng_() % max_width));
      std::vector<NarrowLayer> probe(layers);
      for (int i = 0; i < layers; ++i) probe[i] = NarrowLayer{nullptr, nullptr, c.widths[i], c.widths[i + 1]};
      if (NarrowMlpFits(probe.data(), layers)) break;
    } while (true);
    for (int i = 0; i < layers; ++i) {
      c.bias.push_back(rng_() % 4 != 0);
      c.relu.push_back(rng_() % 3 != 0);
    }
    c.rows = static_cast<int64_t>(rng_() % (max_rows + 1));
    c.x_ld = c.widths[0] + static_cast<int64_t>(rng_() % 5);
    c.y_ld = c.widths.back() + static_cast<int64_t>(rng_() % 3);
    c.w_off = static_cast<int>(rng_() % 2);
    FillWeights(&c, &rng_);
    return c;
  }

  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
  cudaStream_t stream_ = nullptr;
};

TEST_F(NarrowMlpTest, KaggleBottomSegments) {
  // The narrow parts of kaggle's bottom MLP (16 -> 512 and 256 -> 64 -> 16,
  // as DeviceModel pads it), at the worker's bucket sizes and between them.
  for (const std::vector<int>& widths : {std::vector<int>{16, 512}, std::vector<int>{256, 64, 16}}) {
    for (int64_t rows : {17, 256, 1000, 2048, 4096, 9000}) {
      Chain c;
      c.widths = widths;
      c.bias.assign(widths.size() - 1, true);
      c.relu.assign(widths.size() - 1, true);
      c.rows = rows;
      c.x_ld = widths[0];
      c.y_ld = widths.back();
      FillWeights(&c, &rng_);
      Check(c);
    }
  }
}

TEST_F(NarrowMlpTest, IntegerChainsAreExact) {
  for (int t = 0; t < 40; ++t) Check(Random(1 + t % kNarrowMlpMaxLayers, 300, /*integers=*/true));
}

TEST_F(NarrowMlpTest, RandomChainsMatchTheCpu) {
  for (int t = 0; t < 40; ++t) Check(Random(1 + t % kNarrowMlpMaxLayers, 600, /*integers=*/false));
  // More tiles than one wave of blocks: each block loops.
  for (int t = 0; t < 4; ++t) {
    Chain c = Random(1 + t, 0, /*integers=*/false);
    c.rows = 9000 + static_cast<int64_t>(rng_() % 16);
    Check(c);
  }
}

TEST_F(NarrowMlpTest, ChainedLaunchWaitsForItsInputInAGraph) {
  // first: x -> h (the kernel writes h); second, chained: h -> y. Replayed
  // with y poisoned in between; the second must see the first's h.
  Chain first = Random(2, 0, false), second;
  first.rows = 3000;
  first.x_ld = first.widths[0];
  first.y_ld = first.widths.back();
  second.widths = {first.widths.back(), 24, 33};  // fits with a 512-wide input
  second.bias = {true, true};
  second.relu = {true, false};
  second.rows = first.rows;
  second.x_ld = first.y_ld;
  second.y_ld = 33;
  FillWeights(&second, &rng_);
  SCOPED_TRACE(first.Name() + " seed=" + std::to_string(seed_));

  std::deque<DeviceFloats> dw1, dw2;
  NarrowMlpArgs a1, a2;
  Upload(first, &dw1, &a1);
  Upload(second, &dw2, &a2);
  const std::vector<float> x = Input(first);
  DeviceFloats dx(x), dh(static_cast<size_t>(first.rows) * first.y_ld);
  DeviceFloats dy(static_cast<size_t>(second.rows + 1) * second.y_ld);
  a1.x = dx.get();
  a1.x_ld = first.x_ld;
  a1.rows = first.rows;
  a1.y = dh.get();
  a1.y_ld = first.y_ld;
  a2.x = dh.get();
  a2.x_ld = second.x_ld;
  a2.rows = second.rows;
  a2.y = dy.get();
  a2.y_ld = second.y_ld;

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  ASSERT_CUDA(LaunchNarrowMlp(a1, /*chained=*/false, stream_));
  ASSERT_CUDA(LaunchNarrowMlp(a2, /*chained=*/true, stream_));
  ASSERT_CUDA(cudaStreamEndCapture(stream_, &graph));
  ASSERT_CUDA(cudaGraphInstantiate(&exec, graph, 0));

  // Expected: the twin over both chains, the second on the twin's h.
  Chain both;
  both.widths = first.widths;
  both.widths.insert(both.widths.end(), second.widths.begin() + 1, second.widths.end());
  both.bias = first.bias;
  both.bias.insert(both.bias.end(), second.bias.begin(), second.bias.end());
  both.relu = first.relu;
  both.relu.insert(both.relu.end(), second.relu.begin(), second.relu.end());
  both.w = first.w;
  both.w.insert(both.w.end(), second.w.begin(), second.w.end());
  both.b = first.b;
  both.b.insert(both.b.end(), second.b.begin(), second.b.end());
  both.rows = first.rows;
  both.x_ld = first.x_ld;
  both.y_ld = second.y_ld;
  std::vector<float> want;
  std::vector<double> magnitude;
  Expected(both, x, &want, &magnitude);
  for (int replay = 0; replay < 3; ++replay) {
    dh.Poison();
    dy.Poison();
    ASSERT_CUDA(cudaGraphLaunch(exec, stream_));
    ASSERT_CUDA(cudaStreamSynchronize(stream_));
    Compare(both, dy.ToHost(), want, magnitude);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST_F(NarrowMlpTest, RefusesWhatItDoesNotTake) {
  DeviceFloats buf(1 << 20);
  float* p = buf.get();
  auto args = [&](std::vector<NarrowLayer> layers) {
    NarrowMlpArgs a;
    a.num_layers = static_cast<int>(layers.size());
    for (size_t i = 0; i < layers.size() && i < kNarrowMlpMaxLayers; ++i) a.layers[i] = layers[i];
    a.x = p;
    a.x_ld = layers.empty() ? 1 : layers.front().in;
    a.rows = 10;
    a.y = p;
    a.y_ld = layers.empty() ? 1 : layers.back().out;
    return a;
  };
  const NarrowLayer ok{p, p, 16, 32};
  EXPECT_EQ(LaunchNarrowMlp(args({ok}), false, stream_), cudaSuccess);
  ASSERT_CUDA(cudaStreamSynchronize(stream_));
  EXPECT_EQ(LaunchNarrowMlp(args({}), false, stream_), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchNarrowMlp(args({ok, NarrowLayer{p, p, 32, 32}, NarrowLayer{p, p, 32, 32},
                                  NarrowLayer{p, p, 32, 32}, NarrowLayer{p, p, 32, 32}}),
                            false, stream_),
            cudaErrorInvalidValue);  // five layers
  EXPECT_EQ(LaunchNarrowMlp(args({NarrowLayer{p, p, 16, 513}}), false, stream_),
            cudaErrorInvalidValue);  // too wide
  EXPECT_EQ(LaunchNarrowMlp(args({NarrowLayer{p, p, 0, 4}}), false, stream_),
            cudaErrorInvalidValue);
  EXPECT_EQ(LaunchNarrowMlp(args({ok, NarrowLayer{p, p, 31, 8}}), false, stream_),
            cudaErrorInvalidValue);  // in != the previous out
  EXPECT_EQ(LaunchNarrowMlp(args({NarrowLayer{p, p, 512, 512}}), false, stream_),
            cudaErrorInvalidValue);  // 1 MiB of weights
  EXPECT_EQ(LaunchNarrowMlp(args({NarrowLayer{p, p, 16, 32, Activation::kSigmoid}}), false,
                            stream_),
            cudaErrorInvalidValue);
  EXPECT_EQ(LaunchNarrowMlp(args({NarrowLayer{nullptr, p, 16, 32}}), false, stream_),
            cudaErrorInvalidValue);
  NarrowMlpArgs a = args({ok});
  a.x_ld = 15;
  EXPECT_EQ(LaunchNarrowMlp(a, false, stream_), cudaErrorInvalidValue);
  a = args({ok});
  a.y_ld = 31;
  EXPECT_EQ(LaunchNarrowMlp(a, false, stream_), cudaErrorInvalidValue);
  a = args({ok});
  a.rows = -1;
  EXPECT_EQ(LaunchNarrowMlp(a, false, stream_), cudaErrorInvalidValue);
  a = args({ok});
  a.rows = 0;
  a.x = nullptr;
  EXPECT_EQ(LaunchNarrowMlp(a, false, stream_), cudaSuccess);  // nothing to do
  a.rows = 1;
  EXPECT_EQ(LaunchNarrowMlp(a, false, stream_), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace rankd::kernels::cuda
