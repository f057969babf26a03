#include "engine/serving/cpu_worker.h"

#include <algorithm>
#include <cstdint>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/model/model_config_validation.h"
#include "kernels/cpu/host_resources.h"

namespace rankd::engine {

CpuWorker::CpuWorker(std::shared_ptr<CpuEngine> engine, std::string name)
    : engine_(std::move(engine)), name_(std::move(name)) {}

absl::StatusOr<std::unique_ptr<CpuWorker>> CpuWorker::Create(
    std::shared_ptr<const Model> model, const CpuEngine::Options& options,
    std::string name) {
  absl::StatusOr<std::unique_ptr<CpuEngine>> engine =
      CpuEngine::Create(std::move(model), options);
  if (!engine.ok()) return engine.status();
  return std::make_unique<CpuWorker>(
      std::shared_ptr<CpuEngine>(std::move(engine).value()), std::move(name));
}

absl::Status CpuWorker::Execute(absl::Span<const Request* const> requests,
                                absl::Span<const absl::Span<float>> scores,
                                BatchStats* stats) {
  return engine_->ScoreBatch(requests, scores, stats);
}

absl::StatusOr<std::vector<std::unique_ptr<Worker>>> CreateCpuWorkers(
    std::shared_ptr<const Model> model, int num_workers, int threads_per_worker,
    int num_cores, int thread_nice) {
  if (num_workers < 0 || num_workers > kMaxWorkersPerDevice) {
    return absl::InvalidArgumentError(absl::StrCat("workers_per_device must be in [0, ",
                                                   kMaxWorkersPerDevice, "] (0 = automatic), got ",
                                                   num_workers));
  }
  if (threads_per_worker < 0 || threads_per_worker > kMaxCpuThreadsPerWorker) {
    return absl::InvalidArgumentError(absl::StrCat("cpu_threads_per_worker must be in [0, ",
                                                   kMaxCpuThreadsPerWorker,
                                                   "] (0 = automatic), got ", threads_per_worker));
  }
  if (num_cores <= 0) {
    num_cores = kernels::UsableCpus();
  }
  if (num_workers == 0) num_workers = std::max(1, num_cores / 4);
  if (threads_per_worker == 0) {
    threads_per_worker = std::max(1, num_cores / num_workers);
  }
  if (int64_t{num_workers} * threads_per_worker > kMaxCpuThreadsPerInstance) {
    return absl::InvalidArgumentError(absl::StrCat(
        "workers_per_device (", num_workers, ") x cpu_threads_per_worker (", threads_per_worker,
        "), as resolved, must be at most ", kMaxCpuThreadsPerInstance, " threads"));
  }
  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i < num_workers; ++i) {
    CpuEngine::Options options;
    options.num_threads = threads_per_worker;
    options.thread_nice = thread_nice;
    absl::StatusOr<std::unique_ptr<CpuWorker>> worker =
        CpuWorker::Create(model, options, absl::StrCat("cpu:", i));
    if (!worker.ok()) return worker.status();
    workers.push_back(std::move(worker).value());
  }
  return workers;
}

}  // namespace rankd::engine
