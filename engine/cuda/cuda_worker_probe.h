// CudaWorkerProbe: what benchmarks and profiles read from a CudaWorker beyond
// the Worker interface: its stream, a replay of the last slice's forward, the
// device time of each forward stage, and where Execute's host time went.
// Serving never uses it; it lives outside CudaWorker so the production class
// carries no benchmark entry points (only a friend declaration and the
// host-path timers Execute keeps anyway).
//
// Ownership and threading: borrows the worker (which must outlive the probe)
// and is used on the thread that calls the worker's Execute, between calls.
#ifndef RANKD_ENGINE_CUDA_CUDA_WORKER_PROBE_H_
#define RANKD_ENGINE_CUDA_CUDA_WORKER_PROBE_H_

#include <cuda_runtime_api.h>

#include <vector>

#include "absl/status/statusor.h"
#include "engine/cuda/cuda_worker.h"

namespace rankd::engine::cuda {

class CudaWorkerProbe {
 public:
  explicit CudaWorkerProbe(CudaWorker* worker) : w_(worker) {}

  // The worker's stream (events recorded on it time its work).
  cudaStream_t stream() const;
  // Whether the last slice ran the fused tiny kernel.
  bool uses_fused_tiny() const;
  // Runs the forward of the slice already in the device arena (as last
  // packed) once more on the stream, without copies or sync: the whole
  // forward's graph (captured by the first call when the batch ran in two
  // parts, Options::dense_first_min_rows), or a direct run without graphs.
  absl::Status ReplayLastForward();
  // Runs the last slice's forward directly (no graph) with an event after
  // each stage and returns the stages' device times in us: {bottom MLP,
  // embedding lookup, interaction, top MLP}; empty for the fused tiny path.
  absl::StatusOr<std::vector<double>> ProfileLastForward();
  // CUDA graphs captured so far (one per bucket and forward part).
  int graphs_captured() const;
  // Where the host's time went in the last Execute.
  const CudaWorker::HostPathTimes& last_host_path() const;

 private:
  CudaWorker* w_;
};

}  // namespace rankd::engine::cuda

#endif  // RANKD_ENGINE_CUDA_CUDA_WORKER_PROBE_H_
