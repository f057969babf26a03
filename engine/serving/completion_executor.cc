#include "engine/serving/completion_executor.h"

#include <pthread.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/thread_start.h"

namespace rankd::engine {

absl::StatusOr<std::unique_ptr<CompletionExecutor>> CompletionExecutor::Create(
    const Options& options) {
  if (options.num_threads < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CompletionExecutor options: num_threads must be >= 1, got ",
        options.num_threads));
  }
  if (options.thread_name.empty() || options.thread_name.size() > 15) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CompletionExecutor options: thread_name must have 1 to 15 characters, got \"",
        options.thread_name, "\""));
  }
  std::unique_ptr<CompletionExecutor> executor(new CompletionExecutor(options));
  {
    absl::MutexLock lock(&executor->shutdown_mu_);
    for (int i = 0; i < options.num_threads; ++i) {
      absl::StatusOr<std::thread> thread = kernels::TryStartThread(
          absl::StrCat("completion thread ", i + 1, " of ", options.num_threads),
          &CompletionExecutor::Loop, executor.get());
      // The destructor stops and joins the threads already started.
      if (!thread.ok()) return thread.status();
      executor->threads_.push_back(std::move(thread).value());
    }
  }
  return executor;
}

CompletionExecutor::CompletionExecutor(const Options& options)
    : num_threads_(options.num_threads), thread_name_(options.thread_name) {}

CompletionExecutor::~CompletionExecutor() { Shutdown(); }

void CompletionExecutor::Run(Task task) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      queue_.push_back(std::move(task));
      // Only a waiting thread needs a wake-up; a busy one takes the task when
      // it comes back for the next (saves a futex call per batch under load).
      if (idle_threads_ > 0) cv_.Signal();
      return;
    }
  }
  // Shutting down: the threads may already be gone; the task still runs.
  std::move(task)();
  absl::MutexLock lock(&mu_);
  ++tasks_run_;
}

void CompletionExecutor::Loop() {
  pthread_setname_np(pthread_self(), thread_name_.c_str());
  absl::MutexLock lock(&mu_);
  for (;;) {
    if (!queue_.empty()) {
      Task task = std::move(queue_.front());
      queue_.pop_front();
      mu_.Unlock();
      std::move(task)();
      task = nullptr;  // destroy captures outside the lock too
      mu_.Lock();
      ++tasks_run_;
      continue;
    }
    // Exit only with an empty queue: Shutdown drains everything queued.
    if (stopping_) return;
    ++idle_threads_;
    cv_.Wait(&mu_);
    --idle_threads_;
  }
}

void CompletionExecutor::Shutdown() {
  absl::MutexLock shutdown_lock(&shutdown_mu_);
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    cv_.SignalAll();
  }
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

int64_t CompletionExecutor::tasks_run() const {
  absl::MutexLock lock(&mu_);
  return tasks_run_;
}

}  // namespace rankd::engine
