#include "server/http/connection_threads.h"

#include <utility>

namespace rankd::server {

ConnectionThreads::ConnectionThreads(int max_threads) : max_threads_(max_threads) {}

ConnectionThreads::~ConnectionThreads() { shutdown(); }

void ConnectionThreads::enqueue(std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  tasks_.push_back(std::move(fn));
  // An idle thread takes it (it wakes when tasks_ is not empty); a new
  // thread only when every thread is busy with earlier tasks.
  if (idle_ < static_cast<int>(tasks_.size()) &&
      static_cast<int>(threads_.size()) < max_threads_ && !stopping_) {
    threads_.emplace_back([this] { Work(); });
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

int ConnectionThreads::busy() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(threads_.size()) - idle_;
}

}  // namespace rankd::server
