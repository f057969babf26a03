#include "engine/model/host_memory.h"

#include <cstdint>
#include <string>
#include <utility>

#include "gmock/gmock.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace rankd::engine {
namespace {

using ::testing::HasSubstr;

TEST(HostMemoryTest, ParsesMemAvailable) {
  const std::string meminfo =
      "MemTotal:       24576000 kB\n"
      "MemFree:         1000000 kB\n"
      "MemAvailable:   20971520 kB\n"
      "Buffers:           12345 kB\n";
  absl::StatusOr<int64_t> v = ParseMemAvailable(meminfo);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, int64_t{20971520} * 1024);
  EXPECT_EQ(ParseMemAvailable("MemTotal: 5 kB\n").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_FALSE(ParseMemAvailable("MemAvailable: lots kB\n").ok());
  // This machine has one.
  absl::StatusOr<int64_t> here = ReadMemAvailable();
  ASSERT_TRUE(here.ok()) << here.status();
  EXPECT_GT(*here, 0);
}

TEST(HostMemoryTest, CheckNamesWhatBytesAndAvailable) {
  EXPECT_TRUE(CheckHostMemory(100, 100, "x").ok());
  const absl::Status s = CheckHostMemory(int64_t{8} << 30, int64_t{5} << 30,
                                         "table 't3' rows");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(),
            "table 't3' rows needs 8.00 GiB (8589934592 bytes) of host "
            "memory, but only 5.00 GiB (5368709120 bytes) is available "
            "(MemAvailable in /proc/meminfo)");
}

TEST(HostMemoryTest, CheckNamesTheSourceOfTheFigure) {
  const absl::Status s =
      CheckHostMemory(2048, 1024, "x", "cgroup limit 1.00 KiB (memory.max)");
  EXPECT_TRUE(absl::StrContains(s.message(), "(cgroup limit 1.00 KiB (memory.max))"))
      << s.message();
}

// What this process may use is never more than the host's MemAvailable.
TEST(HostMemoryTest, AvailableIsAtMostMemAvailable) {
  absl::StatusOr<AvailableHostMemory> mine = ReadAvailableHostMemory();
  absl::StatusOr<int64_t> host = ReadMemAvailable();
  ASSERT_TRUE(mine.ok()) << mine.status();
  ASSERT_TRUE(host.ok()) << host.status();
  // MemAvailable moves between the two reads; allow 256 MiB of drift.
  EXPECT_LE(mine->bytes, *host + (int64_t{256} << 20));
  EXPECT_FALSE(mine->source.empty());
}

// The check runs before mapping: 1 TiB against an injected 1 GiB fails at
// once, without touching the host's memory.
TEST(HostMemoryTest, RefusesBeforeAllocating) {
  absl::StatusOr<HostAllocation> a =
      AllocateHostBytes(int64_t{1} << 40, "table 'big' rows", int64_t{1} << 30);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(a.status().message(),
              HasSubstr("table 'big' rows needs 1.00 TiB (1099511627776 "
                        "bytes) of host memory, but only 1.00 GiB"));
}

TEST(HostMemoryTest, AllocatesAlignedZeroedMemory) {
  const int64_t bytes = (int64_t{5} << 20) + 123;
  absl::StatusOr<HostAllocation> a =
      AllocateHostBytes(bytes, "test", int64_t{1} << 40);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_NE(a->data(), nullptr);
  EXPECT_EQ(a->size(), bytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a->data()) % (2 << 20), 0u);
  for (int64_t i = 0; i < bytes; i += 4093) ASSERT_EQ(a->data()[i], 0);
  a->data()[bytes - 1] = 7;  // writable to the last byte
  HostAllocation moved = *std::move(a);
  EXPECT_EQ(moved.data()[bytes - 1], 7);
  HostAllocation empty;
  EXPECT_EQ(empty.data(), nullptr);
  absl::StatusOr<HostAllocation> zero = AllocateHostBytes(0, "none");
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->size(), 0);
  EXPECT_FALSE(AllocateHostBytes(-1, "neg").ok());
}

}  // namespace
}  // namespace rankd::engine
