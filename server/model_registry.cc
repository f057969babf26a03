#include "server/model_registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/model/model_loader.h"
#include "engine/serving/cpu_worker.h"
#include "engine/serving/warmup.h"
#include "spdlog/spdlog.h"

namespace rankd::server {

absl::StatusOr<std::unique_ptr<ModelRegistry>> ModelRegistry::Create(
    const Options& options, engine::ServingObserver* observer,
    const std::function<void(const engine::Model&)>& on_loaded,
    const std::function<void(const engine::Model&)>& on_version_ready) {
  if (options.model_root.empty()) {
    return absl::InvalidArgumentError("--model_root: required (a directory of <name>/<version>/)");
  }
  auto versions = engine::ListModelVersions(options.model_root);
  if (!versions.ok()) {
    return absl::Status(versions.status().code(),
                        absl::StrCat("--model_root: ", versions.status().message()));
  }
  if (versions->empty()) {
    return absl::NotFoundError(absl::StrCat(
        "--model_root: no model versions under ", options.model_root,
        " (expected <name>/<version>/model.pbtxt; make one with `rankd gen-model`)"));
  }
  std::unique_ptr<ModelRegistry> registry(new ModelRegistry());
  for (const engine::ModelVersionPath& v : *versions) {
    const absl::Time start = absl::Now();
    engine::LoadOptions load;
    // Big tables print progress while they are generated or hashed, and
    // each big model one line of load bandwidth per source.
    load.log = [](const std::string& line) { spdlog::info("{}", line); };
    // The CUDA backend builds its dynamic tables' hash arrays on the GPU from
    // the keys (~1 G keys/s); only the CPU engine needs host hash tables.
    load.build_hash_tables = options.backend != "cuda";
    auto model = engine::LoadModel(v.directory, v.version, v.name, load);
    if (!model.ok()) return model.status();
    on_loaded(**model);
    const auto& instances = (*model)->config.instances();
    const int workers = options.workers_per_model > 0 ? options.workers_per_model
                                                      : instances.workers_per_device();
    const int threads = options.cpu_threads_per_worker > 0 ? options.cpu_threads_per_worker
                                                           : instances.cpu_threads_per_worker();
    absl::StatusOr<std::vector<std::unique_ptr<engine::Worker>>> cpu_workers;
    if (options.backend == "cuda") {
      engine::cuda::CudaWorker::Options cuda = options.cuda;
      // Slices as big as the model's batches, so a batch runs in one go.
      cuda.max_rows = std::max(cuda.max_rows,
                               static_cast<int>((*model)->config.batching().max_batch_candidates()));
      const int per_gpu = options.gpu_workers_per_device > 0 ? options.gpu_workers_per_device
                                                             : instances.workers_per_device();
      engine::cuda::CudaSetupReport report;
      cpu_workers = engine::cuda::CreateCudaWorkers(*model, cuda, per_gpu, {}, &report);
      if (cpu_workers.ok() && report.plan != nullptr && report.plan->any_host()) {
        spdlog::info("model {} version {} placement (tables beyond the device-memory budget in "
                     "pinned host memory behind an HBM cache):\n{}",
                     v.name, v.version, report.plan->Describe());
      }
      if (cpu_workers.ok() && report.hash_build_keys > 0) {
        spdlog::info("model {} version {}: dynamic tables built on the GPU: {:.1f} M keys in "
                     "{:.3f} s ({:.2f} G keys/s, keys copy included; insert kernels {:.3f} s, "
                     "{:.2f} G keys/s; keys copied from {} memory)",
                     v.name, v.version, report.hash_build_keys / 1e6, report.hash_build_seconds,
                     report.hash_build_keys / std::max(report.hash_build_seconds, 1e-9) / 1e9,
                     report.hash_insert_seconds,
                     report.hash_build_keys / std::max(report.hash_insert_seconds, 1e-9) / 1e9,
                     report.hash_keys_pinned ? "page-locked" : "pageable");
      }
    } else {
      cpu_workers = engine::CreateCpuWorkers(*model, workers, threads);
    }
    if (!cpu_workers.ok()) {
      return absl::Status(cpu_workers.status().code(),
                          absl::StrCat(v.directory, ": ", cpu_workers.status().message()));
    }
    const int num_workers = static_cast<int>(cpu_workers->size());
    engine::ModelInstance::Options instance_options =
        engine::ModelInstance::OptionsFromConfig((*model)->config);
    instance_options.completion_threads = options.completion_threads;
    instance_options.complete_inline_when_idle = options.complete_inline_when_idle;
    instance_options.batching.idle_spin_us = options.worker_spin_us;
    auto instance = engine::ModelInstance::Create(*model, instance_options,
                                                  std::move(*cpu_workers), observer);
    if (!instance.ok()) {
      return absl::Status(instance.status().code(),
                          absl::StrCat(v.directory, ": ", instance.status().message()));
    }
    absl::Status warm = engine::WarmUp(**instance, options.warmup_candidates);
    if (!warm.ok()) return warm;
    spdlog::info("model {} version {} ready: {} tables, {} {} workers, {} completion threads, "
                 "loaded and warmed up in {:.3f} s ({})",
                 v.name, v.version, (*model)->tables.size(), num_workers, options.backend,
                 options.completion_threads,
                 absl::ToDoubleSeconds(absl::Now() - start), v.directory);
    on_version_ready(**model);
    registry->models_[v.name][v.version] = std::move(*instance);
  }
  return registry;
}

ModelRegistry::~ModelRegistry() { Shutdown(); }

absl::StatusOr<engine::ModelInstance*> ModelRegistry::Find(const std::string& name,
                                                           int64_t version) const {
  auto it = models_.find(name);
  if (it == models_.end()) {
    return absl::NotFoundError(absl::StrCat("model: \"", name, "\" is not served; served models: ",
                                            absl::StrJoin(ModelNames(), ", ")));
  }
  if (version == 0) return it->second.rbegin()->second.get();
  auto v = it->second.find(version);
  if (v == it->second.end()) {
    return absl::NotFoundError(absl::StrCat("version: model \"", name, "\" has no version ",
                                            version, "; served versions: ",
                                            absl::StrJoin(Versions(name), ", ")));
  }
  return v->second.get();
}

std::vector<std::string> ModelRegistry::ModelNames() const {
  std::vector<std::string> names;
  for (const auto& [name, versions] : models_) names.push_back(name);
  return names;
}

std::vector<int64_t> ModelRegistry::Versions(const std::string& name) const {
  std::vector<int64_t> out;
  auto it = models_.find(name);
  if (it == models_.end()) return out;
  for (const auto& [version, instance] : it->second) out.push_back(version);
  return out;
}

void ModelRegistry::Shutdown() {
  for (auto& [name, versions] : models_) {
    for (auto& [version, instance] : versions) instance->Shutdown();
  }
}

}  // namespace rankd::server
