// Lowering the scheduling priority of one thread: its nice value, or the
// SCHED_IDLE policy.
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

// Moves the calling thread to the SCHED_IDLE policy (man 7 sched): it runs
// on a core only when no thread of the normal policy wants that core, and
// never preempts one when it wakes; on a saturated core it still gets a small
// share, so it is slowed, not stopped. Entering it needs no privilege;
// leaving it does (CAP_SYS_NICE), so only threads that stay background for
// their whole life should call this. Returns 0, or the errno of the failed
// sched_setscheduler call.
int MakeThisThreadIdle();

// Whether the calling thread has the SCHED_IDLE policy.
bool ThisThreadIsIdle();

}  // namespace rankd::kernels

#endif  // RANKD_KERNELS_CPU_THREAD_PRIORITY_H_
