// CompletionExecutor: a few threads that run the completion work of finished
// batches (every request's `done`: metrics, then the server's gRPC Finish),
// so a worker thread hands a computed batch over and goes straight back to
// NextBatch -> Execute instead of answering each request itself (issue 6:
// with 1-candidate requests the answers, not the compute, filled the worker
// thread).
//
// Ordering: tasks start in the order Run was called; with one thread they
// also finish in that order. With more threads, tasks run concurrently and no
// order between them is promised (ModelInstance gives each task a contiguous
// FIFO slice of one batch, run in order within the task).
//
// Ownership and threading: Run and Shutdown may be called from any thread.
// The executor owns queued tasks until it runs them; every task passed to Run
// runs exactly once: on an executor thread, or on the calling thread when Run
// is called after Shutdown began (nothing is ever dropped). Shutdown (and so
// the destructor) runs every queued task, then joins the threads; it must not
// be called from a task (it would wait for itself).
#ifndef RANKD_ENGINE_SERVING_COMPLETION_EXECUTOR_H_
#define RANKD_ENGINE_SERVING_COMPLETION_EXECUTOR_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace rankd::engine {

class CompletionExecutor {
 public:
  struct Options {
    // Threads running tasks; >= 1.
    int num_threads = 1;
    // Thread name (pthread_setname_np: at most 15 characters), so per-thread
    // CPU in top -H / perf tells completion time from compute and gRPC time.
    std::string thread_name = "rankd-complete";
  };
  using Task = absl::AnyInvocable<void() &&>;

  // INVALID_ARGUMENT naming the field for bad options.
  static absl::StatusOr<std::unique_ptr<CompletionExecutor>> Create(
      const Options& options);

  // Shutdown().
  ~CompletionExecutor();
  CompletionExecutor(const CompletionExecutor&) = delete;
  CompletionExecutor& operator=(const CompletionExecutor&) = delete;

  // Queues `task` (non-null) for an executor thread; after Shutdown began,
  // runs it on the calling thread before returning.
  void Run(Task task);

  // Runs every queued task, then joins the threads. Idempotent; concurrent
  // callers all return after the threads are joined.
  void Shutdown();

  int num_threads() const { return num_threads_; }
  // Tasks run so far (by executor threads and inline after Shutdown).
  int64_t tasks_run() const;

 private:
  explicit CompletionExecutor(const Options& options);
  void Loop();

  const int num_threads_;
  const std::string thread_name_;

  mutable absl::Mutex mu_;
  // Signalled when a task arrives while a thread waits, and on Shutdown.
  absl::CondVar cv_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int idle_threads_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t tasks_run_ ABSL_GUARDED_BY(mu_) = 0;

  // Serializes Shutdown callers; executor threads never take it.
  absl::Mutex shutdown_mu_;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(shutdown_mu_);
};

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_SERVING_COMPLETION_EXECUTOR_H_
