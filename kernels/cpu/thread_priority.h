// Lowering the scheduling priority (raising the nice value) of one thread.
//
// Why: on a saturated host the CPU backend's compute threads would otherwise
// compete on equal terms with the threads that receive requests and answer
// them. A request refused under overload (RESOURCE_EXHAUSTED) then waits for
// a core behind batches it will never be part of. With the compute threads a
// few nice levels down, the kernel scheduler (CFS) runs a waking gRPC thread
// first, while the compute threads still get every cycle nobody else wants:
// nice only matters when threads compete for a core.
//
// On Linux each thread has its own nice value (setpriority on a thread id);
// threads a thread creates start with its value. Raising nice needs no
// privilege; lowering it again does (CAP_SYS_NICE), so a thread lowered here
// stays lowered. Thread-safe.
#ifndef RANKD_KERNELS_CPU_THREAD_PRIORITY_H_
#define RANKD_KERNELS_CPU_THREAD_PRIORITY_H_

namespace rankd::kernels {

// The nice values a thread can have (man 2 setpriority).
inline constexpr int kMaxNice = 19;

// Adds `increment` (> 0) to the calling thread's nice value, capped at
// kMaxNice. increment <= 0 changes nothing. Returns 0, or the errno of the
// failed getpriority / setpriority call.
int LowerThisThreadPriority(int increment);

// The calling thread's nice value.
int ThisThreadNice();

}  // namespace rankd::kernels

#endif  // RANKD_KERNELS_CPU_THREAD_PRIORITY_H_
