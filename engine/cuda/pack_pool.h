// PackPool: long-lived threads that split a CUDA batch's host packing
// (batch_packer.h: the offsets per feature, each feature's bags and ids, the
// dense rows) so a large batch reaches the GPU sooner. Plain C++ (no CUDA).
//
// One pool serves every CUDA worker of a model version, on every GPU
// (CreateCudaWorkers makes it; its threads sleep while idle); the calling
// worker thread takes tasks too, so a pool of N threads packs with up
// to N + 1. Run returns when every task is done, without waiting for pool
// threads that woke too late to take one (a sleeping thread's wake-up can
// take tens of microseconds). Pool threads spin briefly after their last
// task (Eigen's bounded spin), so back-to-back batches find them awake, then
// sleep; workers pack small batches on their own thread, where a wake-up
// would cost about what it saves (CudaWorker::Options::parallel_pack_min_rows).
//
// Threading: Run may be called from several threads at once; their tasks
// share the pool's threads.
#ifndef RANKD_ENGINE_CUDA_PACK_POOL_H_
#define RANKD_ENGINE_CUDA_PACK_POOL_H_

#include <cstdint>
#include <functional>
#include <memory>


namespace rankd::engine::cuda {

class PackPool {
 public:
  // `threads` pool threads (>= 1), named "rankd-pack".
  explicit PackPool(int threads);
  ~PackPool();
  PackPool(const PackPool&) = delete;
  PackPool& operator=(const PackPool&) = delete;

  int threads() const { return threads_; }

  // Runs task(i) for every i in [0, n) on the pool's threads and the caller;
  // returns when all have returned. Tasks are handed out in increasing order.
  void Run(int64_t n, const std::function<void(int64_t)>& task);

  // Run as a callable: the packer's ParallelFor (batch_packer.h; the same
  // type, spelled out so this library needs no engine types). Valid while
  // the pool lives.
  std::function<void(int64_t, const std::function<void(int64_t)>&)> AsParallelFor();

  // The default size: half of the CPUs this process may use, at most 8
  // (0 on a machine of 1 CPU: no pool).
  static int DefaultThreads();

 private:
  struct Impl;
  const int threads_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rankd::engine::cuda

#endif  // RANKD_ENGINE_CUDA_PACK_POOL_H_
