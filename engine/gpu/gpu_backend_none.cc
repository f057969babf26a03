// The GPU backend of a build without the CUDA toolkit (--config=cpu): no
// GPU is ever usable, and asking for one says why.
#include "engine/gpu/gpu_backend.h"

namespace rankd::engine::gpu {
namespace {

constexpr char kNoCuda[] =
    "this rankd build has no CUDA backend (built with --config=cpu); use --backend=cpu, or a "
    "build with CUDA";

}  // namespace

bool BuiltWithCuda() { return false; }

int UsableGpus(std::string* why_none) {
  if (why_none != nullptr) *why_none = kNoCuda;
  return 0;
}

int64_t SmallestGpuMemoryBytes() { return 0; }

std::string BuiltGpuArchs() { return ""; }

absl::StatusOr<Version> CreateVersion(std::shared_ptr<const Model>, const Options&) {
  return absl::FailedPreconditionError(kNoCuda);
}

}  // namespace rankd::engine::gpu
