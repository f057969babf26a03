// The GPU backend as the server sees it: its options in plain types and the
// few calls `rankd serve` and `rankd inspect` make, so that server/ names no
// CUDA type and includes no CUDA header (docs/architecture.md, layers).
//
// Two implementations, chosen at build time (engine/gpu/BUILD):
//   gpu_backend_cuda.cc  the CUDA backend (engine/cuda), the default build;
//   gpu_backend_none.cc  `--config=cpu`: a build without the CUDA toolkit.
//                        It reports no GPU, and CreateGpuVersion answers
//                        FAILED_PRECONDITION ("this rankd build has no CUDA
//                        backend ..."), so `--backend=cuda` fails at start
//                        with that reason and `auto` serves on the CPU.
// The --gpu_* flags parse the same in both builds, so one flag file serves
// both.
//
// Thread safety: every function may be called from any thread.
#ifndef RANKD_ENGINE_GPU_GPU_BACKEND_H_
#define RANKD_ENGINE_GPU_GPU_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/model/model.h"
#include "engine/model/placement_plan.h"
#include "engine/serving/worker.h"
#include "engine/updates/table_store.h"

namespace rankd::engine::gpu {

// --gpu_math: the MLPs' products.
enum class Math {
  kFp32,  // exact fp32 products (matches the CPU engine within 1e-5)
  kTf32,  // TF32 tensor cores (within ~1e-3)
};

// --gpu_cross_math: the DCN cross layers' products (engine/cuda/cuda_worker.h,
// CudaWorker::CrossMath, says what each costs).
enum class CrossMath {
  kAuto,    // kFp32 under Math::kFp32, kTf32x3 under Math::kTf32
  kFp32,    // plain fp32
  kTf32x3,  // split precision on TF32 tensor cores, nearly fp32
  kBf16x3,  // split precision on bf16 tensor cores
  kTf32,    // single-pass TF32: fastest, least accurate
};

// "fp32" / "tf32"; INVALID_ARGUMENT naming --gpu_math otherwise.
absl::StatusOr<Math> ParseMath(absl::string_view text);
// "auto" / "fp32" / "tf32x3" / "bf16x3" / "tf32"; INVALID_ARGUMENT naming
// --gpu_cross_math otherwise (the text quoted, truncated).
absl::StatusOr<CrossMath> ParseCrossMath(absl::string_view text);

// The GPU workers of a model version, from `rankd serve`'s flags.
struct Options {
  Math math = Math::kFp32;                 // --gpu_math
  CrossMath cross_math = CrossMath::kAuto;  // --gpu_cross_math
  bool use_graphs = true;                  // --gpu_graphs: a CUDA graph per row bucket
  // --host_staging_mib: HBM per worker for the rows a batch misses in the
  // HBM cache of host tables.
  int64_t host_staging_bytes = int64_t{128} << 20;
  bool shared_host_cache = true;  // --host_cache_shared: one cache per row size
  // --gpu_pack_threads: the host packing pool (-1 = default, 0 = none).
  int pack_threads = -1;
  MemoryBudget budget;  // --device_memory_budget (unset: the GPU's free memory)
  // Workers per GPU (0 = the model's instances setting, else 2).
  int workers_per_device = 0;
};

// A model version's GPU side: its workers, the store that online updates
// write (the workers' tables), and the HBM its placement takes per GPU.
struct Version {
  std::vector<std::unique_ptr<Worker>> workers;
  std::shared_ptr<TableStore> store;
  int64_t device_bytes = 0;
};

// Whether this binary was built with the CUDA backend.
bool BuiltWithCuda();

// Number of GPUs this process can use (0 without GPU or driver, where this
// binary has no kernel image for them, or in a build without CUDA), and why
// there are none.
int UsableGpus(std::string* why_none = nullptr);

// Total memory of the smallest usable GPU (what a placement plan is made
// for); 0 without one.
int64_t SmallestGpuMemoryBytes();

// The virtual architectures of this binary's device code ("900";
// "800,900,1000" for --config=portable; "" without CUDA).
std::string BuiltGpuArchs();

// Places `model` on every usable GPU and makes its workers; slices hold at
// least the model's max_batch_candidates rows, so a batch runs in one go.
// Logs the placement when tables go to host memory and the GPU hash builds.
// FAILED_PRECONDITION in a build without CUDA.
absl::StatusOr<Version> CreateVersion(std::shared_ptr<const Model> model, const Options& options);

}  // namespace rankd::engine::gpu

#endif  // RANKD_ENGINE_GPU_GPU_BACKEND_H_
