// A grace-period gate between the GPU workers that read an embedding cache
// (readers) and the maintenance thread that changes it (the writer), so that
// a cache slot is never rewritten while a batch that may read it is running,
// and no batch ever waits for maintenance.
//
// A reader calls Enter before it launches a batch's GPU work and Exit once
// that work has completed (it synchronizes on its stream anyway). The
// writer, after its own GPU writes are complete (e.g. after clearing the slot
// map entries of rows it evicts), calls WaitForReaders: it returns once every
// batch that was in flight at the call has finished. Batches entered after
// the call launch their kernels after the writer's change, so they see it.
//
// Threading: Enter/Exit are lock-free (one atomic each) and each reader slot
// is used by one thread; AddReader and WaitForReaders may run on any thread.
#ifndef RANKD_ENGINE_CUDA_READER_GATE_H_
#define RANKD_ENGINE_CUDA_READER_GATE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace rankd::engine::cuda {

class ReaderGate {
 public:
  // Up to `max_readers` readers (workers of one GPU).
  explicit ReaderGate(int max_readers = 256) : seq_(max_readers) {}

  // A reader slot id, or -1 when all are taken.
  int AddReader() {
    absl::MutexLock lock(&mu_);
    if (readers_ >= static_cast<int>(seq_.size())) return -1;
    return readers_++;
  }

  // Sequence numbers: odd while the reader is inside a batch.
  void Enter(int reader) { seq_[reader].fetch_add(1, std::memory_order_seq_cst); }
  void Exit(int reader) { seq_[reader].fetch_add(1, std::memory_order_release); }

  void WaitForReaders() {
    int n;
    {
      absl::MutexLock lock(&mu_);
      n = readers_;
    }
    std::atomic_thread_fence(std::memory_order_seq_cst);
    std::vector<uint64_t> snapshot(n);
    for (int i = 0; i < n; ++i) snapshot[i] = seq_[i].load(std::memory_order_acquire);
    for (int i = 0; i < n; ++i) {
      if ((snapshot[i] & 1) == 0) continue;  // not inside a batch
      while (seq_[i].load(std::memory_order_acquire) == snapshot[i]) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }

 private:
  absl::Mutex mu_;
  int readers_ = 0;
  std::vector<std::atomic<uint64_t>> seq_;
};

}  // namespace rankd::engine::cuda

#endif  // RANKD_ENGINE_CUDA_READER_GATE_H_
