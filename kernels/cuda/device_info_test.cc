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
    EXPECT_GE(d.compute_major, 9) << "binaries are built for sm_90 only";
  }
}

}  // namespace
}  // namespace rankd::kernels::cuda
