#include "server/http/connection_threads.h"

#include <system_error>
#include <utility>

#include "spdlog/spdlog.h"

namespace rankd::server {

ConnectionThreads::ConnectionThreads(int max_threads, ThreadStarter start_thread)
    : max_threads_(max_threads), start_thread_(std::move(start_thread)) {}

std::thread ConnectionThreads::StartStdThread(std::function<void()> fn) {
  return std::thread(std::move(fn));
}

ConnectionThreads::~ConnectionThreads() { shutdown(); }

void ConnectionThreads::enqueue(std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  tasks_.push_back(std::move(fn));
  // An idle thread takes it (it wakes when tasks_ is not empty); a new
  // thread only when every thread is busy with earlier tasks.
  if (idle_ < static_cast<int>(tasks_.size()) &&
      static_cast<int>(threads_.size()) < max_threads_ && !stopping_) {
    try {
      threads_.push_back(start_thread_([this] { Work(); }));
    } catch (const std::system_error& e) {
      // The task waits for a busy thread (header); the server goes on.
      if (start_failures_++ == 0) {
        spdlog::warn(
            "HTTP: cannot start a connection thread ({} running): {}; connections wait for a "
            "busy one (the process or its cgroup may start no more threads)",
            threads_.size(), e.what());
      }
    }
  }
}

void ConnectionThreads::Work() {
  mu_.Lock();
  for (;;) {
    ++idle_;
    mu_.Await(absl::Condition(this, &ConnectionThreads::HasWork));
    --idle_;
    if (tasks_.empty()) break;  // stopping, nothing left
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    mu_.Unlock();
    task();
    task = nullptr;  // what it holds goes before the lock is taken again
    mu_.Lock();
  }
  mu_.Unlock();
}

bool ConnectionThreads::HasWork() const { return !tasks_.empty() || stopping_; }

void ConnectionThreads::shutdown() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

int ConnectionThreads::threads() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(threads_.size());
}

int64_t ConnectionThreads::start_failures() const {
  absl::MutexLock lock(&mu_);
  return start_failures_;
}

int ConnectionThreads::busy() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(threads_.size()) - idle_;
}

}  // namespace rankd::server
