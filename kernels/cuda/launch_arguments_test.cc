// Host-side decisions of the CUDA kernels' launchers, in CI (no GPU needed):
// which tables take the fp32-only lookup kernel, and the small-rows layer's
// refusal of arguments it cannot compute (checked before any CUDA call).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/types.h"
#include "kernels/cuda/embedding_lookup.h"
#include "kernels/cuda/small_rows_linear.h"

namespace rankd::kernels::cuda {
namespace {

// A descriptor that fits the fp32-only kernel; rows only need an address.
DeviceTable Fp32Table() {
  DeviceTable t;
  t.rows = reinterpret_cast<const void*>(uintptr_t{0x10000});
  t.row_type = RowType::kFp32;
  t.pooling = Pooling::kSum;
  t.dim = 16;
  t.num_rows = 100;
  return t;
}

TEST(TablesFitFp32KernelTest, AllFp32AlignedSumOrMean) {
  std::vector<DeviceTable> tables(3, Fp32Table());
  tables[1].pooling = Pooling::kMean;
  tables[2].dim = 128;
  EXPECT_TRUE(TablesFitFp32Kernel(tables.data(), 3));
  EXPECT_TRUE(TablesFitFp32Kernel(nullptr, 0));
}

TEST(TablesFitFp32KernelTest, AnyOtherTableTakesTheGeneralKernel) {
  auto with = [](auto change) {
    std::vector<DeviceTable> tables(3, Fp32Table());
    change(tables[2]);
    return TablesFitFp32Kernel(tables.data(), 3);
  };
  EXPECT_FALSE(with([](DeviceTable& t) { t.row_type = RowType::kFp16; }));
  EXPECT_FALSE(with([](DeviceTable& t) { t.row_type = RowType::kBf16; }));
  EXPECT_FALSE(with([](DeviceTable& t) { t.dim = 6; }));
  EXPECT_FALSE(with([](DeviceTable& t) {
    t.rows = reinterpret_cast<const void*>(uintptr_t{0x10004});  // 4-byte aligned only
  }));
  EXPECT_FALSE(with([](DeviceTable& t) { t.pooling = Pooling::kMax; }));
  EXPECT_FALSE(with([](DeviceTable& t) { t.host = 1; }));
}

TEST(SmallRowsLinearArgumentsTest, RefusedBeforeAnyCudaCall) {
  float fake[64];  // never dereferenced: every case is refused first
  SmallRowsLinearArgs ok;
  ok.weight = ok.x = fake;
  ok.y = fake + 32;
  ok.in = ok.out = 4;
  ok.x_ld = ok.y_ld = 4;
  ok.rows = 2;
  ok.act = Activation::kRelu;
  auto refused = [&](auto change) {
    SmallRowsLinearArgs a = ok;
    change(a);
    return LaunchSmallRowsLinear(a, /*chained=*/true, nullptr) == cudaErrorInvalidValue;
  };
  EXPECT_TRUE(refused([](SmallRowsLinearArgs& a) { a.rows = kSmallRowsMax + 1; }));
  EXPECT_TRUE(refused([](SmallRowsLinearArgs& a) { a.rows = -1; }));
  EXPECT_TRUE(refused([](SmallRowsLinearArgs& a) { a.in = 0; }));
  EXPECT_TRUE(refused([](SmallRowsLinearArgs& a) { a.out = 0; }));
  EXPECT_TRUE(refused([](SmallRowsLinearArgs& a) { a.x_ld = 3; }));
  EXPECT_TRUE(refused([](SmallRowsLinearArgs& a) { a.y_ld = 3; }));
  EXPECT_TRUE(refused([](SmallRowsLinearArgs& a) { a.act = Activation::kSigmoid; }));
  EXPECT_TRUE(refused([](SmallRowsLinearArgs& a) { a.weight = nullptr; }));
  EXPECT_TRUE(refused([](SmallRowsLinearArgs& a) { a.x = nullptr; }));
  EXPECT_TRUE(refused([](SmallRowsLinearArgs& a) { a.y = nullptr; }));
  // No rows: nothing to compute, nothing launched.
  SmallRowsLinearArgs none = ok;
  none.rows = 0;
  EXPECT_EQ(LaunchSmallRowsLinear(none, false, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace rankd::kernels::cuda
