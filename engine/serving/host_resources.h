// The CPUs and host memory this process may use, as the server needs them:
// the default size of its thread pools and one start-up log line, so an
// operator sees at once whether rankd found the container's limits.
// (The readers live in kernels/cpu/host_resources.h, the lowest layer,
// because load-time thread fan-out there sizes itself from them.)
#ifndef RANKD_ENGINE_SERVING_HOST_RESOURCES_H_
#define RANKD_ENGINE_SERVING_HOST_RESOURCES_H_

#include <string>

#include "kernels/cpu/host_resources.h"

namespace rankd::engine {

// CPUs this process may use (affinity, cgroup quota), at least 1; cached.
inline int UsableCpus() { return kernels::UsableCpus(); }

// "CPUs: 4 usable (64 online, affinity 64, cgroup quota 3.50 from
// /sys/fs/cgroup/cpu.max); host memory: 6.20 GiB available (cgroup limit
// 8.00 GiB (/sys/fs/cgroup/memory.max) minus 1.80 GiB in use)".
std::string DescribeHostResources();

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_SERVING_HOST_RESOURCES_H_
