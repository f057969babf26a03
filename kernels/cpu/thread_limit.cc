#include "kernels/cpu/thread_limit.h"

#include <pthread.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace rankd::kernels::testing {

bool LimitAddressSpaceInThisChild(int64_t extra_bytes, std::string* why) {
  std::ifstream status("/proc/self/status");
  std::string line;
  int64_t vm_kib = -1;
  while (std::getline(status, line)) {
    if (line.rfind("VmSize:", 0) == 0) vm_kib = std::stoll(line.substr(7));
  }
  if (vm_kib < 0) {
    *why = "no VmSize in /proc/self/status";
    return false;
  }
  // glibc reuses the stacks of exited threads (up to 40 MiB of them) without
  // mapping anything; a default stack larger than those makes every new
  // thread map a fresh one, which the cap then refuses.
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0 ||
      pthread_attr_setstacksize(&attr, kChildThreadStackBytes) != 0 ||
      pthread_setattr_default_np(&attr) != 0) {
    *why = "cannot set the default thread stack size";
    return false;
  }
  pthread_attr_destroy(&attr);
  const rlim_t bytes = static_cast<rlim_t>(vm_kib * 1024 + extra_bytes);
  const rlimit limit{bytes, bytes};
  if (setrlimit(RLIMIT_AS, &limit) != 0) {
    *why = std::string("setrlimit(RLIMIT_AS): ") + std::strerror(errno);
    return false;
  }
  return true;
}

void LimitAddressSpaceInThisChildOrExit(int64_t extra_bytes) {
  std::string why;
  if (LimitAddressSpaceInThisChild(extra_bytes, &why)) return;
  std::fprintf(stderr, "thread limit setup: %s\n", why.c_str());
  std::_Exit(2);
}

}  // namespace rankd::kernels::testing
