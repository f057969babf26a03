#include "server/lifecycle/repository_poller.h"

namespace rankd::server {

RepositoryPoller::RepositoryPoller(ModelManager* manager, absl::Duration period)
    : manager_(manager), period_(period), thread_([this] { Run(); }) {}

RepositoryPoller::~RepositoryPoller() { Stop(); }

void RepositoryPoller::Kick() {
  absl::MutexLock lock(&mu_);
  kicked_ = true;
}

void RepositoryPoller::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void RepositoryPoller::Run() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(this, &RepositoryPoller::Woken), period_);
      if (stop_) return;
      kicked_ = false;
    }
    (void)manager_->Poll();  // logs its own errors; serving versions keep serving
  }
}

}  // namespace rankd::server
