// The CPU time (user + system) that every thread of this process has used so
// far, in seconds. A load generator samples it at a measured window's two ends
// to report its own cost: one near the limit of its cores (or of the threads
// its client library runs calls on) measures itself, not the server.
#ifndef RANKD_LOADTEST_DRIVER_PROCESS_CPU_H_
#define RANKD_LOADTEST_DRIVER_PROCESS_CPU_H_

#include <sys/resource.h>

namespace rankd::loadtest {

inline double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

}  // namespace rankd::loadtest

#endif  // RANKD_LOADTEST_DRIVER_PROCESS_CPU_H_
