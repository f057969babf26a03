// Test-only: a process that can start only a few more threads, for tests of
// what happens when std::thread cannot start one (as at a container's PID
// or memory limit).
#ifndef RANKD_KERNELS_CPU_THREAD_LIMIT_H_
#define RANKD_KERNELS_CPU_THREAD_LIMIT_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace rankd::kernels::testing {

// The default stack of threads started after LimitAddressSpaceInThisChild.
inline constexpr size_t kChildThreadStackBytes = size_t{16} << 20;

// For the child of a death test (EXPECT_EXIT) only: caps the process's
// address space (RLIMIT_AS) at its current size plus `extra_bytes`, and makes
// new threads' default stack kChildThreadStackBytes (larger than the stacks
// glibc caches, so each new thread maps its own), so that once the extra
// bytes are used up a new thread's stack cannot be mapped and starting the
// thread fails with EAGAIN. RLIMIT_AS binds root
// too, unlike RLIMIT_NPROC, so this works inside Bazel's sandbox. Returns
// false, with the reason in *why, where it cannot be set up.
bool LimitAddressSpaceInThisChild(int64_t extra_bytes, std::string* why);

// LimitAddressSpaceInThisChild, or, where it cannot be set up, the reason on
// stderr and the child ends with exit status 2 (which no test expects).
void LimitAddressSpaceInThisChildOrExit(int64_t extra_bytes);

// Whether a sanitizer runs this binary: ThreadSanitizer does not support
// starting threads in a forked child (death tests fork), and the
// AddressSanitizer's shadow memory makes an address-space cap meaningless.
constexpr bool kUnderSanitizer =
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
    true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
    true;
#else
    false;
#endif
#else
    false;
#endif

}  // namespace rankd::kernels::testing

#endif  // RANKD_KERNELS_CPU_THREAD_LIMIT_H_
