// Starting a thread without the process ending when it cannot be started.
//
// std::thread's constructor throws std::system_error where the process may
// start no more threads: its RLIMIT_NPROC (ulimit -u), its cgroup's task
// limit (pids.max, a container's PID limit), or no memory for a stack. Left
// uncaught, that ends rankd (std::terminate) in the middle of a model load.
// Through TryStartThread the load fails instead, with a status that says
// why, and the server goes on serving its other models. Thread-safe.
#ifndef RANKD_KERNELS_CPU_THREAD_START_H_
#define RANKD_KERNELS_CPU_THREAD_START_H_

#include <system_error>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace rankd::kernels {

// The RESOURCE_EXHAUSTED status for threads `what` names that could not be
// started, with the system's reason (std::system_error::what()).
inline absl::Status ThreadStartError(absl::string_view what, absl::string_view reason) {
  return absl::ResourceExhaustedError(
      absl::StrCat("cannot start ", what, ": ", reason,
                   " (the process or its cgroup may start no more threads: ulimit -u, pids.max)"));
}

// std::thread(args...), or ThreadStartError(what, ...) when it cannot start.
template <typename... Args>
absl::StatusOr<std::thread> TryStartThread(absl::string_view what, Args&&... args) {
  try {
    return std::thread(std::forward<Args>(args)...);
  } catch (const std::system_error& e) {
    return ThreadStartError(what, e.what());
  }
}

}  // namespace rankd::kernels

#endif  // RANKD_KERNELS_CPU_THREAD_START_H_
