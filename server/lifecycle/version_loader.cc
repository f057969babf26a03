#include "server/lifecycle/version_loader.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/model/model_loader.h"
#include "engine/serving/cpu_worker.h"
#include "engine/serving/host_resources.h"
#include "engine/serving/warmup.h"
#include "engine/updates/host_table_store.h"
#include "engine/updates/snapshot_writer.h"
#include "spdlog/spdlog.h"

namespace rankd::server {
namespace {

absl::Status InDirectory(const absl::Status& s, const std::string& directory) {
  return absl::Status(s.code(), absl::StrCat(directory, ": ", s.message()));
}

// 1, 2, 4, ... up to and including `max_candidates`: one batch per CUDA graph
// bucket (buckets are powers of two of the row quantum and above).
std::vector<int32_t> BucketSizes(int32_t max_candidates) {
  std::vector<int32_t> sizes;
  for (int32_t b = 1; b < max_candidates; b *= 2) sizes.push_back(b);
  sizes.push_back(std::max(max_candidates, 1));
  return sizes;
}

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<engine::Worker>>> EngineVersionLoader::MakeWorkers(
    const std::shared_ptr<const engine::Model>& model, const std::string& directory,
    int64_t* device_bytes, std::vector<std::shared_ptr<engine::TableStore>>* stores) {
  const auto& instances = model->config.instances();
  absl::StatusOr<std::vector<std::unique_ptr<engine::Worker>>> workers;
  if (options_.backend == "cuda") {
    absl::StatusOr<engine::gpu::Version> gpu = engine::gpu::CreateVersion(model, options_.gpu);
    if (!gpu.ok()) return InDirectory(gpu.status(), directory);
    *device_bytes = gpu->device_bytes;
    stores->push_back(std::move(gpu->store));
    workers = std::move(gpu->workers);
  } else {
    const int n = options_.workers_per_model > 0 ? options_.workers_per_model
                                                 : instances.workers_per_device();
    const int threads = options_.cpu_threads_per_worker > 0 ? options_.cpu_threads_per_worker
                                                           : instances.cpu_threads_per_worker();
    workers = engine::CreateCpuWorkers(model, n, threads, /*num_cores=*/0,
                                       options_.cpu_compute_nice);
    stores->push_back(std::make_shared<engine::HostTableStore>(model));
  }
  if (!workers.ok()) return InDirectory(workers.status(), directory);
  return workers;
}

absl::StatusOr<std::shared_ptr<engine::LiveTables>> EngineVersionLoader::MakeLiveTables(
    const std::shared_ptr<const engine::Model>& model,
    std::vector<std::shared_ptr<engine::TableStore>> stores, const std::string& directory) {
  engine::LiveTables::Options live_options;
  live_options.idle_priority_staging = options_.idle_priority_update_staging;
  auto live = std::make_shared<engine::LiveTables>(model, std::move(stores), live_options);
  // A snapshot directory carries its producers' positions: resumed streams
  // skip what it already holds.
  absl::StatusOr<std::vector<engine::ProducerPosition>> positions =
      engine::ReadUpdatePositions(directory);
  if (!positions.ok()) return positions.status();
  live->SetPositions(*positions);
  return live;
}

absl::StatusOr<LoadedVersion> EngineVersionLoader::Load(const std::string& name, int64_t version,
                                                        const std::string& directory,
                                                        bool while_serving) {
  const absl::Time start = absl::Now();
  engine::LoadOptions load;
  // Big tables print progress while they are read, generated or hashed.
  load.log = [](const std::string& line) { spdlog::info("{}", line); };
  // The CUDA backend builds its dynamic tables' hash arrays on the GPU from
  // the keys (~1 G keys/s); only the CPU engine needs host hash tables.
  load.build_hash_tables = options_.backend != "cuda";
  if (while_serving) {
    const int cores = engine::UsableCpus();
    load.num_threads = options_.background_load_threads > 0 ? options_.background_load_threads
                                                            : std::max(1, cores / 4);
  }
  load.cancel = options_.cancel;
  auto model = engine::LoadModel(directory, version, name, load);
  if (!model.ok()) return model.status();
  // Placement, workers and warm-up cannot stop halfway: not started at all
  // once the server is stopping.
  if (options_.cancel != nullptr && options_.cancel->load()) {
    return absl::CancelledError(absl::StrCat(directory, ": load cancelled"));
  }
  if (on_model_loaded_) on_model_loaded_(**model);
  LoadedVersion out;
  out.host_bytes = (*model)->table_bytes();
  std::vector<std::shared_ptr<engine::TableStore>> stores;
  auto workers = MakeWorkers(*model, directory, &out.device_bytes, &stores);
  if (!workers.ok()) return workers.status();
  const int num_workers = static_cast<int>(workers->size());
  const absl::Time made = absl::Now();
  if (options_.backend == "cuda") {
    // A bucket's first batch captures its CUDA graphs: one-hot and multi-hot
    // batches of every bucket on every worker, on the paths of an idle and of
    // a busy GPU, so no request of the new version pays a capture.
    absl::Status warm = engine::WarmUpWorkers(
        **model, *workers, BucketSizes((*model)->config.batching().max_batch_candidates()));
    if (!warm.ok()) return InDirectory(warm, directory);
  }
  const absl::Duration worker_warmup = absl::Now() - made;
  engine::ModelInstance::Options instance_options =
      engine::ModelInstance::OptionsFromConfig((*model)->config);
  absl::StatusOr<std::shared_ptr<engine::LiveTables>> live =
      MakeLiveTables(*model, std::move(stores), directory);
  if (!live.ok()) return live.status();
  instance_options.live_tables = *live;
  out.live_tables = *std::move(live);
  instance_options.completion_threads = options_.completion_threads;
  instance_options.complete_inline_when_idle = options_.complete_inline_when_idle;
  instance_options.batching.idle_spin_us = options_.worker_spin_us;
  if (options_.backend == "cpu") instance_options.worker_nice = options_.cpu_compute_nice;
  auto instance =
      engine::ModelInstance::Create(*model, instance_options, std::move(*workers), observer_);
  if (!instance.ok()) return InDirectory(instance.status(), directory);
  const absl::Time loaded = absl::Now();
  absl::Status warm = engine::WarmUp(**instance, options_.warmup_candidates);
  if (!warm.ok()) return InDirectory(warm, directory);
  out.load_seconds = absl::ToDoubleSeconds(loaded - start - worker_warmup);
  out.warmup_seconds = absl::ToDoubleSeconds(absl::Now() - loaded + worker_warmup);
  spdlog::info("model {} version {} loaded: {} tables, {} {} workers, {} completion threads, "
               "load {:.3f} s, warm-up {:.3f} s ({})",
               name, version, (*model)->tables.size(), num_workers, options_.backend,
               options_.completion_threads, out.load_seconds, out.warmup_seconds, directory);
  out.instance = std::move(*instance);
  return out;
}

}  // namespace rankd::server
