#include "kernels/cpu/host_resources.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace rankd::kernels {
namespace {

// A fake filesystem root with /proc/self and /sys/fs/cgroup files.
class FakeRoot {
 public:
  FakeRoot() {
    char tmpl[] = "/tmp/host_resources_test.XXXXXX";
    root_ = mkdtemp(tmpl);
  }
  ~FakeRoot() { std::filesystem::remove_all(root_); }
  const std::string& path() const { return root_; }
  void Write(const std::string& rel, const std::string& text) {
    const std::string full = root_ + rel;
    std::filesystem::create_directories(full.substr(0, full.rfind('/')));
    std::ofstream(full) << text;
  }

 private:
  std::string root_;
};

constexpr char kMountinfoV2[] =
    "30 22 0:27 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n";
constexpr char kMountinfoV1[] =
    "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "31 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
    "34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n";

TEST(HostResourcesTest, ParsesCpuMax) {
  double cpus = -1;
  ASSERT_TRUE(ParseCpuMax("max 100000\n", &cpus));
  EXPECT_EQ(cpus, 0);
  ASSERT_TRUE(ParseCpuMax("250000 100000\n", &cpus));
  EXPECT_DOUBLE_EQ(cpus, 2.5);
  ASSERT_TRUE(ParseCpuMax("50000", &cpus));  // period defaults to 100 ms
  EXPECT_DOUBLE_EQ(cpus, 0.5);
  EXPECT_FALSE(ParseCpuMax("", &cpus));
  EXPECT_FALSE(ParseCpuMax("abc 100000", &cpus));
  EXPECT_FALSE(ParseCpuMax("100 0", &cpus));
  EXPECT_FALSE(ParseCpuMax("-5 100000", &cpus));
  EXPECT_FALSE(ParseCpuMax("1 2 3", &cpus));
}

TEST(HostResourcesTest, ParsesLimitsAndStats) {
  int64_t bytes = 0;
  ASSERT_TRUE(ParseLimitBytes("max\n", &bytes));
  EXPECT_EQ(bytes, -1);
  ASSERT_TRUE(ParseLimitBytes("4294967296\n", &bytes));
  EXPECT_EQ(bytes, int64_t{4} << 30);
  ASSERT_TRUE(ParseLimitBytes("9223372036854771712", &bytes));  // v1 "none"
  EXPECT_EQ(bytes, -1);
  EXPECT_FALSE(ParseLimitBytes("lots", &bytes));
  EXPECT_FALSE(ParseLimitBytes("-1", &bytes));
  int64_t v = 0;
  ASSERT_TRUE(ParseStatValue("anon 5\ninactive_file 1234\nactive_file 9\n",
                             "inactive_file", &v));
  EXPECT_EQ(v, 1234);
  EXPECT_FALSE(ParseStatValue("anon 5\n", "inactive_file", &v));
}

TEST(HostResourcesTest, CgroupV2QuotaAndMemoryInNamespace) {
  FakeRoot r;
  r.Write("/proc/self/cgroup", "0::/\n");
  r.Write("/proc/self/mountinfo", kMountinfoV2);
  r.Write("/sys/fs/cgroup/cgroup.procs", "1\n");
  r.Write("/sys/fs/cgroup/cpu.max", "350000 100000\n");
  r.Write("/sys/fs/cgroup/memory.max", "8589934592\n");
  r.Write("/sys/fs/cgroup/memory.current", "3221225472\n");
  r.Write("/sys/fs/cgroup/memory.stat", "anon 1\ninactive_file 1073741824\n");

  const CpuBudget b = ReadCpuBudget(r.path(), /*affinity_cpus=*/64);
  EXPECT_DOUBLE_EQ(b.quota_cpus, 3.5);
  EXPECT_EQ(b.usable_cpus, 4);  // rounded up
  EXPECT_EQ(b.quota_source, r.path() + "/sys/fs/cgroup/cpu.max");

  const CgroupMemory m = ReadCgroupMemory(r.path());
  EXPECT_EQ(m.limit_bytes, int64_t{8} << 30);
  EXPECT_EQ(m.working_set_bytes, int64_t{2} << 30);  // usage - inactive file
  EXPECT_EQ(m.available_bytes(), int64_t{6} << 30);
  EXPECT_EQ(m.limit_source, r.path() + "/sys/fs/cgroup/memory.max");
}

TEST(HostResourcesTest, CgroupV2AncestorLimitsApply) {
  FakeRoot r;
  r.Write("/proc/self/cgroup", "0::/kubepods/pod1/ctr\n");
  r.Write("/proc/self/mountinfo", kMountinfoV2);
  const std::string pod = "/sys/fs/cgroup/kubepods/pod1";
  r.Write(pod + "/ctr/cgroup.procs", "1\n");
  r.Write(pod + "/ctr/cpu.max", "max 100000\n");
  r.Write(pod + "/cpu.max", "200000 100000\n");  // the pod's limit
  r.Write(pod + "/ctr/memory.max", "max\n");
  r.Write(pod + "/memory.max", "1073741824\n");
  r.Write(pod + "/memory.current", "536870912\n");

  EXPECT_EQ(ReadCpuBudget(r.path(), 16).usable_cpus, 2);
  const CgroupMemory m = ReadCgroupMemory(r.path());
  EXPECT_EQ(m.limit_bytes, int64_t{1} << 30);
  EXPECT_EQ(m.available_bytes(), int64_t{512} << 20);
}

TEST(HostResourcesTest, CgroupV1QuotaAndMemory) {
  FakeRoot r;
  r.Write("/proc/self/cgroup",
          "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n");
  r.Write("/proc/self/mountinfo", kMountinfoV1);
  const std::string cpu = "/sys/fs/cgroup/cpu,cpuacct/docker/abc";
  r.Write(cpu + "/cgroup.procs", "1\n");
  r.Write(cpu + "/cpu.cfs_quota_us", "150000\n");
  r.Write(cpu + "/cpu.cfs_period_us", "100000\n");
  const std::string mem = "/sys/fs/cgroup/memory/docker/abc";
  r.Write(mem + "/cgroup.procs", "1\n");
  r.Write(mem + "/memory.limit_in_bytes", "2147483648\n");
  r.Write(mem + "/memory.usage_in_bytes", "1073741824\n");
  r.Write(mem + "/memory.stat", "cache 5\ntotal_inactive_file 536870912\n");
  r.Write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");

  const CpuBudget b = ReadCpuBudget(r.path(), 8);
  EXPECT_DOUBLE_EQ(b.quota_cpus, 1.5);
  EXPECT_EQ(b.usable_cpus, 2);
  const CgroupMemory m = ReadCgroupMemory(r.path());
  EXPECT_EQ(m.limit_bytes, int64_t{2} << 30);
  EXPECT_EQ(m.available_bytes(), (int64_t{3} << 29));  // 2 GiB - 0.5 GiB
}

TEST(HostResourcesTest, V1PathNotVisibleFallsBackToMountPoint) {
  // A v1 container without a cgroup namespace: /proc/self/cgroup names the
  // host's path, the container sees its own cgroup at the mount point.
  FakeRoot r;
  r.Write("/proc/self/cgroup", "3:cpu,cpuacct:/kubepods/burstable/pod9/xyz\n");
  r.Write("/proc/self/mountinfo", kMountinfoV1);
  r.Write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "50000\n");
  r.Write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(ReadCpuBudget(r.path(), 8).usable_cpus, 1);
}

TEST(HostResourcesTest, AffinityBoundsWithoutQuota) {
  FakeRoot r;  // no cgroup files at all: no limits
  const CpuBudget b = ReadCpuBudget(r.path(), 3);
  EXPECT_EQ(b.quota_cpus, 0);
  EXPECT_EQ(b.usable_cpus, 3);
  EXPECT_LT(ReadCgroupMemory(r.path()).limit_bytes, 0);
  EXPECT_EQ(ReadCgroupMemory(r.path()).available_bytes(), -1);
}

TEST(HostResourcesTest, QuotaBelowAffinityWins) {
  FakeRoot r;
  r.Write("/proc/self/cgroup", "0::/\n");
  r.Write("/proc/self/mountinfo", kMountinfoV2);
  r.Write("/sys/fs/cgroup/cpu.max", "100000 100000\n");
  EXPECT_EQ(ReadCpuBudget(r.path(), 16).usable_cpus, 1);
  EXPECT_EQ(ReadCpuBudget(r.path(), 0).usable_cpus, 1);
}

TEST(HostResourcesTest, RealProcessHasAtLeastOneCpu) {
  const CpuBudget b = ReadCpuBudget();
  EXPECT_GE(b.usable_cpus, 1);
  EXPECT_LE(b.usable_cpus, b.online_cpus);
  EXPECT_EQ(UsableCpus(), b.usable_cpus);
}

}  // namespace
}  // namespace rankd::kernels
