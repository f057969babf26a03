#include "kernels/cpu/thread_priority.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace rankd::kernels {
namespace {

id_t ThisThreadId() { return static_cast<id_t>(syscall(SYS_gettid)); }

}  // namespace

int ThisThreadNice() {
  errno = 0;  // getpriority may return -1 as a valid nice value
  return getpriority(PRIO_PROCESS, ThisThreadId());
}

int LowerThisThreadPriority(int increment) {
  if (increment <= 0) return 0;
  const id_t tid = ThisThreadId();
  errno = 0;
  const int now = getpriority(PRIO_PROCESS, tid);
  if (now == -1 && errno != 0) return errno;
  const int target = std::min(kMaxNice, now + std::min(increment, 2 * kMaxNice + 1));
  if (setpriority(PRIO_PROCESS, tid, target) != 0) return errno;
  return 0;
}

int MakeThisThreadIdle() {
  struct sched_param param = {};
  param.sched_priority = 0;  // the only priority SCHED_IDLE takes
  if (sched_setscheduler(static_cast<pid_t>(ThisThreadId()), SCHED_IDLE, &param) != 0) {
    return errno;
  }
  return 0;
}

bool ThisThreadIsIdle() {
  return sched_getscheduler(static_cast<pid_t>(ThisThreadId())) == SCHED_IDLE;
}

}  // namespace rankd::kernels
