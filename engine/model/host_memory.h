// Big host allocations for table rows and keys generated or read from the
// weights file at load time.
//
// Rows live in an anonymous private mapping (MAP_NORESERVE, so a 50 GB
// reservation costs nothing until written), 2 MiB aligned and advised as
// transparent huge pages: fewer TLB misses for the CPU backend's random row
// reads, and the CUDA backend can cudaHostRegister the very same memory in
// place for HOST placement (huge pages extend the GPU's address-translation
// reach too). Before mapping, the size is checked against the memory this
// process can still use (the kernel's MemAvailable, or less where a cgroup
// memory limit applies: kernels/cpu/host_resources.h), so running out of
// host memory is a clear error naming what needed the memory, not an OOM
// kill halfway through a fill.
#ifndef RANKD_ENGINE_MODEL_HOST_MEMORY_H_
#define RANKD_ENGINE_MODEL_HOST_MEMORY_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rankd::engine {

// One mapping; unmapped by the destructor. Move-only.
class HostAllocation {
 public:
  HostAllocation() = default;
  HostAllocation(HostAllocation&& other) noexcept;
  HostAllocation& operator=(HostAllocation&& other) noexcept;
  HostAllocation(const HostAllocation&) = delete;
  HostAllocation& operator=(const HostAllocation&) = delete;
  ~HostAllocation();

  uint8_t* data() const { return data_; }
  // Bytes asked for (the mapping may be a little larger).
  int64_t size() const { return size_; }
  // madvise(MADV_HUGEPAGE) succeeded (transparent huge pages may still be
  // off system-wide: /sys/kernel/mm/transparent_hugepage/enabled).
  bool huge_pages_advised() const { return huge_pages_advised_; }

 private:
  friend absl::StatusOr<HostAllocation> AllocateHostBytes(int64_t,
                                                          absl::string_view,
                                                          int64_t);
  uint8_t* data_ = nullptr;
  int64_t size_ = 0;
  void* map_ = nullptr;  // what munmap gets
  int64_t map_bytes_ = 0;
  bool huge_pages_advised_ = false;
};

// "MemAvailable" of a /proc/meminfo text, in bytes.
absl::StatusOr<int64_t> ParseMemAvailable(absl::string_view meminfo);

// MemAvailable of this host now, in bytes; an error where /proc/meminfo is
// missing or has no MemAvailable line (not Linux, or a kernel before 3.14).
absl::StatusOr<int64_t> ReadMemAvailable();

// Host memory this process can still allocate: the host's MemAvailable, or
// the container's cgroup limit minus its working set where that is smaller.
struct AvailableHostMemory {
  int64_t bytes = 0;
  // Where the figure came from, for error messages and the start-up log:
  // "MemAvailable in /proc/meminfo" or "cgroup limit 4.00 GiB
  // (/sys/fs/cgroup/memory.max) minus 1.20 GiB in use".
  std::string source;
};

// The smaller of MemAvailable and the cgroup's room; an error only where
// neither can be read (not Linux).
absl::StatusOr<AvailableHostMemory> ReadAvailableHostMemory();

// RESOURCE_EXHAUSTED unless `bytes` <= `available`:
// "<what> needs 7.45 GiB (8000000000 bytes) of host memory, but only 5.20 GiB
// (5583457484 bytes) is available (<source>)".
absl::Status CheckHostMemory(
    int64_t bytes, int64_t available, absl::string_view what,
    absl::string_view source = "MemAvailable in /proc/meminfo");

// Maps `bytes` (>= 0) of zero-filled, 2 MiB-aligned memory. `what` names the
// user ("table 't3' rows") in errors. `mem_available` is the memory to
// check against: -1 (the default) reads ReadAvailableHostMemory (no check
// where it cannot be read); tests pass a number. Pages are committed on first write,
// so callers fill with their own threads (each thread faults its own pages).
absl::StatusOr<HostAllocation> AllocateHostBytes(int64_t bytes,
                                                 absl::string_view what,
                                                 int64_t mem_available = -1);

// "7.45 GiB" (binary units, two decimals).
std::string HumanBytes(double bytes);

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_MODEL_HOST_MEMORY_H_
