// CpuEngine: scores batches of requests for one model version with portable
// C++ (Eigen for matrix work, a thread pool across candidates). It is the
// project's reference: the CUDA backend is tested against it.
//
// Results are deterministic: a candidate's score depends only on its own
// inputs, not on the batch it was scored in, its position, or the number of
// threads (matrix work runs on row blocks padded to kernels::kRowQuantum).
//
// Ownership and threading: the engine shares the model (read-only) and owns a
// thread pool plus one scratch arena per pool thread. ScoreBatch may be called
// from several threads at once; each call blocks until its batch is done. A
// batch of a single task (up to one task's rows) runs on the calling thread
// with a scratch arena taken from a small free list (one per concurrent
// caller), so small batches wake no pool thread. With num_threads 1 there is
// no pool: every batch runs on the calling thread. The destructor waits for
// the pool's threads to finish their current tasks.
#ifndef RANKD_ENGINE_CPU_CPU_ENGINE_H_
#define RANKD_ENGINE_CPU_CPU_ENGINE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "engine/batch_rows.h"
#include "engine/batch_stats.h"
#include "engine/model/model.h"
#include "engine/request.h"

namespace rankd::engine {

class CpuEngine {
 public:
  struct Options {
    // Threads that split each batch; 0 = every CPU this process may use
    // (affinity and cgroup quota: kernels/cpu/host_resources.h).
    int num_threads = 0;
    // Upper bound on candidates one task computes; rounded up to a multiple of
    // kernels::kRowQuantum. Smaller tasks spread small batches over threads.
    int max_rows_per_task = 256;
    // Nice increment of the pool's threads (kernels/cpu/thread_priority.h):
    // 0 = the creating thread's priority. Serving raises it so that threads
    // answering requests run first on a saturated host. The thread that
    // calls ScoreBatch computes a share too, at its own priority.
    int thread_nice = 0;
  };

  static absl::StatusOr<std::unique_ptr<CpuEngine>> Create(
      std::shared_ptr<const Model> model, const Options& options);
  ~CpuEngine();

  // Scores requests[i] into scores[i] (requests[i]->num_candidates floats).
  // Requests must have passed ValidateRequest. `stats` may be null.
  absl::Status ScoreBatch(absl::Span<const Request* const> requests,
                          absl::Span<const absl::Span<float>> scores,
                          BatchStats* stats);

  // One request (validated here) -> its scores.
  absl::StatusOr<std::vector<float>> Score(const Request& request);

  const Model& model() const { return *model_; }
  int num_threads() const { return num_threads_; }

 private:
  struct Scratch;
  struct BatchPlan;
  struct Pool;  // wraps Eigen::ThreadPool (a typedef, so not forward-declarable)
  CpuEngine(std::shared_ptr<const Model> model, const Options& options);
  // The batch's shared state (rows, bag offsets, columns); pools every shared
  // (single) bag, adding its unresolved ids to *unresolved_shared (per table).
  absl::Status PlanBatch(absl::Span<const Request* const> requests,
                         absl::Span<const absl::Span<float>> scores, BatchPlan* plan,
                         std::vector<int64_t>* unresolved_shared) const;
  // Splits the batch into tasks and runs them (on the pool, or here for one
  // task); unresolved ids per task and table.
  std::vector<std::vector<int64_t>> RunTasks(const BatchPlan& plan);
  // Scores batch rows [row_begin, row_end) with one scratch arena: the four
  // steps below, in order.
  void RunTask(const BatchPlan& plan, int64_t row_begin, int64_t row_end,
               Scratch* scratch, std::vector<int64_t>* unresolved) const;
  void RunBottomMlp(const BatchPlan& plan, absl::Span<const RowSegment> segments, int64_t n,
                    int64_t rows, Scratch* s) const;
  void PoolFeatures(const BatchPlan& plan, absl::Span<const RowSegment> segments, float* feats,
                    std::vector<int64_t>* unresolved) const;
  const float* Interact(const BatchPlan& plan, int64_t rows, Scratch* s, int64_t* stride) const;
  void RunTopMlp(const BatchPlan& plan, absl::Span<const RowSegment> segments, int64_t rows,
                 const float* top_in, int64_t top_stride, Scratch* s) const;
  // Scratch for a batch run on the calling thread (not a pool thread).
  std::unique_ptr<Scratch> TakeCallerScratch();
  void ReturnCallerScratch(std::unique_ptr<Scratch> scratch);

  std::shared_ptr<const Model> model_;
  Options options_;
  int num_threads_ = 1;
  std::unique_ptr<Pool> pool_;  // null with one thread
  // One per pool thread, indexed by Eigen::ThreadPool::CurrentThreadId().
  std::vector<std::unique_ptr<Scratch>> scratch_;
  // Free scratch arenas of callers running single-task batches inline.
  absl::Mutex caller_scratch_mu_;
  std::vector<std::unique_ptr<Scratch>> caller_scratch_ ABSL_GUARDED_BY(caller_scratch_mu_);
};

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_CPU_CPU_ENGINE_H_
