// The GPU backend of the default build: engine/cuda's workers and stores.
#include <algorithm>
#include <utility>

#include "engine/cuda/cuda_table_store.h"
#include "engine/cuda/cuda_worker.h"
#include "engine/gpu/gpu_backend.h"
#include "spdlog/spdlog.h"

namespace rankd::engine::gpu {
namespace {

cuda::CudaWorker::CrossMath ToCuda(CrossMath m) {
  using CM = cuda::CudaWorker::CrossMath;
  switch (m) {
    case CrossMath::kAuto: return CM::kAuto;
    case CrossMath::kFp32: return CM::kFp32;
    case CrossMath::kTf32x3: return CM::kTf32x3;
    case CrossMath::kBf16x3: return CM::kBf16x3;
    case CrossMath::kTf32: return CM::kTf32;
  }
  return CM::kAuto;
}

cuda::CudaWorker::Options WorkerOptions(const Model& model, const Options& options) {
  cuda::CudaWorker::Options o;
  o.math = options.math == Math::kTf32 ? kernels::cuda::MathMode::kTf32
                                       : kernels::cuda::MathMode::kFp32;
  o.cross_math = ToCuda(options.cross_math);
  o.use_graphs = options.use_graphs;
  o.host_staging_bytes = options.host_staging_bytes;
  o.shared_host_cache = options.shared_host_cache;
  o.pack_threads = options.pack_threads;
  o.budget = options.budget;
  // Slices as big as the model's batches, so a batch runs in one go.
  o.max_rows = std::max(o.max_rows,
                        static_cast<int>(model.config.batching().max_batch_candidates()));
  return o;
}

void LogSetup(const Model& m, const cuda::CudaSetupReport& report) {
  if (report.plan != nullptr && report.plan->any_host()) {
    spdlog::info("model {} version {} placement (tables beyond the device-memory budget in "
                 "pinned host memory behind an HBM cache):\n{}",
                 m.name, m.version, report.plan->Describe());
  }
  if (report.hash_build_keys > 0) {
    spdlog::info("model {} version {}: dynamic tables built on the GPU: {:.1f} M keys in "
                 "{:.3f} s ({:.2f} G keys/s, keys copy included; insert kernels {:.3f} s, "
                 "{:.2f} G keys/s; keys copied from {} memory)",
                 m.name, m.version, report.hash_build_keys / 1e6, report.hash_build_seconds,
                 report.hash_build_keys / std::max(report.hash_build_seconds, 1e-9) / 1e9,
                 report.hash_insert_seconds,
                 report.hash_build_keys / std::max(report.hash_insert_seconds, 1e-9) / 1e9,
                 report.hash_keys_pinned ? "page-locked" : "pageable");
  }
}

}  // namespace

bool BuiltWithCuda() { return true; }

int UsableGpus(std::string* why_none) { return cuda::UsableCudaDevices(why_none); }

int64_t SmallestGpuMemoryBytes() { return cuda::SmallestGpuMemoryBytes(); }

std::string BuiltGpuArchs() { return cuda::BuiltCudaArchs(); }

absl::StatusOr<Version> CreateVersion(std::shared_ptr<const Model> model, const Options& options) {
  const int per_gpu = options.workers_per_device > 0
                          ? options.workers_per_device
                          : model->config.instances().workers_per_device();
  cuda::CudaSetupReport report;
  absl::StatusOr<std::vector<std::unique_ptr<Worker>>> workers = cuda::CreateCudaWorkers(
      model, WorkerOptions(*model, options), per_gpu, {}, &report);
  if (!workers.ok()) return workers.status();
  LogSetup(*model, report);
  Version out;
  out.workers = *std::move(workers);
  if (report.plan != nullptr) out.device_bytes = report.plan->device_bytes();
  out.store = std::make_shared<cuda::CudaTableStore>(std::move(report.device_models));
  return out;
}

}  // namespace rankd::engine::gpu
