// Host side of the fused tiny-DLRM kernel (kernels/cuda/tiny_dlrm.h) for whole
// engine models and requests: the kernel shape of a Model, its weights and
// tables on the device, and batches of engine Requests packed the way the
// kernel reads them (per-candidate bags; request-level bags expanded to every
// candidate). Used by bench/gpu/tiny_bench and tests/gpu; the CUDA engine's
// worker does the same packing in its own arena.
#ifndef RANKD_ENGINE_CUDA_TESTING_TINY_DLRM_HOST_H_
#define RANKD_ENGINE_CUDA_TESTING_TINY_DLRM_HOST_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/cuda/cuda_util.h"
#include "engine/model/model.h"
#include "engine/request.h"
#include "kernels/cuda/tiny_dlrm.h"

namespace rankd::engine::cuda::testing {

// The fused kernel's shape for `model`, or why it does not fit (not DOT,
// tables of different dims, over the kernel's limits, ...).
absl::StatusOr<kernels::cuda::TinyDlrmShape> TinyDlrmShapeOf(const Model& model);

// A model's packed MLP weights and its tables on the current device.
class TinyDlrmDeviceModel {
 public:
  static absl::StatusOr<std::unique_ptr<TinyDlrmDeviceModel>> Create(
      std::shared_ptr<const Model> model);

  const Model& model() const { return *model_; }
  const kernels::cuda::TinyDlrmShape& shape() const { return shape_; }
  const float* weights() const { return weights_.as<float>(); }
  // Table of feature f (device pointers inside).
  const kernels::cuda::DeviceTable& feature_table(int f) const { return feature_tables_[f]; }

 private:
  TinyDlrmDeviceModel() = default;
  std::shared_ptr<const Model> model_;
  kernels::cuda::TinyDlrmShape shape_;
  DeviceBuffer weights_;
  std::vector<DeviceBuffer> buffers_;
  std::vector<kernels::cuda::DeviceTable> feature_tables_;
};

// One batch (requests concatenated in order) on the device, with its own
// scores and unresolved-id counters. Inputs are copied once at creation.
class TinyDlrmDeviceBatch {
 public:
  static absl::StatusOr<std::unique_ptr<TinyDlrmDeviceBatch>> Create(
      const TinyDlrmDeviceModel& model, absl::Span<const Request* const> requests);

  int64_t rows() const { return args_.rows; }
  // Launch arguments (device pointers; scores and counters owned here).
  const kernels::cuda::TinyDlrmArgs& args() const { return args_; }

  // Poisons the scores (NaN bits) and zeroes the counters, asynchronously.
  absl::Status Reset(cudaStream_t stream);
  // LaunchTinyDlrm for this batch.
  absl::Status Launch(cudaStream_t stream) const;
  // Synchronizes `stream`, then copies the scores out.
  absl::StatusOr<std::vector<float>> Scores(cudaStream_t stream) const;
  // Synchronizes `stream`, then returns unresolved ids per table (summed over
  // the features of each table; an expanded shared bag counts per candidate).
  absl::StatusOr<std::vector<int64_t>> UnresolvedPerTable(cudaStream_t stream) const;

 private:
  TinyDlrmDeviceBatch() = default;
  const TinyDlrmDeviceModel* model_ = nullptr;
  kernels::cuda::TinyDlrmArgs args_;
  std::vector<DeviceBuffer> buffers_;
  DeviceBuffer scores_;
  DeviceBuffer unresolved_;
};

}  // namespace rankd::engine::cuda::testing

#endif  // RANKD_ENGINE_CUDA_TESTING_TINY_DLRM_HOST_H_
