// LinearRunner (cuBLASLt) against its CPU twin kernels::LinearForward, on the
// GPU machine: random inputs (never zeros), outputs poisoned with NaN before
// every run, every output element checked, padding columns of the output
// checked untouched (and input padding filled with NaN, so reading it shows).
//
// Tolerance: every |gpu - cpu| <= rtol * max(max |cpu| over the whole
// output, 1), with rtol 1e-5 for kFp32 (two fp32 summation orders differ by ~2e-6 of the max
// at K = 3456) and 2e-3 for kTf32 (10-bit mantissas: ~3e-4 measured in a
// NumPy simulation of the same data). The floor of 1 is the outputs' natural
// scale here (weights ~ U(+-1/sqrt(in)), so outputs have std ~0.3-0.6): it
// keeps a single output that happens to be near 0 from demanding a relative
// accuracy no summation order can give.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cpu/dense.h"
#include "kernels/cpu/split_bf16.h"
#include "kernels/cpu/types.h"
#include "kernels/cuda/cublaslt.h"
#include "kernels/cuda/gpu_test_util.h"

namespace rankd::kernels::cuda {
namespace {

constexpr uint32_t kPoisonBits = 0xFFFFFFFFu;  // a quiet NaN; memset(0xFF) writes it

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

// Device memory owned by a test; freed at scope exit (errors there are
// reported but cannot fail the finished check).
class DeviceFloats {
 public:
  DeviceFloats() = default;
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  ~DeviceFloats() {
    if (ptr_ != nullptr) {
      EXPECT_CUDA(cudaFree(ptr_));
    }
  }
  // Allocates n floats (+ slack so callers can offset the pointer).
  ::testing::AssertionResult Alloc(size_t n) {
    n_ = n + 64;
    return testing::CudaSucceeded(cudaMalloc(reinterpret_cast<void**>(&ptr_), n_ * sizeof(float)),
                                  "cudaMalloc");
  }
  float* get() const { return ptr_; }

 private:
  float* ptr_ = nullptr;
  size_t n_ = 0;
};

class Stream {
 public:
  Stream() { err_ = cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking); }
  ~Stream() {
    if (err_ == cudaSuccess) {
      EXPECT_CUDA(cudaStreamDestroy(s_));
    }
  }
  cudaError_t status() const { return err_; }
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
  cudaError_t err_ = cudaSuccess;
};

std::vector<float> Uniform(size_t n, float lo, float hi, std::mt19937* rng) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) {
    do {
      f = dist(*rng);
    } while (f == 0.0f);  // never zeros
  }
  return v;
}

struct Case {
  int in = 0;
  int out = 0;
  int64_t rows = 0;
  bool bias = true;
  Activation act = Activation::kRelu;
  int64_t in_pad = 0;   // in_ld = in + in_pad
  int64_t out_pad = 0;  // out_ld = out + out_pad
  // Pointer offsets in floats from cudaMalloc's (256-byte aligned) address.
  int x_off = 0, w_off = 0, b_off = 0, y_off = 0;

  std::string Name() const {
    return absl::StrCat(in, "->", out, " rows=", rows, " bias=", bias ? "yes" : "no",
                        " act=", act == Activation::kRelu ? "relu" : "none", " in_ld=", in + in_pad,
                        " out_ld=", out + out_pad, " offsets(x,w,b,y)=", x_off, ",", w_off, ",",
                        b_off, ",", y_off);
  }
};

double Tolerance(MathMode mode) { return mode == MathMode::kTf32 ? 2e-3 : 1e-5; }

const char* ModeName(MathMode mode) { return mode == MathMode::kTf32 ? "tf32" : "fp32"; }

// Host data of one case and its CPU reference.
struct HostCase {
  std::vector<float> x, w, b, ref;
  int64_t in_ld = 0, out_ld = 0;
};

HostCase MakeHost(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  HostCase h;
  h.in_ld = c.in + c.in_pad;
  h.out_ld = c.out + c.out_pad;
  h.x = Uniform(static_cast<size_t>(c.rows * h.in_ld), -1.0f, 1.0f, &rng);
  for (int64_t r = 0; r < c.rows; ++r) {
    for (int64_t j = c.in; j < h.in_ld; ++j) h.x[r * h.in_ld + j] = PoisonFloat();
  }
  // Weights ~ 1/sqrt(in) so outputs are O(1) at any width.
  const float s = 1.0f / std::sqrt(static_cast<float>(c.in));
  h.w = Uniform(static_cast<size_t>(c.out) * c.in, -s, s, &rng);
  if (c.bias) h.b = Uniform(c.out, -0.5f, 0.5f, &rng);
  h.ref.assign(static_cast<size_t>(c.rows * h.out_ld), 0.0f);
  LinearView view{h.w.data(), c.bias ? h.b.data() : nullptr, c.in, c.out};
  LinearForward(view, h.x.data(), h.in_ld, c.rows, c.act, h.ref.data(), h.out_ld);
  return h;
}

// Checks every element of y (row-major [rows, out_ld]) against h.ref.
void Compare(const Case& c, MathMode mode, const HostCase& h, const std::vector<float>& y) {
  double max_ref = 0.0;
  for (int64_t r = 0; r < c.rows; ++r) {
    for (int j = 0; j < c.out; ++j) {
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(h.ref[r * h.out_ld + j])));
    }
  }
  const double scale = std::max(max_ref, 1.0);
  const double tol = Tolerance(mode) * scale;
  double max_err = 0.0;
  int bad = 0;
  int64_t nonzero = 0;
  for (int64_t r = 0; r < c.rows; ++r) {
    for (int64_t j = 0; j < h.out_ld; ++j) {
      const float g = y[r * h.out_ld + j];
      if (j >= c.out) {
        if (!IsPoison(g) && ++bad <= 5) {
          ADD_FAILURE() << c.Name() << " " << ModeName(mode) << ": padding column (" << r << ", "
                        << j << ") was written: " << g;
        }
        continue;
      }
      const float want = h.ref[r * h.out_ld + j];
      if (want != 0.0f) ++nonzero;
      const double err = std::fabs(static_cast<double>(g) - want);
      if (!(err <= tol)) {  // NaN fails too
        if (++bad <= 5) {
          ADD_FAILURE() << c.Name() << " " << ModeName(mode) << ": y(" << r << ", " << j
                        << ") = " << g << ", cpu " << want << ", |diff| " << err << " > " << tol
                        << (IsPoison(g) ? " (never written)" : "");
        }
      } else {
        max_err = std::max(max_err, err);
      }
    }
  }
  EXPECT_EQ(bad, 0) << c.Name() << " " << ModeName(mode) << ": " << bad << " bad elements";
  if (c.rows * c.out >= 16) {
    EXPECT_GT(nonzero, 0) << c.Name() << ": degenerate reference (all zero)";
  }
  if (bad == 0 && max_err > 0.5 * tol) {
    std::printf("note: %s %s max |diff| / max |ref| = %.3g (tolerance %.3g)\n", c.Name().c_str(),
                ModeName(mode), max_err / scale, Tolerance(mode));
  }
}

// Runs one case on a fresh set of buffers and compares.
void RunCase(LinearRunner* runner, const Case& c, cudaStream_t stream, uint32_t seed) {
  SCOPED_TRACE(c.Name());
  const HostCase h = MakeHost(c, seed);
  DeviceFloats dx, dw, db, dy;
  ASSERT_TRUE(dx.Alloc(h.x.size()));
  ASSERT_TRUE(dw.Alloc(h.w.size()));
  ASSERT_TRUE(db.Alloc(std::max<size_t>(h.b.size(), 1)));
  ASSERT_TRUE(dy.Alloc(static_cast<size_t>(c.rows * h.out_ld)));
  float* x = dx.get() + c.x_off;
  float* w = dw.get() + c.w_off;
  float* b = c.bias ? db.get() + c.b_off : nullptr;
  float* y = dy.get() + c.y_off;
  const size_t y_bytes = static_cast<size_t>(c.rows * h.out_ld) * sizeof(float);
  ASSERT_CUDA(
      cudaMemcpyAsync(x, h.x.data(), h.x.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
  ASSERT_CUDA(
      cudaMemcpyAsync(w, h.w.data(), h.w.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
  if (c.bias) {
    ASSERT_CUDA(
        cudaMemcpyAsync(b, h.b.data(), h.b.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
  }
  ASSERT_CUDA(cudaMemsetAsync(y, 0xFF, y_bytes, stream));  // poison
  const DeviceLinear layer{w, b, c.in, c.out};
  const absl::Status st = runner->Run(layer, x, h.in_ld, c.rows, c.act, y, h.out_ld, stream);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_CUDA(cudaGetLastError());
  std::vector<float> out(static_cast<size_t>(c.rows * h.out_ld));
  ASSERT_CUDA(cudaMemcpyAsync(out.data(), y, y_bytes, cudaMemcpyDeviceToHost, stream));
  ASSERT_CUDA(cudaStreamSynchronize(stream));
  Compare(c, runner->mode(), h, out);
}

class LinearRunnerGpuTest : public ::testing::TestWithParam<MathMode> {
 protected:
  void SetUp() override {
    int n = 0;
    ASSERT_CUDA(cudaGetDeviceCount(&n));
    ASSERT_GT(n, 0) << "no GPU: this test runs on the GPU machine";
    auto r = LinearRunner::Create(GetParam());
    ASSERT_TRUE(r.ok()) << r.status();
    runner_ = std::move(*r);
    ASSERT_CUDA(stream_.status());
  }
  void TearDown() override {
    if (runner_ == nullptr) return;  // SetUp failed (no GPU): already reported
    runner_.reset();
    EXPECT_CUDA(cudaDeviceSynchronize());
  }
  void Check(const Case& c) {
    ASSERT_NO_FATAL_FAILURE(RunCase(runner_.get(), c, stream_.get(), seed_++));
  }

  std::unique_ptr<LinearRunner> runner_;
  Stream stream_;
  uint32_t seed_ = 20240601u;
};

struct Shape {
  int in, out;
  bool bias;
  Activation act;
};

// facebookresearch/dlrm Kaggle (bottom 13-512-256-64-16, top 367-512-256-1)
// and MLPerf DLRM-DCNv2 (bottom 13-512-256-128, crossnet N = 3456 with rank
// 512: V x without bias, W (.) with bias; top 3456-1024-1024-512-256-1).
const Shape kModelShapes[] = {
    {13, 512, true, Activation::kRelu},    {512, 256, true, Activation::kRelu},
    {256, 64, true, Activation::kRelu},    {64, 16, true, Activation::kRelu},
    {367, 512, true, Activation::kRelu},   {256, 1, true, Activation::kNone},
    {256, 128, true, Activation::kRelu},   {3456, 512, false, Activation::kNone},
    {512, 3456, true, Activation::kNone},  {3456, 1024, true, Activation::kRelu},
    {1024, 1024, true, Activation::kRelu}, {1024, 512, true, Activation::kRelu},
    {7, 5, true, Activation::kRelu},       {1, 1, true, Activation::kNone},
    {5, 7, false, Activation::kRelu},      {33, 17, true, Activation::kNone},
};

TEST_P(LinearRunnerGpuTest, ReferenceModelShapes) {
  for (const Shape& s : kModelShapes) {
    for (int64_t rows : {1, 3, 128, 1000}) {
      Case c;
      c.in = s.in;
      c.out = s.out;
      c.rows = rows;
      c.bias = s.bias;
      c.act = s.act;
      Check(c);
      if (HasFatalFailure()) return;
    }
  }
}

// RunBf16 on split-precision operands (kernels/cpu/split_bf16.h): the GEMM
// over [hi | lo | hi] x [hi | hi | lo] is checked against the fp32 CPU
// reference of the unsplit layer, at fp32's tolerance (fp32 accumulation;
// the dropped terms are ~2^-17), whatever the runner's mode; and a poisoned
// output column beyond `out` stays untouched.
TEST_P(LinearRunnerGpuTest, Bf16SplitGemmMatchesFp32) {
  const Shape shapes[] = {{3456, 512, false, Activation::kNone},
                          {512, 3456, true, Activation::kNone},
                          {13, 64, true, Activation::kRelu},
                          {7, 5, true, Activation::kRelu}};
  for (const Shape& sh : shapes) {
    for (int64_t rows : {1, 37, 1000}) {
      Case c;
      c.in = sh.in;
      c.out = sh.out;
      c.rows = rows;
      c.bias = sh.bias;
      c.act = sh.act;
      c.out_pad = 3;
      SCOPED_TRACE(c.Name() + " bf16x3");
      const HostCase h = MakeHost(c, seed_++);
      const int width = SplitBf16Width(c.in);
      std::vector<uint16_t> x3(static_cast<size_t>(rows) * width), w3(size_t{1} * c.out * width);
      SplitBf16Activations(h.x.data(), h.in_ld, rows, c.in, x3.data());
      SplitBf16Weights(h.w.data(), c.out, c.in, w3.data());
      DeviceFloats dx, dw, db, dy;
      ASSERT_TRUE(dx.Alloc(x3.size() / 2 + 1));
      ASSERT_TRUE(dw.Alloc(w3.size() / 2 + 1));
      ASSERT_TRUE(db.Alloc(std::max<size_t>(h.b.size(), 1)));
      ASSERT_TRUE(dy.Alloc(static_cast<size_t>(rows * h.out_ld)));
      auto* x = reinterpret_cast<uint16_t*>(dx.get());
      auto* w = reinterpret_cast<uint16_t*>(dw.get());
      cudaStream_t st = stream_.get();
      ASSERT_CUDA(cudaMemcpyAsync(x, x3.data(), 2 * x3.size(), cudaMemcpyHostToDevice, st));
      ASSERT_CUDA(cudaMemcpyAsync(w, w3.data(), 2 * w3.size(), cudaMemcpyHostToDevice, st));
      if (c.bias) {
        ASSERT_CUDA(
            cudaMemcpyAsync(db.get(), h.b.data(), 4 * h.b.size(), cudaMemcpyHostToDevice, st));
      }
      const size_t y_bytes = static_cast<size_t>(rows * h.out_ld) * sizeof(float);
      ASSERT_CUDA(cudaMemsetAsync(dy.get(), 0xFF, y_bytes, st));
      const DeviceLinearBf16 layer{w, c.bias ? db.get() : nullptr, width, c.out};
      const absl::Status s =
          runner_->RunBf16(layer, x, width, rows, c.act, dy.get(), h.out_ld, st);
      ASSERT_TRUE(s.ok()) << s;
      std::vector<float> out(static_cast<size_t>(rows * h.out_ld));
      ASSERT_CUDA(cudaMemcpyAsync(out.data(), dy.get(), y_bytes, cudaMemcpyDeviceToHost, st));
      ASSERT_CUDA(cudaStreamSynchronize(st));
      Compare(c, MathMode::kFp32, h, out);
      if (HasFatalFailure()) return;
    }
  }
  // Bad shapes are refused like Run's.
  const DeviceLinearBf16 bad{nullptr, nullptr, 0, 4};
  EXPECT_EQ(runner_->RunBf16(bad, nullptr, 8, 1, Activation::kNone, nullptr, 4, stream_.get())
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(LinearRunnerGpuTest, EveryBiasAndActivationCombination) {
  const int shapes[][2] = {{7, 5}, {64, 16}, {367, 512}, {512, 3456}};
  for (const auto& s : shapes) {
    for (bool bias : {false, true}) {
      for (Activation act : {Activation::kNone, Activation::kRelu}) {
        for (int64_t rows : {3, 1000}) {
          Case c;
          c.in = s[0];
          c.out = s[1];
          c.rows = rows;
          c.bias = bias;
          c.act = act;
          Check(c);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST_P(LinearRunnerGpuTest, LeadingDimensionsLargerThanWidths) {
  const Shape shapes[] = {{13, 512, true, Activation::kRelu},
                          {256, 1, true, Activation::kNone},
                          {7, 5, false, Activation::kRelu},
                          {1024, 1024, true, Activation::kRelu},
                          {3456, 512, false, Activation::kNone}};
  const int64_t pads[][2] = {{3, 5}, {4, 4}, {1, 0}, {0, 3}, {64, 128}};
  for (const Shape& s : shapes) {
    for (const auto& pad : pads) {
      for (int64_t rows : {1, 1000}) {
        Case c;
        c.in = s.in;
        c.out = s.out;
        c.rows = rows;
        c.bias = s.bias;
        c.act = s.act;
        c.in_pad = pad[0];
        c.out_pad = pad[1];
        Check(c);
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST_P(LinearRunnerGpuTest, ManyRows) {
  const Shape shapes[] = {{13, 512, true, Activation::kRelu},
                          {64, 16, true, Activation::kRelu},
                          {7, 5, true, Activation::kNone},
                          {367, 512, true, Activation::kRelu},
                          {256, 1, true, Activation::kNone}};
  for (const Shape& s : shapes) {
    Case c;
    c.in = s.in;
    c.out = s.out;
    c.rows = 65536;
    c.bias = s.bias;
    c.act = s.act;
    Check(c);
    if (HasFatalFailure()) return;
  }
}

// Pointers that are not 16-byte aligned (sub-buffers of an arena): the plan's
// algorithm must be chosen for them, and a plan made for weakly aligned
// pointers must still be right when later called with aligned ones.
TEST_P(LinearRunnerGpuTest, UnalignedPointers) {
  const int offsets[][4] = {{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1},
                            {1, 3, 2, 1}, {2, 2, 2, 2}, {0, 0, 0, 0}};
  for (const Shape& s :
       {Shape{13, 512, true, Activation::kRelu}, Shape{512, 256, true, Activation::kRelu},
        Shape{256, 1, true, Activation::kNone}}) {
    for (const auto& o : offsets) {
      Case c;
      c.in = s.in;
      c.out = s.out;
      c.rows = 1000;
      c.bias = s.bias;
      c.act = s.act;
      c.x_off = o[0];
      c.w_off = o[1];
      c.b_off = o[2];
      c.y_off = o[3];
      Check(c);
      if (HasFatalFailure()) return;
    }
  }
}

// A cached plan takes new weights, bias, input and output each call.
TEST_P(LinearRunnerGpuTest, CachedPlansTakeNewPointersAndData) {
  for (int round = 0; round < 3; ++round) {
    for (const Shape& s :
         {Shape{512, 256, true, Activation::kRelu}, Shape{64, 16, false, Activation::kNone}}) {
      Case c;
      c.in = s.in;
      c.out = s.out;
      c.rows = 333;
      c.bias = s.bias;
      c.act = s.act;
      Check(c);
      if (HasFatalFailure()) return;
    }
  }
}

TEST_P(LinearRunnerGpuTest, ZeroWorkspace) {
  auto r = LinearRunner::Create(GetParam(), /*workspace_bytes=*/0);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const Shape& s :
       {Shape{13, 512, true, Activation::kRelu}, Shape{1024, 1024, true, Activation::kRelu},
        Shape{3456, 512, false, Activation::kNone}}) {
    Case c;
    c.in = s.in;
    c.out = s.out;
    c.rows = 1000;
    c.bias = s.bias;
    c.act = s.act;
    ASSERT_NO_FATAL_FAILURE(RunCase(r->get(), c, stream_.get(), seed_++));
  }
}

TEST_P(LinearRunnerGpuTest, RejectsBadArguments) {
  DeviceFloats dx, dw, dy;
  ASSERT_TRUE(dx.Alloc(64 * 16));
  ASSERT_TRUE(dw.Alloc(16 * 16));
  ASSERT_TRUE(dy.Alloc(64 * 16));
  const DeviceLinear layer{dw.get(), nullptr, 16, 16};
  cudaStream_t s = stream_.get();
  auto code = [](const absl::Status& st) { return st.code(); };
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(code(runner_->Run(layer, dx.get(), 16, -1, Activation::kNone, dy.get(), 16, s)),
            kInvalid);
  EXPECT_EQ(code(runner_->Run(layer, dx.get(), 15, 4, Activation::kNone, dy.get(), 16, s)),
            kInvalid);
  EXPECT_EQ(code(runner_->Run(layer, dx.get(), 16, 4, Activation::kNone, dy.get(), 15, s)),
            kInvalid);
  EXPECT_EQ(code(runner_->Run(layer, dx.get(), 16, 4, Activation::kSigmoid, dy.get(), 16, s)),
            kInvalid);
  EXPECT_EQ(code(runner_->Run(DeviceLinear{nullptr, nullptr, 16, 16}, dx.get(), 16, 4,
                              Activation::kNone, dy.get(), 16, s)),
            kInvalid);
  EXPECT_EQ(code(runner_->Run(DeviceLinear{dw.get(), nullptr, 0, 16}, dx.get(), 16, 4,
                              Activation::kNone, dy.get(), 16, s)),
            kInvalid);
  // In place (out overlaps in).
  EXPECT_EQ(code(runner_->Run(layer, dx.get(), 16, 4, Activation::kNone, dx.get() + 8, 16, s)),
            kInvalid);
  // rows == 0: nothing to do, nothing written.
  ASSERT_CUDA(cudaMemsetAsync(dy.get(), 0xFF, 16 * sizeof(float), s));
  EXPECT_TRUE(runner_->Run(layer, dx.get(), 16, 0, Activation::kNone, dy.get(), 16, s).ok());
  std::vector<float> y(16);
  ASSERT_CUDA(cudaMemcpyAsync(y.data(), dy.get(), 16 * sizeof(float), cudaMemcpyDeviceToHost, s));
  ASSERT_CUDA(cudaStreamSynchronize(s));
  for (float v : y) EXPECT_TRUE(IsPoison(v));
}

// A three-layer MLP captured into a CUDA graph after one uncaptured warm-up
// run per shape; replays read the buffers' current contents and match both
// the CPU and the eager (uncaptured) result bit for bit.
TEST_P(LinearRunnerGpuTest, CudaGraphCaptureAfterWarmup) {
  constexpr int64_t kRows = 777;
  const int widths[] = {13, 512, 256, 64};
  const cudaStream_t s = stream_.get();
  std::mt19937 rng(seed_++);
  std::vector<std::vector<float>> hw(3), hb(3);
  DeviceFloats dw[3], db[3], dact[4];
  for (int l = 0; l < 3; ++l) {
    const float sc = 1.0f / std::sqrt(static_cast<float>(widths[l]));
    hw[l] = Uniform(static_cast<size_t>(widths[l + 1]) * widths[l], -sc, sc, &rng);
    hb[l] = Uniform(widths[l + 1], -0.5f, 0.5f, &rng);
    ASSERT_TRUE(dw[l].Alloc(hw[l].size()));
    ASSERT_TRUE(db[l].Alloc(hb[l].size()));
    ASSERT_CUDA(cudaMemcpyAsync(dw[l].get(), hw[l].data(), hw[l].size() * sizeof(float),
                                cudaMemcpyHostToDevice, s));
    ASSERT_CUDA(cudaMemcpyAsync(db[l].get(), hb[l].data(), hb[l].size() * sizeof(float),
                                cudaMemcpyHostToDevice, s));
  }
  for (int l = 0; l < 4; ++l) ASSERT_TRUE(dact[l].Alloc(kRows * widths[l]));
  const size_t out_bytes = kRows * widths[3] * sizeof(float);

  auto forward = [&]() -> absl::Status {
    for (int l = 0; l < 3; ++l) {
      const DeviceLinear layer{dw[l].get(), db[l].get(), widths[l], widths[l + 1]};
      const Activation act = l < 2 ? Activation::kRelu : Activation::kNone;
      absl::Status st = runner_->Run(layer, dact[l].get(), widths[l], kRows, act, dact[l + 1].get(),
                                     widths[l + 1], s);
      if (!st.ok()) return st;
    }
    return absl::OkStatus();
  };
  auto cpu_forward = [&](const std::vector<float>& x) {
    std::vector<float> cur = x, next;
    for (int l = 0; l < 3; ++l) {
      next.assign(kRows * widths[l + 1], 0.0f);
      LinearForward(LinearView{hw[l].data(), hb[l].data(), widths[l], widths[l + 1]}, cur.data(),
                    widths[l], kRows, l < 2 ? Activation::kRelu : Activation::kNone, next.data(),
                    widths[l + 1]);
      cur.swap(next);
    }
    return cur;
  };
  auto poison = [&]() -> cudaError_t {
    for (int l = 1; l < 4; ++l) {
      cudaError_t e = cudaMemsetAsync(dact[l].get(), 0xFF, kRows * widths[l] * sizeof(float), s);
      if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
  };

  // Warm-up (creates the plans; not captured).
  std::vector<float> x0 = Uniform(kRows * widths[0], -1.0f, 1.0f, &rng);
  ASSERT_CUDA(cudaMemcpyAsync(dact[0].get(), x0.data(), x0.size() * sizeof(float),
                              cudaMemcpyHostToDevice, s));
  ASSERT_CUDA(poison());
  {
    absl::Status st = forward();
    ASSERT_TRUE(st.ok()) << st;
  }
  std::vector<float> eager(kRows * widths[3]);
  ASSERT_CUDA(cudaMemcpyAsync(eager.data(), dact[3].get(), out_bytes, cudaMemcpyDeviceToHost, s));
  ASSERT_CUDA(cudaStreamSynchronize(s));

  // Capture (global mode: any unsafe CUDA call from any thread would fail it).
  ASSERT_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  const absl::Status captured = forward();
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(s, &graph);
  ASSERT_TRUE(captured.ok()) << captured;
  ASSERT_CUDA(end);
  ASSERT_NE(graph, nullptr);
  size_t num_nodes = 0;
  ASSERT_CUDA(cudaGraphGetNodes(graph, nullptr, &num_nodes));
  EXPECT_GE(num_nodes, 3u);
  cudaGraphExec_t exec = nullptr;
  ASSERT_CUDA(cudaGraphInstantiate(&exec, graph, 0));

  Case c;  // for Compare's messages
  c.in = widths[0];
  c.out = widths[3];
  c.rows = kRows;
  c.act = Activation::kNone;
  HostCase h;
  h.in_ld = widths[0];
  h.out_ld = widths[3];

  // Replay 1: same input as the eager run -> bit-identical output.
  ASSERT_CUDA(poison());
  ASSERT_CUDA(cudaGraphLaunch(exec, s));
  std::vector<float> y(kRows * widths[3]);
  ASSERT_CUDA(cudaMemcpyAsync(y.data(), dact[3].get(), out_bytes, cudaMemcpyDeviceToHost, s));
  ASSERT_CUDA(cudaStreamSynchronize(s));
  EXPECT_EQ(0, std::memcmp(y.data(), eager.data(), out_bytes))
      << "graph replay differs from the eager run on the same input";
  h.ref = cpu_forward(x0);
  Compare(c, GetParam(), h, y);

  // Replays 2 and 3: new inputs in the same buffer.
  for (int rep = 0; rep < 2; ++rep) {
    std::vector<float> x = Uniform(kRows * widths[0], -1.0f, 1.0f, &rng);
    ASSERT_CUDA(cudaMemcpyAsync(dact[0].get(), x.data(), x.size() * sizeof(float),
                                cudaMemcpyHostToDevice, s));
    ASSERT_CUDA(poison());
    ASSERT_CUDA(cudaGraphLaunch(exec, s));
    ASSERT_CUDA(cudaMemcpyAsync(y.data(), dact[3].get(), out_bytes, cudaMemcpyDeviceToHost, s));
    ASSERT_CUDA(cudaStreamSynchronize(s));
    h.ref = cpu_forward(x);
    Compare(c, GetParam(), h, y);
  }
  ASSERT_CUDA(cudaGraphExecDestroy(exec));
  ASSERT_CUDA(cudaGraphDestroy(graph));
}

// A shape never run before cannot get a plan while capturing: a clear error,
// and the capture itself stays valid.
TEST_P(LinearRunnerGpuTest, CaptureWithoutWarmupFailsCleanly) {
  const cudaStream_t s = stream_.get();
  DeviceFloats dx, dw, dy;
  ASSERT_TRUE(dx.Alloc(100 * 24));
  ASSERT_TRUE(dw.Alloc(24 * 40));
  ASSERT_TRUE(dy.Alloc(100 * 40));
  const DeviceLinear layer{dw.get(), nullptr, 24, 40};
  ASSERT_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  const absl::Status st =
      runner_->Run(layer, dx.get(), 24, 100, Activation::kRelu, dy.get(), 40, s);
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(s, &graph);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_NE(std::string(st.message()).find("before capturing"), std::string::npos) << st;
  ASSERT_CUDA(end);
  if (graph != nullptr) {
    ASSERT_CUDA(cudaGraphDestroy(graph));
  }
  ASSERT_CUDA(cudaGetLastError());
  // Outside capture the same call works.
  Case c;
  c.in = 24;
  c.out = 40;
  c.rows = 100;
  c.bias = false;
  c.act = Activation::kRelu;
  Check(c);
}

INSTANTIATE_TEST_SUITE_P(Modes, LinearRunnerGpuTest,
                         ::testing::Values(MathMode::kFp32, MathMode::kTf32),
                         [](const ::testing::TestParamInfo<MathMode>& info) {
                           return std::string(ModeName(info.param));
                         });

}  // namespace
}  // namespace rankd::kernels::cuda
