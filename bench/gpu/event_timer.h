// EventTimer: the GPU benchmarks' one way to time what the host enqueues on a
// stream. A pair of CUDA events is recorded before and after the work and the
// host waits for the second, so each figure is the GPU-side span of one call
// (including any gap while the host is still launching). Failures exit through
// CHECK_CUDA. Not thread-safe: one timer per thread.
#ifndef RANKD_BENCH_GPU_EVENT_TIMER_H_
#define RANKD_BENCH_GPU_EVENT_TIMER_H_

#include <cuda_runtime_api.h>

#include "bench/gpu/check_cuda.h"

namespace rankd::bench {

class EventTimer {
 public:
  EventTimer() {
    CHECK_CUDA(cudaEventCreate(&start_));
    CHECK_CUDA(cudaEventCreate(&stop_));
  }
  ~EventTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  // Milliseconds between the events recorded on `stream` before and after
  // launch() enqueues its work; returns once the second has completed.
  template <typename Launch>
  double Ms(cudaStream_t stream, Launch&& launch) {
    CHECK_CUDA(cudaEventRecord(start_, stream));
    launch();
    CHECK_CUDA(cudaEventRecord(stop_, stream));
    CHECK_CUDA(cudaEventSynchronize(stop_));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
    return ms;
  }

 private:
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

}  // namespace rankd::bench

#endif  // RANKD_BENCH_GPU_EVENT_TIMER_H_
