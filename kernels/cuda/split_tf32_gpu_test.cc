// The TF32 split kernel against its CPU twin (kernels/cpu/split_tf32.h), bit
// for bit, on random values of every magnitude plus infinities, NaN, the
// largest float and denormals, into an output poisoned first.
#include "kernels/cuda/split_activations.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/split_tf32.h"
#include "kernels/cuda/gpu_test_util.h"

namespace rankd::kernels::cuda {
namespace {

TEST(SplitTf32GpuTest, MatchesTheCpuTwinBitForBit) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> exp(-149, 127);
  for (const auto [rows, k, ld] : {std::tuple<int64_t, int, int64_t>{1, 1, 1}, {37, 300, 301},
                                   {1000, 513, 520}, {3, 3456, 3456}, {5, 3, 3}}) {
    std::vector<float> x(rows * ld);
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = std::ldexp(mant(rng), exp(rng)) * (i % 3 == 0 ? -1.0f : 1.0f);
    }
    x[0] = std::numeric_limits<float>::max();
    if (x.size() > 4) {
      x[1] = std::numeric_limits<float>::infinity();
      x[2] = std::nanf("");
      x[3] = -std::numeric_limits<float>::denorm_min();
    }
    std::vector<float> want(rows * kernels::SplitTf32Width(k));
    kernels::SplitTf32Activations(x.data(), ld, rows, k, want.data());
    testing::DeviceFloats dx(x), dout(want.size());
    dout.Poison();
    ASSERT_CUDA(LaunchSplitTf32Activations(dx.get(), ld, rows, k, dout.get(), nullptr));
    ASSERT_CUDA(cudaDeviceSynchronize());
    const std::vector<float> got = dout.ToHost();
    ASSERT_EQ(0, std::memcmp(got.data(), want.data(), 4 * want.size()))
        << "rows " << rows << " k " << k;
  }
}

TEST(SplitTf32GpuTest, RefusesBadArguments) {
  SKIP_WITHOUT_GPU();
  testing::DeviceFloats d(16);
  EXPECT_EQ(LaunchSplitTf32Activations(d.get(), 2, 2, 4, d.get(), nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchSplitTf32Activations(nullptr, 4, 2, 4, d.get(), nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchSplitTf32Activations(d.get(), 4, 0, 4, d.get(), nullptr), cudaSuccess);
}

}  // namespace
}  // namespace rankd::kernels::cuda
