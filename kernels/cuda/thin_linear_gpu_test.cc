// LaunchThinLinear against its CPU twin kernels::LinearForward, on the GPU
// machine: random shapes (in 1..32, out 1..1,500, rows 0..5,000 so the last
// block is partial), padded leading dimensions whose unread input columns are
// NaN, misaligned buffers, with and without bias and ReLU; random non-zero
// inputs. The output is poisoned before every launch, so a row or column the
// kernel skipped shows, and its padding must still be poison after it.
// Refused arguments are checked too. RANKD_TEST_SEED replays a run.
#include "kernels/cuda/thin_linear.h"

#include <cuda_runtime_api.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dense.h"
#include "kernels/cpu/types.h"
#include "kernels/cuda/gpu_test_util.h"

namespace rankd::kernels::cuda {
namespace {

using testing::DeviceArena;
using testing::NonZeroUniform;

bool IsPoison(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return bits == 0xFFFFFFFFu;
}

struct Shape {
  int in = 16, out = 512;
  int64_t rows = 2048, x_ld = 16, y_ld = 512;
  bool bias = true, relu = true;
  size_t pad = 0;  // bytes past an aligned allocation
};

void RunShape(const Shape& s, uint64_t seed) {
  SCOPED_TRACE("seed " + std::to_string(seed) + " (RANKD_TEST_SEED to replay): in " +
               std::to_string(s.in) + " out " + std::to_string(s.out) + " rows " +
               std::to_string(s.rows) + " x_ld " + std::to_string(s.x_ld) + " y_ld " +
               std::to_string(s.y_ld) + (s.bias ? "" : " no bias") + (s.relu ? " relu" : "") +
               " pad " + std::to_string(s.pad));
  std::mt19937_64 rng(seed);
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.in));
  std::vector<float> w = NonZeroUniform(static_cast<size_t>(s.out) * s.in, -scale, scale, &rng);
  std::vector<float> b = NonZeroUniform(s.out, -0.5f, 0.5f, &rng);
  std::vector<float> x(static_cast<size_t>(s.rows) * s.x_ld, std::numeric_limits<float>::quiet_NaN());
  const std::vector<float> values = NonZeroUniform(static_cast<size_t>(s.rows) * s.in, -2, 2, &rng);
  for (int64_t r = 0; r < s.rows; ++r) {
    for (int k = 0; k < s.in; ++k) x[r * s.x_ld + k] = values[r * s.in + k];
  }
  std::vector<float> want(static_cast<size_t>(s.rows) * s.out);
  LinearView layer;
  layer.weight = w.data();
  layer.bias = s.bias ? b.data() : nullptr;
  layer.in = s.in;
  layer.out = s.out;
  const Activation act = s.relu ? Activation::kRelu : Activation::kNone;
  LinearForward(layer, x.data(), s.x_ld, s.rows, act, want.data(), s.out);

  DeviceArena up;
  ThinLinearArgs a;
  a.weight = up.Copy(w, s.pad);
  a.bias = s.bias ? up.Copy(b, s.pad) : nullptr;
  a.in = s.in;
  a.out = s.out;
  a.x = up.Copy(x, s.pad);
  a.x_ld = s.x_ld;
  a.rows = s.rows;
  a.act = act;
  const std::vector<float> poison(static_cast<size_t>(s.rows) * s.y_ld + 1,
                                  [] { float f; uint32_t u = 0xFFFFFFFFu; std::memcpy(&f, &u, 4); return f; }());
  a.y = up.Copy(poison, s.pad);
  a.y_ld = s.y_ld;
  ASSERT_CUDA(up.error());
  ASSERT_CUDA(LaunchThinLinear(a, nullptr));
  ASSERT_CUDA(cudaDeviceSynchronize());
  std::vector<float> got(poison.size());
  ASSERT_CUDA(cudaMemcpy(got.data(), a.y, got.size() * 4, cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int64_t r = 0; r < s.rows && bad < 10; ++r) {
    for (int64_t c = 0; c < s.y_ld && bad < 10; ++c) {
      const float g = got[r * s.y_ld + c];
      if (c >= s.out) {
        if (!IsPoison(g)) {
          ++bad;
          ADD_FAILURE() << "row " << r << " col " << c << " past out written";
        }
        continue;
      }
      double mag = s.bias ? std::fabs(b[c]) : 0.0;
      for (int k = 0; k < s.in; ++k) mag += std::fabs(x[r * s.x_ld + k] * w[c * s.in + k]);
      const double tol = 2.0 * (s.in + 1) * FLT_EPSILON * mag + 1e-30;
      const double e = want[r * s.out + c];
      if (!(std::fabs(g - e) <= tol)) {
        ++bad;
        ADD_FAILURE() << "row " << r << " col " << c << ": GPU " << g << ", CPU twin " << e;
      }
    }
  }
  EXPECT_TRUE(IsPoison(got.back())) << "written past the last row";
}

TEST(ThinLinearGpuTest, RandomShapesMatchTheCpuTwin) {
  SKIP_WITHOUT_GPU();
  const uint64_t base = testing::TestSeed();
  for (int iter = 0; iter < 60; ++iter) {
    std::mt19937_64 rng(base + iter);
    Shape s;
    s.in = 1 + static_cast<int>(rng() % kThinLinearMaxIn);
    s.out = 1 + static_cast<int>(rng() % 1500);
    s.rows = iter % 6 == 0 ? static_cast<int64_t>(rng() % 20) : static_cast<int64_t>(rng() % 5000);
    s.x_ld = s.in + static_cast<int64_t>(rng() % 4);
    s.y_ld = s.out + static_cast<int64_t>(rng() % 4);
    s.bias = rng() % 4 != 0;
    s.relu = rng() % 2 == 0;
    s.pad = 4 * (rng() % 4);
    RunShape(s, base + iter);
    if (::testing::Test::HasFailure()) break;
  }
}

TEST(ThinLinearGpuTest, KaggleFirstBottomLayer) {
  SKIP_WITHOUT_GPU();
  RunShape(Shape{}, testing::TestSeed());
}

TEST(ThinLinearGpuTest, RefusesBadArguments) {
  SKIP_WITHOUT_GPU();
  DeviceArena up;
  float* buf = up.Copy(std::vector<float>(1024, 1.0f));
  ASSERT_CUDA(up.error());
  ThinLinearArgs ok;
  ok.weight = buf;
  ok.in = 4;
  ok.out = 4;
  ok.x = buf;
  ok.x_ld = 4;
  ok.rows = 2;
  ok.y = buf + 512;
  ok.y_ld = 4;
  EXPECT_EQ(LaunchThinLinear(ok, nullptr), cudaSuccess);
  ASSERT_CUDA(cudaDeviceSynchronize());
  auto refused = [&](ThinLinearArgs a, const char* why) {
    EXPECT_EQ(LaunchThinLinear(a, nullptr), cudaErrorInvalidValue) << why;
  };
  ThinLinearArgs a = ok;
  a.in = 0;
  refused(a, "in 0");
  a = ok;
  a.in = kThinLinearMaxIn + 1;
  a.x_ld = a.in;
  refused(a, "in above the limit");
  a = ok;
  a.out = 0;
  refused(a, "out 0");
  a = ok;
  a.rows = -1;
  refused(a, "negative rows");
  a = ok;
  a.x_ld = 3;
  refused(a, "x_ld below in");
  a = ok;
  a.y_ld = 3;
  refused(a, "y_ld below out");
  a = ok;
  a.weight = nullptr;
  refused(a, "no weights");
  a = ok;
  a.act = Activation::kSigmoid;
  refused(a, "sigmoid");
  a = ok;
  a.rows = 0;
  a.x = nullptr;
  EXPECT_EQ(LaunchThinLinear(a, nullptr), cudaSuccess) << "no rows: nothing to do";
}

}  // namespace
}  // namespace rankd::kernels::cuda
