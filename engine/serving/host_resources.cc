#include "engine/serving/host_resources.h"

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/model/host_memory.h"

namespace rankd::engine {

std::string DescribeHostResources() {
  const kernels::CpuBudget cpu = kernels::ReadCpuBudget();
  std::string out = absl::StrCat("CPUs: ", cpu.usable_cpus, " usable (",
                                 cpu.online_cpus, " online, affinity ",
                                 cpu.affinity_cpus, ", cgroup quota ");
  if (cpu.quota_cpus > 0) {
    absl::StrAppend(&out, absl::StrFormat("%.2f", cpu.quota_cpus), " from ",
                    cpu.quota_source, ")");
  } else {
    absl::StrAppend(&out, "none)");
  }
  absl::StatusOr<AvailableHostMemory> mem = ReadAvailableHostMemory();
  if (mem.ok()) {
    absl::StrAppend(&out, "; host memory: ",
                    HumanBytes(static_cast<double>(mem->bytes)),
                    " available (", mem->source, ")");
  } else {
    absl::StrAppend(&out, "; host memory: unknown (", mem.status().message(), ")");
  }
  return out;
}

}  // namespace rankd::engine
