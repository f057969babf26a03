// What this process may use of the host: CPUs and memory, as its container
// sees them.
//
// std::thread::hardware_concurrency() and /proc/meminfo describe the host,
// not the container: a pod limited to 4 CPUs on a 128-core node would start
// 128 threads per pool and be throttled by the CFS quota, and a load checked
// against the host's MemAvailable would pass and then be OOM-killed at the
// pod's memory limit. These functions read the limits that actually apply:
//   CPUs:   the affinity mask (sched_getaffinity: taskset, cpusets), and the
//           CFS quota of the process's cgroup and its ancestors (cgroup v2
//           `cpu.max`, v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`), rounded
//           up to whole CPUs.
//   Memory: the cgroup's limit (v2 `memory.max`, v1 `memory.limit_in_bytes`)
//           minus its working set (usage minus inactive file cache, as the
//           kubelet counts it), the smallest over the cgroup and its
//           ancestors.
// Cgroup files are found from /proc/self/cgroup and /proc/self/mountinfo
// (both hierarchies, and cgroup namespaces, where the process sees its own
// cgroup as the root). Anything unreadable counts as "no limit", never as an
// error: the host's figures are then the answer.
//
// Every reader takes a `root` prefix ("" = the real filesystem) so tests can
// lay out fake /proc and /sys trees. Thread-safe (no shared state, except
// UsableCpus' cache, computed once).
#ifndef RANKD_KERNELS_CPU_HOST_RESOURCES_H_
#define RANKD_KERNELS_CPU_HOST_RESOURCES_H_

#include <cstdint>
#include <string>

namespace rankd::kernels {

struct CpuBudget {
  int online_cpus = 1;        // CPUs of the host (hardware_concurrency)
  int affinity_cpus = 0;      // CPUs in the affinity mask; 0 = unknown
  double quota_cpus = 0;      // CFS quota / period; 0 = no quota
  std::string quota_source;   // the file the quota came from ("" = none)
  int usable_cpus = 1;        // min(affinity, ceil(quota)), at least 1
};

struct CgroupMemory {
  int64_t limit_bytes = -1;        // smallest limit on the path; -1 = none
  int64_t working_set_bytes = -1;  // of the cgroup that has that limit
  std::string limit_source;        // the file the limit came from
  // limit - working set (>= 0); -1 where there is no limit.
  int64_t available_bytes() const;
};

// The CPU budget of this process. `root` prefixes /proc and /sys paths;
// `affinity_cpus` < 0 reads sched_getaffinity (tests pass a number).
CpuBudget ReadCpuBudget(const std::string& root = "", int affinity_cpus = -1);

// The cgroup memory limit that applies to this process.
CgroupMemory ReadCgroupMemory(const std::string& root = "");

// ReadCpuBudget().usable_cpus of this process, read once and cached: the
// default size of every thread pool.
int UsableCpus();

// Parsers, exposed for tests. Each returns false on malformed text.
// cgroup v2 cpu.max: "max 100000" (no quota: *cpus = 0) or "250000 100000".
bool ParseCpuMax(const std::string& text, double* cpus);
// A byte count, or "max" (cgroup v2) = no limit (*bytes = -1). cgroup v1
// reports "no limit" as a huge number near INT64_MAX: callers treat any
// limit above the host's memory as none.
bool ParseLimitBytes(const std::string& text, int64_t* bytes);
// The value of `key` in a memory.stat text ("inactive_file 123\n...").
bool ParseStatValue(const std::string& text, const std::string& key,
                    int64_t* value);

}  // namespace rankd::kernels

#endif  // RANKD_KERNELS_CPU_HOST_RESOURCES_H_
