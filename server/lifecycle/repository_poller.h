// RepositoryPoller: calls ModelManager::Poll every period, and at once when
// kicked (SIGHUP), on a thread of its own, until stopped.
//
// Ownership: borrows the manager (outlives the poller). Threading: Kick and
// Stop may be called from any thread; the destructor stops and joins.
#ifndef RANKD_SERVER_LIFECYCLE_REPOSITORY_POLLER_H_
#define RANKD_SERVER_LIFECYCLE_REPOSITORY_POLLER_H_

#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/lifecycle/model_manager.h"

namespace rankd::server {

class RepositoryPoller {
 public:
  // Starts the thread; the first poll is one `period` from now.
  RepositoryPoller(ModelManager* manager, absl::Duration period);
  ~RepositoryPoller();

  // Polls as soon as the current poll (if any) ends.
  void Kick();
  // Stops and joins (waits for a poll in progress, loads included).
  void Stop();

 private:
  void Run();
  bool Woken() const ABSL_SHARED_LOCKS_REQUIRED(mu_) { return kicked_ || stop_; }

  ModelManager* const manager_;
  const absl::Duration period_;
  mutable absl::Mutex mu_;
  bool kicked_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace rankd::server

#endif  // RANKD_SERVER_LIFECYCLE_REPOSITORY_POLLER_H_
