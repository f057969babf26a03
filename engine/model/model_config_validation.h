// Checks of a model config on its own (no weights), behind ValidateModelConfig
// (model_loader.h). Split out so ReadModelConfig can prefix each error with the
// file path.
#ifndef RANKD_ENGINE_MODEL_MODEL_CONFIG_VALIDATION_H_
#define RANKD_ENGINE_MODEL_MODEL_CONFIG_VALIDATION_H_

#include "engine/model/error_list.h"
#include "rankd/v1/model_config.pb.h"

namespace rankd::engine {

// Upper bounds on the OS threads a model instance starts at load: one per
// worker, and a CPU worker's compute threads. A config or flag asking for more
// threads than the process may start would otherwise abort it (std::thread
// throws); these are far above any machine's cores (0 = automatic resolves to
// at most the usable cores).
// instances.workers_per_device; --workers and --gpu_workers.
inline constexpr int kMaxWorkersPerDevice = 1024;
// instances.cpu_threads_per_worker; --cpu_threads.
inline constexpr int kMaxCpuThreadsPerWorker = 1024;
// Workers x compute threads per worker once both are resolved (CPU backend).
inline constexpr int kMaxCpuThreadsPerInstance = 4096;

// Fills defaults, then appends one "<field>: <reason>" line per problem.
void CheckModelConfig(rankd::v1::ModelConfig* config, ErrorList* errors);

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_MODEL_MODEL_CONFIG_VALIDATION_H_
