// LaunchFinalLogitSigmoid against its CPU twin kernels::LinearForward
// (out = 1, Activation::kSigmoid), on the GPU machine. Random inputs (never
// zeros) scaled so the logits have std ~1 (probabilities spread over (0, 1),
// not saturated), input padding filled with NaN, scores poisoned with NaN
// before every launch plus a sentinel after the last row; every score must be
// within 1e-6 (absolute) of the CPU's.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
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

constexpr double kTolerance = 1e-6;
constexpr uint32_t kPoisonBits = 0xFFFFFFFFu;  // quiet NaN, what memset(0xFF) writes

bool IsPoison(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return bits == kPoisonBits;
}

float PoisonFloat() {
  float v;
  std::memcpy(&v, &kPoisonBits, sizeof(v));
  return v;
}

std::vector<float> Uniform(size_t n, float lo, float hi, std::mt19937* rng) {
  return testing::NonZeroUniform(n, lo, hi, rng);
}

struct SigCase {
  int in_dim = 1;
  int64_t rows = 1;
  int64_t stride = 0;  // 0: in_dim
  int x_off = 0;       // floats past a 256-byte aligned address
  int w_off = 0;
  bool bias = true;

  std::string Name() const {
    return "in_dim=" + std::to_string(in_dim) + " rows=" + std::to_string(rows) +
           " stride=" + std::to_string(stride) + " x_off=" + std::to_string(x_off) +
           " w_off=" + std::to_string(w_off) + " bias=" + (bias ? "yes" : "no");
  }
};

class FinalLogitSigmoidTest : public ::testing::Test {
 protected:
  static constexpr int64_t kMaxRows = 5000;
  static constexpr int64_t kMaxStride = 320;

  void SetUp() override {
    int n = 0;
    ASSERT_CUDA(cudaGetDeviceCount(&n));
    ASSERT_GT(n, 0) << "no GPU: this test runs on the GPU machine";
    ASSERT_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    ASSERT_NO_FATAL_FAILURE(Reserve(kMaxRows, kMaxStride));
    ASSERT_CUDA(cudaMalloc(reinterpret_cast<void**>(&w_), (kMaxStride + 64) * sizeof(float)));
    ASSERT_CUDA(cudaMalloc(reinterpret_cast<void**>(&b_), 64 * sizeof(float)));
  }
  void TearDown() override {
    if (x_ != nullptr) {
      EXPECT_CUDA(cudaFree(x_));
    }
    if (scores_ != nullptr) {
      EXPECT_CUDA(cudaFree(scores_));
    }
    if (w_ != nullptr) {
      EXPECT_CUDA(cudaFree(w_));
    }
    if (b_ != nullptr) {
      EXPECT_CUDA(cudaFree(b_));
    }
    if (stream_ != nullptr) {
      EXPECT_CUDA(cudaStreamDestroy(stream_));
    }
  }

  // Device buffers for up to rows x stride inputs (+ slack for offsets).
  void Reserve(int64_t rows, int64_t stride) {
    if (rows * stride <= x_capacity_ && rows <= scores_capacity_) return;
    if (x_ != nullptr) {
      ASSERT_CUDA(cudaFree(x_));
    }
    if (scores_ != nullptr) {
      ASSERT_CUDA(cudaFree(scores_));
    }
    x_ = scores_ = nullptr;
    x_capacity_ = rows * stride;
    scores_capacity_ = rows;
    ASSERT_CUDA(cudaMalloc(reinterpret_cast<void**>(&x_), (x_capacity_ + 64) * sizeof(float)));
    ASSERT_CUDA(
        cudaMalloc(reinterpret_cast<void**>(&scores_), (scores_capacity_ + 64) * sizeof(float)));
  }

  // Host inputs of one case and the CPU twin's scores.
  struct Host {
    std::vector<float> x, w, b, ref;
  };
  Host MakeHost(const SigCase& c, int64_t stride) {
    Host h;
    h.x = Uniform(static_cast<size_t>(c.rows * stride), -1.0f, 1.0f, &rng_);
    for (int64_t r = 0; r < c.rows; ++r) {
      for (int64_t j = c.in_dim; j < stride; ++j) h.x[r * stride + j] = PoisonFloat();
    }
    // x ~ U(-1, 1) (variance 1/3), w ~ U(-s, s) (variance s^2/3): the logit's
    // std is sqrt(in_dim) s / 3 = 1 for s = 3 / sqrt(in_dim).
    const float s = 3.0f / std::sqrt(static_cast<float>(c.in_dim));
    h.w = Uniform(c.in_dim, -s, s, &rng_);
    if (c.bias) h.b = Uniform(1, -1.0f, 1.0f, &rng_);
    h.ref.assign(c.rows, 0.0f);
    LinearForward(LinearView{h.w.data(), c.bias ? h.b.data() : nullptr, c.in_dim, 1}, h.x.data(),
                  stride, c.rows, Activation::kSigmoid, h.ref.data(), 1);
    return h;
  }

  void Check(const SigCase& c) {
    SCOPED_TRACE(c.Name());
    const int64_t stride = c.stride == 0 ? c.in_dim : c.stride;
    ASSERT_NO_FATAL_FAILURE(Reserve(c.rows, stride));
    const Host h = MakeHost(c, stride);
    float* x = x_ + c.x_off;
    float* w = w_ + c.w_off;
    const float* b = c.bias ? b_ : nullptr;
    ASSERT_CUDA(cudaMemcpyAsync(x, h.x.data(), h.x.size() * sizeof(float), cudaMemcpyHostToDevice,
                                stream_));
    ASSERT_CUDA(cudaMemcpyAsync(w, h.w.data(), h.w.size() * sizeof(float), cudaMemcpyHostToDevice,
                                stream_));
    if (c.bias) {
      ASSERT_CUDA(cudaMemcpyAsync(b_, h.b.data(), sizeof(float), cudaMemcpyHostToDevice, stream_));
    }
    // Poison the scores and one sentinel past the end.
    ASSERT_CUDA(cudaMemsetAsync(scores_, 0xFF, (c.rows + 1) * sizeof(float), stream_));
    ASSERT_CUDA(LaunchFinalLogitSigmoid(x, stride, c.rows, w, b, c.in_dim, scores_, stream_));
    std::vector<float> got(c.rows + 1);
    ASSERT_CUDA(cudaMemcpyAsync(got.data(), scores_, got.size() * sizeof(float),
                                cudaMemcpyDeviceToHost, stream_));
    ASSERT_CUDA(cudaStreamSynchronize(stream_));
    ASSERT_CUDA(cudaGetLastError());
    EXPECT_TRUE(IsPoison(got[c.rows])) << "wrote past the last row: " << got[c.rows];
    int bad = 0;
    int64_t mid = 0;
    double max_err = 0.0;
    for (int64_t r = 0; r < c.rows; ++r) {
      const double err = std::fabs(static_cast<double>(got[r]) - h.ref[r]);
      if (h.ref[r] > 0.05f && h.ref[r] < 0.95f) ++mid;
      if (!(err <= kTolerance)) {  // NaN fails
        if (++bad <= 5) {
          ADD_FAILURE() << "score[" << r << "] = " << got[r] << ", cpu " << h.ref[r] << ", |diff| "
                        << err << (IsPoison(got[r]) ? " (never written)" : "");
        }
      } else {
        max_err = std::max(max_err, err);
      }
    }
    EXPECT_EQ(bad, 0) << bad << " of " << c.rows << " scores off";
    if (c.rows >= 100) {
      EXPECT_GT(mid, c.rows / 3) << "inputs too saturated to test anything";
    }
    max_err_ = std::max(max_err_, max_err);
  }

  cudaStream_t stream_ = nullptr;
  float* x_ = nullptr;
  float* scores_ = nullptr;
  float* w_ = nullptr;
  float* b_ = nullptr;
  int64_t x_capacity_ = 0;
  int64_t scores_capacity_ = 0;
  std::mt19937 rng_{1234567u};
  double max_err_ = 0.0;
};

TEST_F(FinalLogitSigmoidTest, EveryWidthDenseRows) {
  const int64_t rows_cycle[] = {1, 2, 3, 31, 33, 1000, 5000};
  for (int in_dim = 1; in_dim <= 300; ++in_dim) {
    SigCase c;
    c.in_dim = in_dim;
    c.rows = rows_cycle[in_dim % 7];
    Check(c);
    if (HasFatalFailure()) return;
  }
  std::printf("max |gpu - cpu| = %.3g\n", max_err_);
}

// Strides a multiple of 4 floats: the float4 path for every width.
TEST_F(FinalLogitSigmoidTest, EveryWidthAlignedPaddedStride) {
  for (int in_dim = 1; in_dim <= 300; ++in_dim) {
    SigCase c;
    c.in_dim = in_dim;
    c.rows = 257;
    c.stride = (in_dim + 1 + 3) / 4 * 4;
    Check(c);
    if (HasFatalFailure()) return;
  }
  std::printf("max |gpu - cpu| = %.3g\n", max_err_);
}

// Rows or w not 16-byte aligned: the scalar path.
TEST_F(FinalLogitSigmoidTest, EveryWidthUnaligned) {
  for (int in_dim = 1; in_dim <= 300; ++in_dim) {
    SigCase c;
    c.in_dim = in_dim;
    c.rows = 100;
    c.stride = in_dim + 1;
    c.x_off = 1 + in_dim % 3;
    c.w_off = in_dim % 2;
    Check(c);
    if (HasFatalFailure()) return;
  }
}

TEST_F(FinalLogitSigmoidTest, RowCounts) {
  for (int in_dim : {1, 3, 4, 5, 8, 13, 16, 17, 64, 127, 128, 129, 256, 300}) {
    for (int64_t rows : {1, 2, 3, 7, 8, 9, 31, 32, 33, 255, 256, 257, 1000, 4999, 5000}) {
      SigCase c;
      c.in_dim = in_dim;
      c.rows = rows;
      Check(c);
      if (HasFatalFailure()) return;
    }
  }
}

TEST_F(FinalLogitSigmoidTest, NoBias) {
  for (int in_dim : {1, 4, 13, 256, 300}) {
    SigCase c;
    c.in_dim = in_dim;
    c.rows = 1000;
    c.bias = false;
    Check(c);
    if (HasFatalFailure()) return;
  }
}

// More rows than the grid covers in one pass (65536 blocks x 8 rows at
// 32 lanes per row): the grid-stride loop.
TEST_F(FinalLogitSigmoidTest, GridStride) {
  SigCase c;
  c.in_dim = 128;
  c.rows = 530000;
  Check(c);
}

TEST_F(FinalLogitSigmoidTest, RejectsBadArgumentsAndWritesNothingForZeroRows) {
  EXPECT_EQ(LaunchFinalLogitSigmoid(x_, 4, 10, w_, b_, 0, scores_, stream_), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchFinalLogitSigmoid(x_, 3, 10, w_, b_, 4, scores_, stream_), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchFinalLogitSigmoid(x_, 4, -1, w_, b_, 4, scores_, stream_), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchFinalLogitSigmoid(nullptr, 4, 10, w_, b_, 4, scores_, stream_),
            cudaErrorInvalidValue);
  EXPECT_EQ(LaunchFinalLogitSigmoid(x_, 4, 10, nullptr, b_, 4, scores_, stream_),
            cudaErrorInvalidValue);
  EXPECT_EQ(LaunchFinalLogitSigmoid(x_, 4, 10, w_, b_, 4, nullptr, stream_), cudaErrorInvalidValue);
  ASSERT_CUDA(cudaMemsetAsync(scores_, 0xFF, sizeof(float), stream_));
  ASSERT_CUDA(LaunchFinalLogitSigmoid(x_, 4, 0, w_, b_, 4, scores_, stream_));
  float s = 0.0f;
  ASSERT_CUDA(cudaMemcpyAsync(&s, scores_, sizeof(float), cudaMemcpyDeviceToHost, stream_));
  ASSERT_CUDA(cudaStreamSynchronize(stream_));
  EXPECT_TRUE(IsPoison(s));
  ASSERT_CUDA(cudaGetLastError());
}

// Captured into a graph, a replay reads the current input.
TEST_F(FinalLogitSigmoidTest, CudaGraphReplay) {
  constexpr int kIn = 256;
  constexpr int64_t kRows = 2048;
  const float s = 3.0f / std::sqrt(static_cast<float>(kIn));
  const std::vector<float> w = Uniform(kIn, -s, s, &rng_);
  const std::vector<float> b = Uniform(1, -1.0f, 1.0f, &rng_);
  ASSERT_CUDA(cudaMemcpyAsync(w_, w.data(), kIn * sizeof(float), cudaMemcpyHostToDevice, stream_));
  ASSERT_CUDA(cudaMemcpyAsync(b_, b.data(), sizeof(float), cudaMemcpyHostToDevice, stream_));
  ASSERT_CUDA(cudaStreamSynchronize(stream_));
  ASSERT_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  const cudaError_t launched =
      LaunchFinalLogitSigmoid(x_, kIn, kRows, w_, b_, kIn, scores_, stream_);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
  ASSERT_CUDA(launched);
  ASSERT_CUDA(ended);
  cudaGraphExec_t exec = nullptr;
  ASSERT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int rep = 0; rep < 2; ++rep) {
    const std::vector<float> x = Uniform(kRows * kIn, -1.0f, 1.0f, &rng_);
    std::vector<float> ref(kRows);
    LinearForward(LinearView{w.data(), b.data(), kIn, 1}, x.data(), kIn, kRows,
                  Activation::kSigmoid, ref.data(), 1);
    ASSERT_CUDA(
        cudaMemcpyAsync(x_, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice, stream_));
    ASSERT_CUDA(cudaMemsetAsync(scores_, 0xFF, kRows * sizeof(float), stream_));
    ASSERT_CUDA(cudaGraphLaunch(exec, stream_));
    std::vector<float> got(kRows);
    ASSERT_CUDA(cudaMemcpyAsync(got.data(), scores_, kRows * sizeof(float), cudaMemcpyDeviceToHost,
                                stream_));
    ASSERT_CUDA(cudaStreamSynchronize(stream_));
    int bad = 0;
    for (int64_t r = 0; r < kRows; ++r) {
      if (!(std::fabs(static_cast<double>(got[r]) - ref[r]) <= kTolerance) && ++bad <= 5) {
        ADD_FAILURE() << "replay " << rep << " score[" << r << "] = " << got[r] << ", cpu "
                      << ref[r];
      }
    }
    EXPECT_EQ(bad, 0);
  }
  ASSERT_CUDA(cudaGraphExecDestroy(exec));
  ASSERT_CUDA(cudaGraphDestroy(graph));
}

}  // namespace
}  // namespace rankd::kernels::cuda
