// ModelRegistry: every model version under --model_root, loaded, warmed up and
// served through one engine::ModelInstance each.
//
// Ownership: owns the instances (and through them models, batchers, workers).
// Borrows the observer, which must outlive the registry.
// Threading: Find and the accessors are thread-safe once Create returned (the
// set of versions is fixed after loading). Shutdown drains every instance.
#ifndef RANKD_SERVER_MODEL_REGISTRY_H_
#define RANKD_SERVER_MODEL_REGISTRY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/cuda/cuda_worker.h"
#include "engine/serving/model_instance.h"
#include "engine/serving/observer.h"

namespace rankd::server {

class ModelRegistry {
 public:
  struct Options {
    std::string model_root;
    // CPU workers per model version; 0 = the model's instances setting, and
    // when that is 0 too, automatic (one per 4 cores, at least 1).
    int workers_per_model = 0;
    // Threads each CPU worker splits a batch over; 0 = the model's setting,
    // else cores / workers.
    int cpu_threads_per_worker = 0;
    // Candidate counts of the warm-up requests sent before a version is ready.
    std::vector<int32_t> warmup_candidates = {1, 64};
    // "cpu" or "cuda" (resolved; no "auto" here).
    std::string backend = "cpu";
    // CUDA backend: workers per GPU (0 = the model's instances setting, else 2)
    // and the worker options (math mode, rows per slice, graphs).
    int gpu_workers_per_device = 0;
    engine::cuda::CudaWorker::Options cuda;
    // Threads per model version that answer computed requests
    // (ModelInstance::Options::completion_threads); 0 = each worker answers
    // its own batch.
    int completion_threads = 0;
    // ModelInstance::Options::complete_inline_when_idle.
    bool complete_inline_when_idle = true;
    // DynamicBatcher::Options::idle_spin_us of every model version.
    int64_t worker_spin_us = 0;
  };

  // Loads every `<root>/<name>/<version>/` (ListModelVersions). Any model that
  // fails to load or warm up fails the whole start, with its directory in the
  // message: a server never silently serves fewer models than it was given.
  // `on_version_ready` runs after each version is warm.
  static absl::StatusOr<std::unique_ptr<ModelRegistry>> Create(
      const Options& options, engine::ServingObserver* observer,
      const std::function<void(const engine::Model&)>& on_loaded,
      const std::function<void(const engine::Model&)>& on_version_ready);

  ~ModelRegistry();

  // version 0 = the newest version. NOT_FOUND naming what is served instead.
  absl::StatusOr<engine::ModelInstance*> Find(const std::string& name, int64_t version) const;

  std::vector<std::string> ModelNames() const;
  // Ascending.
  std::vector<int64_t> Versions(const std::string& name) const;

  // Drains and stops every instance (idempotent).
  void Shutdown();

 private:
  ModelRegistry() = default;
  // name -> version -> instance
  std::map<std::string, std::map<int64_t, std::unique_ptr<engine::ModelInstance>>> models_;
};

}  // namespace rankd::server

#endif  // RANKD_SERVER_MODEL_REGISTRY_H_
