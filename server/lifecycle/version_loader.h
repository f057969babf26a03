// Loading one model version into something that serves: the ModelManager's
// only way to make a ModelInstance, so its tests can use a fake loader and
// the server the real engine.
#ifndef RANKD_SERVER_LIFECYCLE_VERSION_LOADER_H_
#define RANKD_SERVER_LIFECYCLE_VERSION_LOADER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/gpu/gpu_backend.h"
#include "engine/serving/model_instance.h"
#include "engine/serving/observer.h"
#include "engine/updates/live_tables.h"

namespace rankd::server {

// A version loaded, placed and warmed up: ready to take traffic.
struct LoadedVersion {
  std::unique_ptr<engine::ModelInstance> instance;
  // The instance's update side (null: its tables cannot change).
  std::shared_ptr<engine::LiveTables> live_tables;
  double load_seconds = 0;    // files read, tables placed, workers made
  double warmup_seconds = 0;  // warm-up requests (every CUDA graph captured)
  int64_t device_bytes = 0;   // HBM of the placement plan, per GPU (CUDA)
  int64_t host_bytes = 0;     // host memory of its tables and dense weights
};

class VersionLoader {
 public:
  virtual ~VersionLoader() = default;
  // Loads `<directory>` as version `version` of model `name`. Errors name the
  // directory or file and the reason. Called from one thread at a time.
  // `while_serving`: other versions are serving now, so the load should leave
  // them CPU time (fewer loader threads).
  virtual absl::StatusOr<LoadedVersion> Load(const std::string& name, int64_t version,
                                             const std::string& directory,
                                             bool while_serving) = 0;
};

// The real loader: engine::LoadModel, CPU or CUDA workers, a ModelInstance,
// warm-up.
//
// Borrows the observer (outlives the loader and every instance it made).
class EngineVersionLoader final : public VersionLoader {
 public:
  struct Options {
    // CPU workers per model version; 0 = the model's instances setting, and
    // when that is 0 too, automatic (one per 4 cores, at least 1).
    int workers_per_model = 0;
    // Threads each CPU worker splits a batch over; 0 = the model's setting,
    // else cores / workers.
    int cpu_threads_per_worker = 0;
    // Candidate counts of the warm-up requests sent through the instance
    // before a version is ready. The CUDA backend also runs every worker
    // directly at each graph bucket (1, 2, 4, ... up to the model's
    // max_batch_candidates), one-hot and multi-hot, as if the GPU were idle
    // and as if it were busy (engine::WarmUpWorkers, CudaWorker::WarmUp), so
    // every CUDA graph is captured first.
    std::vector<int32_t> warmup_candidates = {1, 64};
    // "cpu" or "cuda" (resolved; no "auto" here).
    std::string backend = "cpu";
    // CUDA backend: workers per GPU and the worker options (math mode,
    // graphs, budget, ...).
    engine::gpu::Options gpu;
    // ModelInstance::Options::completion_threads.
    int completion_threads = 0;
    // CPU backend: nice increment of the compute threads (each worker's
    // thread and its engine's pool; kernels/cpu/thread_priority.h), so the
    // threads that receive, refuse and answer requests run first on a
    // saturated host. 0 = same priority as the server. Not applied to CUDA
    // workers, whose host work feeds the GPU.
    int cpu_compute_nice = 0;
    // engine::LiveTables::Options::idle_priority_staging: embedding update
    // messages are validated and staged on a helper thread at the SCHED_IDLE
    // policy.
    bool idle_priority_update_staging = true;
    // ModelInstance::Options::complete_inline_when_idle.
    bool complete_inline_when_idle = true;
    // DynamicBatcher::Options::idle_spin_us of every model version.
    int64_t worker_spin_us = 0;
    // Threads that read and fill tables while other versions serve (a swap);
    // 0 = a quarter of the cores, at least 1. A load with nothing serving
    // (start) uses every core.
    int background_load_threads = 0;
    // Borrowed; null = loads cannot be cancelled. Once it reads true, a load
    // in progress stops at its next check (engine::LoadOptions::cancel) and
    // fails with CANCELLED; so do later ones. `rankd serve` sets it on
    // SIGTERM / SIGINT.
    const std::atomic<bool>* cancel = nullptr;
  };

  // `on_model_loaded` runs once the model's files are read, before its
  // workers exist and before any warm-up request (the metrics register the
  // model's series there).
  EngineVersionLoader(const Options& options, engine::ServingObserver* observer,
                      std::function<void(const engine::Model&)> on_model_loaded)
      : options_(options), observer_(observer), on_model_loaded_(std::move(on_model_loaded)) {}

  absl::StatusOr<LoadedVersion> Load(const std::string& name, int64_t version,
                                     const std::string& directory, bool while_serving) override;

 private:
  absl::StatusOr<std::vector<std::unique_ptr<engine::Worker>>> MakeWorkers(
      const std::shared_ptr<const engine::Model>& model, const std::string& directory,
      int64_t* device_bytes, std::vector<std::shared_ptr<engine::TableStore>>* stores);
  // The version's update side over the stores its workers read.
  absl::StatusOr<std::shared_ptr<engine::LiveTables>> MakeLiveTables(
      const std::shared_ptr<const engine::Model>& model,
      std::vector<std::shared_ptr<engine::TableStore>> stores, const std::string& directory);

  const Options options_;
  engine::ServingObserver* const observer_;
  const std::function<void(const engine::Model&)> on_model_loaded_;
};

}  // namespace rankd::server

#endif  // RANKD_SERVER_LIFECYCLE_VERSION_LOADER_H_
