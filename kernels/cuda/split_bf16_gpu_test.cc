// The bf16 split kernel against its CPU twin (kernels/cpu/split_bf16.h), bit
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
#include "kernels/cpu/split_bf16.h"
#include "kernels/cuda/gpu_test_util.h"

namespace rankd::kernels::cuda {
namespace {

TEST(SplitBf16GpuTest, MatchesTheCpuTwinBitForBit) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> exp(-149, 127);
  for (const auto& [rows, k, ld] : {std::tuple<int64_t, int, int64_t>{1, 1, 1}, {37, 300, 301},
                                   {1000, 513, 520}, {3, 3456, 3456}, {5, 3, 3}, {2, 512, 512}}) {
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
    const size_t n = static_cast<size_t>(rows) * kernels::SplitBf16Width(k);
    std::vector<uint16_t> want(n);
    kernels::SplitBf16Activations(x.data(), ld, rows, k, want.data());
    testing::DeviceFloats dx(x), dout((n + 1) / 2);
    dout.Poison();
    auto* out = reinterpret_cast<uint16_t*>(dout.get());
    ASSERT_CUDA(LaunchSplitBf16Activations(dx.get(), ld, rows, k, out, nullptr));
    ASSERT_CUDA(cudaDeviceSynchronize());
    std::vector<uint16_t> got(n);
    ASSERT_CUDA(cudaMemcpy(got.data(), out, 2 * n, cudaMemcpyDeviceToHost));
    ASSERT_EQ(0, std::memcmp(got.data(), want.data(), 2 * n)) << "rows " << rows << " k " << k;
  }
}

TEST(SplitBf16GpuTest, RefusesBadArguments) {
  SKIP_WITHOUT_GPU();
  testing::DeviceFloats d(16);
  auto* out = reinterpret_cast<uint16_t*>(d.get());
  EXPECT_EQ(LaunchSplitBf16Activations(d.get(), 2, 2, 4, out, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchSplitBf16Activations(nullptr, 4, 2, 4, out, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchSplitBf16Activations(d.get(), 4, 0, 4, out, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace rankd::kernels::cuda
