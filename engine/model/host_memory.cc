#include "engine/model/host_memory.h"

#include <algorithm>

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "kernels/cpu/host_resources.h"

namespace rankd::engine {
namespace {

// Transparent huge pages are 2 MiB on x86-64 and (with 4 KiB base pages)
// arm64; aligning the start lets the kernel back the whole range with them.
constexpr int64_t kHugePageBytes = int64_t{2} << 20;

}  // namespace

HostAllocation::HostAllocation(HostAllocation&& other) noexcept {
  *this = std::move(other);
}

HostAllocation& HostAllocation::operator=(HostAllocation&& other) noexcept {
  if (this != &other) {
    if (map_ != nullptr) munmap(map_, static_cast<size_t>(map_bytes_));
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    map_ = std::exchange(other.map_, nullptr);
    map_bytes_ = std::exchange(other.map_bytes_, 0);
    huge_pages_advised_ = std::exchange(other.huge_pages_advised_, false);
  }
  return *this;
}

HostAllocation::~HostAllocation() {
  if (map_ == nullptr) return;
  // In 1 GiB pieces: unmapping tens of GB at once holds the process's
  // address-space lock for a second or more, and every other thread that maps
  // memory or faults a page waits (the versions still serving, when an old
  // version is released after a swap). Between pieces they get through.
  constexpr size_t kPiece = size_t{1} << 30;
  char* base = static_cast<char*>(map_);
  const size_t bytes = static_cast<size_t>(map_bytes_);
  for (size_t done = 0; done < bytes; done += kPiece) {
    munmap(base + done, std::min(kPiece, bytes - done));
  }
}

std::string HumanBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return absl::StrFormat("%.2f %s", bytes, units[u]);
}

absl::StatusOr<int64_t> ParseMemAvailable(absl::string_view meminfo) {
  for (absl::string_view line : absl::StrSplit(meminfo, '\n')) {
    if (!absl::ConsumePrefix(&line, "MemAvailable:")) continue;
    line = absl::StripAsciiWhitespace(line);
    int64_t multiplier = 1;
    if (absl::ConsumeSuffix(&line, "kB")) multiplier = 1024;  // always kB
    int64_t value = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &value) ||
        value < 0) {
      return absl::InternalError(
          absl::StrCat("/proc/meminfo: cannot parse MemAvailable '", line,
                       "'"));
    }
    return value * multiplier;
  }
  return absl::NotFoundError("/proc/meminfo: no MemAvailable line");
}

absl::StatusOr<int64_t> ReadMemAvailable() {
  std::ifstream f("/proc/meminfo");
  if (!f) return absl::NotFoundError("cannot read /proc/meminfo");
  std::stringstream text;
  text << f.rdbuf();
  return ParseMemAvailable(text.str());
}

absl::StatusOr<AvailableHostMemory> ReadAvailableHostMemory() {
  absl::StatusOr<int64_t> meminfo = ReadMemAvailable();
  const kernels::CgroupMemory cgroup = kernels::ReadCgroupMemory();
  const int64_t room = cgroup.available_bytes();
  if (room >= 0 && (!meminfo.ok() || room < *meminfo)) {
    return AvailableHostMemory{
        room, absl::StrCat("cgroup limit ",
                           HumanBytes(static_cast<double>(cgroup.limit_bytes)),
                           " (", cgroup.limit_source, ") minus ",
                           HumanBytes(static_cast<double>(cgroup.working_set_bytes)),
                           " in use")};
  }
  if (!meminfo.ok()) return meminfo.status();
  return AvailableHostMemory{*meminfo, "MemAvailable in /proc/meminfo"};
}

absl::Status CheckHostMemory(int64_t bytes, int64_t available,
                             absl::string_view what, absl::string_view source) {
  if (bytes <= available) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      what, " needs ", HumanBytes(static_cast<double>(bytes)), " (", bytes,
      " bytes) of host memory, but only ",
      HumanBytes(static_cast<double>(available)), " (", available,
      " bytes) is available (", source, ")"));
}

absl::StatusOr<HostAllocation> AllocateHostBytes(int64_t bytes,
                                                 absl::string_view what,
                                                 int64_t mem_available) {
  if (bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": negative allocation of ", bytes, " bytes"));
  }
  HostAllocation a;
  if (bytes == 0) return a;
  std::string source = "MemAvailable in /proc/meminfo";
  if (mem_available < 0) {
    // Where nothing can be read the mapping itself is the only check.
    absl::StatusOr<AvailableHostMemory> read = ReadAvailableHostMemory();
    if (read.ok()) {
      mem_available = read->bytes;
      source = read->source;
    }
  }
  if (mem_available >= 0) {
    if (absl::Status s = CheckHostMemory(bytes, mem_available, what, source);
        !s.ok()) {
      return s;
    }
  }
  // Over-map by one huge page, then trim the unaligned head and the tail.
  const int64_t aligned_bytes =
      (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  const int64_t map_bytes = aligned_bytes + kHugePageBytes;
  void* map = mmap(nullptr, static_cast<size_t>(map_bytes),
                   PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, ": cannot map ", HumanBytes(static_cast<double>(bytes)), " (",
        bytes, " bytes) of host memory: ", std::strerror(errno)));
  }
  const uintptr_t start = reinterpret_cast<uintptr_t>(map);
  const uintptr_t aligned =
      (start + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  const size_t head = aligned - start;
  const size_t tail = static_cast<size_t>(map_bytes) - head -
                      static_cast<size_t>(aligned_bytes);
  if (head > 0) munmap(map, head);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + aligned_bytes), tail);
  a.map_ = reinterpret_cast<void*>(aligned);
  a.map_bytes_ = aligned_bytes;
  a.data_ = reinterpret_cast<uint8_t*>(aligned);
  a.size_ = bytes;
  // Advice only: without THP the memory still works, with 4 KiB pages.
  a.huge_pages_advised_ =
      madvise(a.map_, static_cast<size_t>(aligned_bytes), MADV_HUGEPAGE) == 0;
  return a;
}

}  // namespace rankd::engine
