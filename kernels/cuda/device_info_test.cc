#include "kernels/cuda/device_info.h"

#include "gtest/gtest.h"

namespace rankd::kernels::cuda {
namespace {

// Runs on CPU machines (no devices, a note says why) and GPU machines alike.
TEST(DeviceInfoTest, ReportsDevicesOrWhyNot) {
  DeviceQuery q = QueryDevices();
  EXPECT_GE(q.runtime_version, 13000);  // built with CUDA 13
  if (q.devices.empty()) {
    EXPECT_FALSE(q.note.empty()) << "no devices and no reason given";
  }
  for (const DeviceInfo& d : q.devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.multiprocessors, 0);
    EXPECT_GT(d.total_memory_bytes, 0);
    EXPECT_LE(d.free_memory_bytes, d.total_memory_bytes);
    EXPECT_GE(d.compute_major, 8) << "no build targets GPUs before sm_80";
    // Every supported GPU lets a block opt in to more than the default 48 KiB.
    EXPECT_GT(d.max_shared_bytes_per_block, 48 * 1024);
    EXPECT_EQ(MaxSharedBytesPerBlock(d.ordinal), d.max_shared_bytes_per_block);
  }
}

// The default and the portable build both hold Hopper code.
TEST(DeviceInfoTest, KnowsItsOwnArchitectures) {
  const std::string archs = BuiltCudaArchs();
  EXPECT_NE(archs.find("900"), std::string::npos) << archs;
  EXPECT_EQ(MaxSharedBytesPerBlock(-1), 0);
}

}  // namespace
}  // namespace rankd::kernels::cuda
