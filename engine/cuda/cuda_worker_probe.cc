#include "engine/cuda/cuda_worker_probe.h"

#include "engine/cuda/cuda_util.h"

namespace rankd::engine::cuda {

cudaStream_t CudaWorkerProbe::stream() const { return w_->stream_; }

bool CudaWorkerProbe::uses_fused_tiny() const { return w_->fused_tiny_; }

int CudaWorkerProbe::graphs_captured() const { return static_cast<int>(w_->graphs_.size()); }

const CudaWorker::HostPathTimes& CudaWorkerProbe::last_host_path() const {
  return w_->host_path_;
}

absl::Status CudaWorkerProbe::ReplayLastForward() {
  const PackedLayout& layout = w_->layouts_[w_->cur_];
  if (w_->last_was_tiny_) return w_->ForwardTiny(layout);
  // The whole forward in one launch (its graph is captured here when the
  // batch ran dense rows first, in two parts).
  return w_->LaunchForward(layout, CudaWorker::ForwardPart::kWhole);
}

absl::StatusOr<std::vector<double>> CudaWorkerProbe::ProfileLastForward() {
  if (w_->last_was_tiny_) return std::vector<double>{};
  std::vector<cudaEvent_t> events;
  cudaEvent_t start;
  RANKD_RETURN_IF_CUDA_ERROR(cudaEventCreate(&start), "cudaEventCreate");
  RANKD_RETURN_IF_CUDA_ERROR(cudaEventRecord(start, w_->stream_), "cudaEventRecord");
  events.push_back(start);
  w_->stage_events_ = &events;
  absl::Status s = w_->Forward(w_->layouts_[w_->cur_]);
  w_->stage_events_ = nullptr;
  cudaEvent_t end;
  RANKD_RETURN_IF_CUDA_ERROR(cudaEventCreate(&end), "cudaEventCreate");
  RANKD_RETURN_IF_CUDA_ERROR(cudaEventRecord(end, w_->stream_), "cudaEventRecord");
  events.push_back(end);
  RANKD_RETURN_IF_CUDA_ERROR(cudaEventSynchronize(end), "cudaEventSynchronize");
  std::vector<double> us;
  for (size_t i = 1; i < events.size(); ++i) {
    float ms = 0;
    cudaEventElapsedTime(&ms, events[i - 1], events[i]);
    us.push_back(ms * 1000.0);
  }
  for (cudaEvent_t e : events) cudaEventDestroy(e);
  if (!s.ok()) return s;
  return us;
}

}  // namespace rankd::engine::cuda
