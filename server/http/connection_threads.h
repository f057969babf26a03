// The threads that serve the HTTP listener's connections (cpp-httplib's
// TaskQueue: the listener hands each accepted connection over as one task,
// which reads and answers its requests until the connection closes).
//
// cpp-httplib's own pool has a fixed number of threads, and a connection
// holds its thread for as long as it is open: a few idle or slow clients
// can take them all, and every other connection then waits in the queue
// (the hole /metrics had). Here a connection gets an idle thread, or a new
// one while fewer than `max_threads` exist, so connections are served at
// once up to that many open at a time; only past it do new ones wait for a
// thread. Idle, half-open and trickling connections are bounded in time by
// the server's keep-alive and read timeouts (server/http/http_server.h).
//
// Threads are started on demand and kept (idle ones wait on a condition
// variable) until Shutdown, which runs the tasks already queued and joins
// every thread. Thread-safe.
//
// Where the process may start no more threads (its own or its cgroup's task
// limit, or no memory for a stack: std::thread throws std::system_error),
// the connection waits in the queue for a busy thread, as past
// `max_threads`, instead of the exception ending the process; the next
// connection tries to start a thread again. The first failure is logged,
// and start_failures() counts them all.
#ifndef RANKD_SERVER_HTTP_CONNECTION_THREADS_H_
#define RANKD_SERVER_HTTP_CONNECTION_THREADS_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "httplib.h"

namespace rankd::server {

class ConnectionThreads final : public httplib::TaskQueue {
 public:
  // Starts a thread running its argument; std::thread's constructor by
  // default (tests pass one that fails).
  using ThreadStarter = std::function<std::thread(std::function<void()>)>;

  // `max_threads` >= 1 (checked by the HTTP server's options).
  explicit ConnectionThreads(int max_threads, ThreadStarter start_thread = StartStdThread);
  ~ConnectionThreads() override;  // Shutdown()

  // Runs `fn` on an idle thread, or on a new one while fewer than
  // max_threads exist; else queues it for the next thread to be free.
  void enqueue(std::function<void()> fn) override;
  // Runs what is queued, then joins every thread. Idempotent.
  void shutdown() override;

  int threads() const;             // started so far
  int busy() const;                // running a task now
  int64_t start_failures() const;  // threads that could not be started

 private:
  static std::thread StartStdThread(std::function<void()> fn);
  void Work();
  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int max_threads_;
  const ThreadStarter start_thread_;
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  int idle_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t start_failures_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace rankd::server

#endif  // RANKD_SERVER_HTTP_CONNECTION_THREADS_H_
