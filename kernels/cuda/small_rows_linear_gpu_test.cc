// LaunchSmallRowsLinear against its CPU twin kernels::LinearForward, on the
// GPU machine. Random shapes (widths 1..2,000, rows 0..16, leading dimensions
// with padding, aligned and misaligned buffers for both load widths), random
// non-zero inputs; outputs poisoned with NaN before every launch, so a
// column or row the kernel skipped shows, and the padding it must not touch
// is checked to still be poison. Chains of layers launched as programmatic
// dependents (the worker's use) are checked with reused buffers, back to back
// and captured into a CUDA graph, so a layer reading before the one before
// it finished would read the wrong values. RANKD_TEST_SEED replays a run.
#include "kernels/cuda/small_rows_linear.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dense.h"
#include "kernels/cpu/types.h"
#include "kernels/cuda/dense_layers.h"
#include "kernels/cuda/gpu_test_util.h"

namespace rankd::kernels::cuda {
namespace {

using testing::DeviceFloats;

bool IsPoison(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return bits == 0xFFFFFFFFu;
}

std::vector<float> NonZero(size_t n, float scale, std::mt19937_64* rng) {
  return testing::NonZeroUniform(n, -scale, scale, rng);
}

// One layer's shapes and placement.
struct Case {
  int in = 1, out = 1, rows = 1;
  int64_t x_ld = 1, y_ld = 1;
  int x_off = 0, w_off = 0;  // floats past an aligned address (1: scalar loads)
  bool bias = true;
  Activation act = Activation::kRelu;

  std::string Name() const {
    return "in=" + std::to_string(in) + " out=" + std::to_string(out) +
           " rows=" + std::to_string(rows) + " x_ld=" + std::to_string(x_ld) +
           " y_ld=" + std::to_string(y_ld) + " x_off=" + std::to_string(x_off) +
           " w_off=" + std::to_string(w_off) + " bias=" + (bias ? "yes" : "no") +
           " relu=" + (act == Activation::kRelu ? "yes" : "no");
  }
};

// |got - want| within fp32 rounding of a sum of `in` products: relative to
// the sum of the products' magnitudes.
void ExpectClose(float got, double want, double magnitude, const std::string& where, int* bad) {
  const double tol = 2e-6 * magnitude + 1e-30;
  if (std::fabs(got - want) <= tol) return;  // NaN fails
  if (++*bad <= 5) {
    ADD_FAILURE() << where << " = " << got << ", cpu " << want << " (tolerance " << tol << ")"
                  << (IsPoison(got) ? " never written" : "");
  }
}

class SmallRowsLinearTest : public ::testing::Test {
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

  void Check(const Case& c) {
    SCOPED_TRACE(c.Name() + " seed=" + std::to_string(seed_));
    std::vector<float> x = NonZero(static_cast<size_t>(std::max(c.rows, 1) * c.x_ld), 1.0f, &rng_);
    std::vector<float> w = NonZero(static_cast<size_t>(c.out) * c.in, 1.0f, &rng_);
    std::vector<float> b = NonZero(static_cast<size_t>(c.out), 1.0f, &rng_);
    // Columns past `in` are NaN: reading them would poison the sums.
    for (int r = 0; r < c.rows; ++r) {
      for (int64_t k = c.in; k < c.x_ld; ++k) x[r * c.x_ld + k] = std::nanf("");
    }
    DeviceFloats dx(x.size() + 4), dw(w.size() + 4), db(b.size());
    ASSERT_CUDA(cudaMemcpy(dx.get() + c.x_off, x.data(), 4 * x.size(), cudaMemcpyHostToDevice));
    ASSERT_CUDA(cudaMemcpy(dw.get() + c.w_off, w.data(), 4 * w.size(), cudaMemcpyHostToDevice));
    ASSERT_CUDA(cudaMemcpy(db.get(), b.data(), 4 * b.size(), cudaMemcpyHostToDevice));
    const size_t y_size = static_cast<size_t>(c.rows + 1) * c.y_ld;  // + one row of sentinels
    DeviceFloats dy(y_size);
    dy.Poison();

    SmallRowsLinearArgs a;
    a.weight = dw.get() + c.w_off;
    a.bias = c.bias ? db.get() : nullptr;
    a.in = c.in;
    a.out = c.out;
    a.x = dx.get() + c.x_off;
    a.x_ld = c.x_ld;
    a.rows = c.rows;
    a.act = c.act;
    a.y = dy.get();
    a.y_ld = c.y_ld;
    ASSERT_CUDA(LaunchSmallRowsLinear(a, /*chained=*/(c.rows & 1) != 0, stream_));
    ASSERT_CUDA(cudaStreamSynchronize(stream_));
    const std::vector<float> got = dy.ToHost();

    std::vector<float> want(static_cast<size_t>(std::max(c.rows, 1)) * c.out);
    LinearForward(LinearView{w.data(), c.bias ? b.data() : nullptr, c.in, c.out}, x.data(),
                  c.x_ld, c.rows, c.act, want.data(), c.out);
    int bad = 0;
    for (int r = 0; r < c.rows; ++r) {
      for (int o = 0; o < c.out; ++o) {
        double magnitude = c.bias ? std::fabs(b[o]) : 0.0;
        for (int k = 0; k < c.in; ++k) magnitude += std::fabs(x[r * c.x_ld + k] * w[o * c.in + k]);
        ExpectClose(got[r * c.y_ld + o], want[r * c.out + o], magnitude,
                    "y[" + std::to_string(r) + "," + std::to_string(o) + "]", &bad);
      }
      for (int64_t o = c.out; o < c.y_ld; ++o) {
        if (!IsPoison(got[r * c.y_ld + o]) && ++bad <= 5) {
          ADD_FAILURE() << "wrote padding y[" << r << "," << o << "]";
        }
      }
    }
    for (int64_t o = 0; o < c.y_ld; ++o) {
      if (!IsPoison(got[static_cast<size_t>(c.rows) * c.y_ld + o]) && ++bad <= 5) {
        ADD_FAILURE() << "wrote past the last row at column " << o;
      }
    }
    EXPECT_EQ(bad, 0);
  }

  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
  cudaStream_t stream_ = nullptr;
};

TEST_F(SmallRowsLinearTest, KaggleShapes) {
  // The kaggle MLPs as DeviceModel pads them (bottom 16-512-256-64-16, top
  // 368-512-256), at every row count of the smallest bucket.
  const int shapes[][2] = {{16, 512}, {512, 256}, {256, 64}, {64, 16}, {368, 512}};
  for (const auto& s : shapes) {
    for (int rows = 1; rows <= kSmallRowsMax; ++rows) {
      Case c;
      c.in = s[0];
      c.out = s[1];
      c.rows = rows;
      c.x_ld = c.in;
      c.y_ld = c.out;
      ASSERT_NO_FATAL_FAILURE(Check(c));
    }
  }
}

TEST_F(SmallRowsLinearTest, RandomShapes) {
  const int widths[] = {1, 2, 3, 4, 5, 7, 13, 16, 17, 31, 32, 33, 64, 100, 128, 129, 367, 512, 1000, 2000};
  std::uniform_int_distribution<int> pick(0, static_cast<int>(std::size(widths)) - 1);
  std::uniform_int_distribution<int> rows(0, kSmallRowsMax), pad(0, 5), coin(0, 1);
  for (int i = 0; i < 300; ++i) {
    Case c;
    c.in = widths[pick(rng_)];
    c.out = widths[pick(rng_)];
    c.rows = rows(rng_);
    c.x_ld = c.in + pad(rng_);
    c.y_ld = c.out + pad(rng_);
    c.x_off = coin(rng_) != 0 && coin(rng_) != 0 ? 1 : 0;
    c.w_off = coin(rng_) != 0 && coin(rng_) != 0 ? 1 : 0;
    c.bias = coin(rng_) != 0;
    c.act = coin(rng_) != 0 ? Activation::kRelu : Activation::kNone;
    ASSERT_NO_FATAL_FAILURE(Check(c));
  }
}

TEST_F(SmallRowsLinearTest, RefusesWhatItCannotCompute) {
  DeviceFloats buf(64);
  SmallRowsLinearArgs a;
  a.weight = a.x = buf.get();
  a.y = buf.get() + 32;
  a.in = a.out = 4;
  a.x_ld = a.y_ld = 4;
  a.rows = 2;
  a.act = Activation::kRelu;
  ASSERT_CUDA(LaunchSmallRowsLinear(a, false, stream_));
  SmallRowsLinearArgs bad = a;
  bad.rows = kSmallRowsMax + 1;
  EXPECT_EQ(LaunchSmallRowsLinear(bad, false, stream_), cudaErrorInvalidValue);
  bad = a;
  bad.rows = -1;
  EXPECT_EQ(LaunchSmallRowsLinear(bad, false, stream_), cudaErrorInvalidValue);
  bad = a;
  bad.act = Activation::kSigmoid;
  EXPECT_EQ(LaunchSmallRowsLinear(bad, false, stream_), cudaErrorInvalidValue);
  bad = a;
  bad.x_ld = 3;
  EXPECT_EQ(LaunchSmallRowsLinear(bad, false, stream_), cudaErrorInvalidValue);
  bad = a;
  bad.y_ld = 3;
  EXPECT_EQ(LaunchSmallRowsLinear(bad, false, stream_), cudaErrorInvalidValue);
  bad = a;
  bad.weight = nullptr;
  EXPECT_EQ(LaunchSmallRowsLinear(bad, false, stream_), cudaErrorInvalidValue);
  bad = a;
  bad.in = 0;
  EXPECT_EQ(LaunchSmallRowsLinear(bad, false, stream_), cudaErrorInvalidValue);
  ASSERT_CUDA(cudaStreamSynchronize(stream_));
}

// An MLP (widths[0] -> ... -> widths.back() -> 1, ReLU, sigmoid last) run
// the worker's way: first layer an ordinary launch, every later layer and the
// final logit chained, activations ping-ponging between two buffers.
class ChainTest : public SmallRowsLinearTest {
 protected:
  static constexpr int kRows = kSmallRowsMax;
  void Build(const std::vector<int>& widths) {
    widths_ = widths;
    int max_width = 0;
    for (int w : widths) max_width = std::max(max_width, w);
    for (size_t i = 0; i + 1 < widths.size(); ++i) {
      const float s = 2.0f / std::sqrt(static_cast<float>(widths[i]));
      w_.push_back(NonZero(static_cast<size_t>(widths[i]) * widths[i + 1], s, &rng_));
      b_.push_back(NonZero(static_cast<size_t>(widths[i + 1]), 0.1f, &rng_));
    }
    w_.push_back(NonZero(widths.back(), 2.0f / std::sqrt(static_cast<float>(widths.back())), &rng_));
    b_.push_back(NonZero(1, 0.1f, &rng_));
    for (size_t i = 0; i < w_.size(); ++i) {
      dw_.emplace_back(new DeviceFloats(w_[i]));
      db_.emplace_back(new DeviceFloats(b_[i]));
    }
    ping_.reset(new DeviceFloats(static_cast<size_t>(kRows) * max_width));
    pong_.reset(new DeviceFloats(static_cast<size_t>(kRows) * max_width));
  }

  // Enqueues the chain from `x` to `scores` (no sync).
  cudaError_t Enqueue(const float* x, float* scores) {
    const float* in = x;
    for (size_t i = 0; i + 1 < widths_.size(); ++i) {
      float* out = (in == ping_->get()) ? pong_->get() : ping_->get();
      SmallRowsLinearArgs a;
      a.weight = dw_[i]->get();
      a.bias = db_[i]->get();
      a.in = widths_[i];
      a.out = widths_[i + 1];
      a.x = in;
      a.x_ld = widths_[i];
      a.rows = kRows;
      a.act = Activation::kRelu;
      a.y = out;
      a.y_ld = widths_[i + 1];
      const cudaError_t e = LaunchSmallRowsLinear(a, /*chained=*/i > 0, stream_);
      if (e != cudaSuccess) return e;
      in = out;
    }
    return LaunchFinalLogitSigmoid(in, widths_.back(), kRows, dw_.back()->get(),
                                   db_.back()->get(), widths_.back(), scores, stream_,
                                   /*chained=*/true);
  }

  std::vector<float> Reference(const std::vector<float>& x) const {
    std::vector<float> in = x, out;
    for (size_t i = 0; i + 1 < widths_.size(); ++i) {
      out.assign(static_cast<size_t>(kRows) * widths_[i + 1], 0.0f);
      LinearForward(LinearView{w_[i].data(), b_[i].data(), widths_[i], widths_[i + 1]}, in.data(),
                    widths_[i], kRows, Activation::kRelu, out.data(), widths_[i + 1]);
      in.swap(out);
    }
    std::vector<float> scores(kRows);
    LinearForward(LinearView{w_.back().data(), b_.back().data(), widths_.back(), 1}, in.data(),
                  widths_.back(), kRows, Activation::kSigmoid, scores.data(), 1);
    return scores;
  }

  void ExpectScores(const std::vector<float>& got, const std::vector<float>& want, int run) {
    for (int r = 0; r < kRows; ++r) {
      EXPECT_NEAR(got[r], want[r], 2e-5) << "run " << run << " row " << r << " seed " << seed_;
    }
  }

  std::vector<int> widths_;
  std::vector<std::vector<float>> w_, b_;
  std::vector<std::unique_ptr<DeviceFloats>> dw_, db_;
  std::unique_ptr<DeviceFloats> ping_, pong_;
};

TEST_F(ChainTest, BackToBackRunsWithReusedBuffers) {
  Build({16, 512, 256, 64, 16});
  constexpr int kRuns = 40;
  std::vector<std::vector<float>> xs;
  DeviceFloats dx(static_cast<size_t>(kRuns) * kRows * 16), scores(static_cast<size_t>(kRuns) * kRows);
  scores.Poison();
  for (int i = 0; i < kRuns; ++i) {
    xs.push_back(NonZero(static_cast<size_t>(kRows) * 16, 1.0f, &rng_));
    ASSERT_CUDA(cudaMemcpy(dx.get() + static_cast<size_t>(i) * kRows * 16, xs[i].data(),
                           4 * xs[i].size(), cudaMemcpyHostToDevice));
  }
  for (int i = 0; i < kRuns; ++i) {
    ASSERT_CUDA(Enqueue(dx.get() + static_cast<size_t>(i) * kRows * 16,
                        scores.get() + static_cast<size_t>(i) * kRows));
  }
  ASSERT_CUDA(cudaStreamSynchronize(stream_));
  const std::vector<float> got = scores.ToHost();
  for (int i = 0; i < kRuns; ++i) {
    ExpectScores(std::vector<float>(got.begin() + i * kRows, got.begin() + (i + 1) * kRows),
                 Reference(xs[i]), i);
  }
}

TEST_F(ChainTest, CapturedGraphReplays) {
  Build({368, 512, 256});
  DeviceFloats dx(static_cast<size_t>(kRows) * 368), scores(kRows);
  cudaGraph_t graph = nullptr;
  ASSERT_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  const cudaError_t enq = Enqueue(dx.get(), scores.get());
  ASSERT_CUDA(cudaStreamEndCapture(stream_, &graph));
  ASSERT_CUDA(enq);
  cudaGraphExec_t exec = nullptr;
  ASSERT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  cudaGraphDestroy(graph);
  for (int run = 0; run < 20; ++run) {
    const std::vector<float> x = NonZero(static_cast<size_t>(kRows) * 368, 1.0f, &rng_);
    ASSERT_CUDA(cudaMemcpyAsync(dx.get(), x.data(), 4 * x.size(), cudaMemcpyHostToDevice, stream_));
    ASSERT_CUDA(cudaMemsetAsync(scores.get(), 0xFF, 4 * kRows, stream_));
    ASSERT_CUDA(cudaGraphLaunch(exec, stream_));
    ASSERT_CUDA(cudaStreamSynchronize(stream_));
    ExpectScores(scores.ToHost(), Reference(x), run);
  }
  cudaGraphExecDestroy(exec);
}

}  // namespace
}  // namespace rankd::kernels::cuda
