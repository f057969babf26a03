#include "engine/updates/idle_priority_runner.h"

#include <pthread.h>

#include <thread>
#include <utility>

#include "kernels/cpu/thread_priority.h"
#include "kernels/cpu/thread_start.h"

namespace rankd::engine {

IdlePriorityRunner::~IdlePriorityRunner() {
  {
    absl::MutexLock lock(&mu_);
    if (!started_) return;
    stop_ = true;
    wake_ = true;
  }
  thread_.join();
}

void IdlePriorityRunner::Run(absl::FunctionRef<void()> fn) {
  absl::MutexLock one_at_a_time(&run_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (!started_ && !inline_) {
      absl::StatusOr<std::thread> thread =
          kernels::TryStartThread(thread_name_, [this] { Loop(); });
      if (thread.ok()) {
        started_ = true;
        thread_ = std::move(thread).value();
      } else {
        inline_ = true;  // for good: see the header
      }
    }
    if (!inline_) {
      job_ = &fn;
      has_job_ = true;
      job_done_ = false;
      wake_ = true;
      mu_.Await(absl::Condition(&job_done_));
      return;
    }
  }
  fn();  // on the caller's thread, with mu_ free for idle_policy()
}

bool IdlePriorityRunner::runs_inline() const {
  absl::MutexLock lock(&mu_);
  return inline_;
}

bool IdlePriorityRunner::idle_policy() const {
  absl::MutexLock lock(&mu_);
  return idle_policy_;
}

void IdlePriorityRunner::Loop() {
  pthread_setname_np(pthread_self(), thread_name_.substr(0, 15).c_str());
  const bool idle = kernels::MakeThisThreadIdle() == 0;
  if (!idle) kernels::LowerThisThreadPriority(kernels::kMaxNice);
  absl::MutexLock lock(&mu_);
  idle_policy_ = idle;
  for (;;) {
    mu_.Await(absl::Condition(&wake_));
    if (!has_job_) return;  // woken to stop
    absl::FunctionRef<void()>* job = job_;
    mu_.Unlock();
    (*job)();
    mu_.Lock();
    job_ = nullptr;
    has_job_ = false;
    wake_ = stop_;
    job_done_ = true;
  }
}

}  // namespace rankd::engine
