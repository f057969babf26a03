// CpuWorker: a Worker over a CpuEngine (portable C++, no GPU).
#ifndef RANKD_ENGINE_SERVING_CPU_WORKER_H_
#define RANKD_ENGINE_SERVING_CPU_WORKER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/model/model.h"
#include "engine/serving/worker.h"

namespace rankd::engine {

// Shares its engine: CpuEngine::ScoreBatch is thread-safe, so several workers
// may share one engine (and its thread pool) or each own one.
class CpuWorker final : public Worker {
 public:
  CpuWorker(std::shared_ptr<CpuEngine> engine, std::string name);

  // A worker with its own engine (and thread pool) for `model`.
  static absl::StatusOr<std::unique_ptr<CpuWorker>> Create(
      std::shared_ptr<const Model> model, const CpuEngine::Options& options,
      std::string name = "cpu:0");

  absl::string_view name() const override { return name_; }
  absl::Status Execute(absl::Span<const Request* const> requests,
                       absl::Span<const absl::Span<float>> scores,
                       BatchStats* stats) override;

  CpuEngine& engine() { return *engine_; }

 private:
  std::shared_ptr<CpuEngine> engine_;
  std::string name_;
};

// The CPU workers of one model version, named "cpu:<i>", each with its own
// engine. Zeros follow InstanceConfig: num_workers 0 = one per 4 cores (at
// least 1); threads_per_worker 0 = cores / workers (at least 1). `num_cores`
// 0 = the CPUs this process may use (affinity and cgroup quota).
// `thread_nice`: CpuEngine::Options::thread_nice of every engine.
// InvalidArgument past the thread limits of model_config_validation.h, for
// the counts given and for workers x threads once zeros are resolved.
absl::StatusOr<std::vector<std::unique_ptr<Worker>>> CreateCpuWorkers(
    std::shared_ptr<const Model> model, int num_workers, int threads_per_worker,
    int num_cores = 0, int thread_nice = 0);

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_SERVING_CPU_WORKER_H_
