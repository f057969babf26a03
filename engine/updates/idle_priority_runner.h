// IdlePriorityRunner: one helper thread at the SCHED_IDLE CPU policy
// (kernels/cpu/thread_priority.h) that runs closures for callers who wait
// for them.
//
// Why: applying an embedding update message costs the host a scan of its
// rows (validation) and a copy of them (staging into the stores); at a
// steady update stream that is a burst of CPU work per message. On a thread
// of normal priority each burst preempts threads that receive, batch and
// answer requests, and serving's tail latency rises with the stream (docs/
// benchmarks.md, "Serving p99 under an update stream"). On this thread the
// bursts take only cores that serving leaves idle. On a saturated host the
// thread still gets a small share of a core: updates slow down (the lag
// metric shows it), they do not stop.
//
// The thread starts on the first Run and keeps its policy for its life
// (leaving SCHED_IDLE needs a privilege). Where the policy is refused it
// runs at the highest nice value instead (idle_policy() says which). Where
// the thread cannot be started at all (the process's or its cgroup's task
// limit: std::thread throws), this Run and every later one run their closure
// on the caller's thread, at its priority (runs_inline() says so): updates
// still apply, as without a runner, and a closure's lock is still released
// on the thread that took it.
//
// Threading: Run is thread-safe; closures run one at a time, in the order
// their Run calls took the runner. Work a closure locks stays locked by this
// thread, so a lock it takes must be released by a later closure (not by the
// caller). The destructor joins the thread; no Run may be in progress.
#ifndef RANKD_ENGINE_UPDATES_IDLE_PRIORITY_RUNNER_H_
#define RANKD_ENGINE_UPDATES_IDLE_PRIORITY_RUNNER_H_

#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"

namespace rankd::engine {

class IdlePriorityRunner {
 public:
  // `thread_name`: the helper thread's name (top -H), at most 15 bytes used.
  explicit IdlePriorityRunner(std::string thread_name) : thread_name_(std::move(thread_name)) {}
  ~IdlePriorityRunner();
  IdlePriorityRunner(const IdlePriorityRunner&) = delete;
  IdlePriorityRunner& operator=(const IdlePriorityRunner&) = delete;

  // Runs `fn` on the helper thread; returns once it has returned.
  void Run(absl::FunctionRef<void()> fn);

  // Whether the helper thread has the SCHED_IDLE policy (false before the
  // first Run, or where the policy was refused and nice was raised instead).
  bool idle_policy() const;

  // Whether the helper thread could not be started, so closures run on the
  // callers' threads.
  bool runs_inline() const;

 private:
  void Loop();

  const std::string thread_name_;
  absl::Mutex run_mu_;  // one Run at a time
  mutable absl::Mutex mu_ ABSL_ACQUIRED_AFTER(run_mu_);
  std::thread thread_;  // started by the first Run (under mu_)
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool inline_ ABSL_GUARDED_BY(mu_) = false;  // the thread could not be started
  bool idle_policy_ ABSL_GUARDED_BY(mu_) = false;
  absl::FunctionRef<void()>* job_ ABSL_GUARDED_BY(mu_) = nullptr;  // the Run caller's
  bool has_job_ ABSL_GUARDED_BY(mu_) = false;
  bool job_done_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;  // has_job_ || stop_
};

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_UPDATES_IDLE_PRIORITY_RUNNER_H_
