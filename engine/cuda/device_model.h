// A model's weights on one GPU: tables (rows, hash arrays, default vectors),
// MLP and cross weights, and the kernels' table descriptors. Built once per
// GPU and shared read-only by that GPU's workers.
//
// Placement: every table lives in device memory for now (HOST placement comes
// with the UVM issue). A model whose weights do not fit in the GPU's free
// memory (minus `reserve_bytes` for the workers' buffers) is refused before
// anything is allocated, with the numbers.
#ifndef RANKD_ENGINE_CUDA_DEVICE_MODEL_H_
#define RANKD_ENGINE_CUDA_DEVICE_MODEL_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/cuda/cuda_util.h"
#include "engine/model/model.h"
#include "kernels/cuda/cublaslt.h"
#include "kernels/cuda/embedding_lookup.h"

namespace rankd::engine::cuda {

class DeviceModel {
 public:
  struct Options {
    int device = 0;
    // Device memory kept free for workers (activations, arenas, cuBLASLt
    // workspaces, CUDA graphs).
    int64_t reserve_bytes = int64_t{2} << 30;
    // Pad the K (input width) of the first bottom and first top layer to a
    // multiple of 4 with zero weights, so their inputs' rows are 16-byte
    // aligned: cuBLASLt picks far slower kernels for K = 13 or 367. Workers
    // then write inputs with dense_ld() / top_in_ld() and zero pad columns.
    bool pad_inputs = true;
  };

  static absl::StatusOr<std::shared_ptr<const DeviceModel>> Create(
      std::shared_ptr<const Model> model, const Options& options);

  // Bytes the weights need on the device (what Create checks).
  static int64_t RequiredBytes(const Model& model);

  // RESOURCE_EXHAUSTED, with the numbers, when `model` does not fit in
  // `free_bytes` minus `reserve_bytes` of GPU `device`; OK otherwise. Create
  // calls it with cudaMemGetInfo's numbers before allocating anything.
  static absl::Status CheckFits(const Model& model, int device, int64_t free_bytes,
                                int64_t total_bytes, int64_t reserve_bytes);

  const Model& model() const { return *model_; }
  int device() const { return device_; }
  const kernels::cuda::DeviceTable* device_tables() const {
    return tables_.as<kernels::cuda::DeviceTable>();
  }
  const std::vector<kernels::cuda::DeviceLinear>& bottom() const { return bottom_; }
  const std::vector<kernels::cuda::DeviceLinear>& top() const { return top_; }
  struct DeviceCross {
    kernels::cuda::DeviceLinear v;  // x [rows, n] -> [rows, rank], no bias
    kernels::cuda::DeviceLinear w;  // [rows, rank] -> [rows, n], bias b
  };
  const std::vector<DeviceCross>& cross() const { return cross_; }
  // Host copies of the descriptors (device pointers inside).
  const std::vector<kernels::cuda::DeviceTable>& host_tables() const { return host_tables_; }
  // Floats per dense input row, and per top-MLP input row (DOT output, or
  // the CAT interaction input); DCN_V2's top input is the cross output, n wide.
  int dense_ld() const { return dense_ld_; }
  int top_in_ld() const { return top_in_ld_; }

 private:
  DeviceModel() = default;
  std::shared_ptr<const Model> model_;
  int device_ = 0;
  std::vector<DeviceBuffer> buffers_;  // everything allocated for this model
  DeviceBuffer tables_;                // DeviceTable[num_tables]
  std::vector<kernels::cuda::DeviceTable> host_tables_;
  std::vector<kernels::cuda::DeviceLinear> bottom_, top_;
  std::vector<DeviceCross> cross_;
  int dense_ld_ = 0;
  int top_in_ld_ = 0;
};

}  // namespace rankd::engine::cuda

#endif  // RANKD_ENGINE_CUDA_DEVICE_MODEL_H_
