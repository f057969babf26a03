// rankd inspect: what a model version holds and what it needs in memory.
// Reads only model.pbtxt (never the weights), so it is instant for any size.
#include <cstdio>
#include <iostream>
#include <map>

#include <string>

#include "engine/model/host_memory.h"
#include "engine/model/placement_plan.h"
#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/model/model_loader.h"
#include "engine/model/model_shapes.h"
#include "google/protobuf/util/json_util.h"
#include "server/tools/commands.h"

ABSL_DECLARE_FLAG(std::string, model);
ABSL_FLAG(bool, json, false, "inspect: print the resolved config (defaults filled) as proto3 JSON");
ABSL_FLAG(std::string, gpu_memory, "80GiB",
          "inspect: GPU memory the placement plan is made for (default: an 80 GiB H100)");
ABSL_FLAG(std::string, plan_budget, "",
          "inspect: device-memory budget of the plan, as rankd serve's --device_memory_budget "
          "(bytes like 8G, or a fraction of --gpu_memory; default: --gpu_memory minus the "
          "2 GiB kept for workers)");

namespace rankd::server {
namespace {

using rankd::v1::ModelConfig;

int64_t DtypeBytes(rankd::v1::DataType d) { return d == rankd::v1::FP32 ? 4 : 2; }

std::string Widths(int in, const google::protobuf::RepeatedField<int32_t>& out) {
  std::string s = absl::StrCat(in);
  for (int w : out) absl::StrAppend(&s, "-", w);
  return s;
}

}  // namespace

int RunInspect() {
  const std::string dir = absl::GetFlag(FLAGS_model);
  if (dir.empty()) {
    std::cerr << "rankd inspect: --model: required (a model version directory)\n";
    return 2;
  }
  absl::StatusOr<ModelConfig> config = engine::ReadModelConfig(dir + "/model.pbtxt");
  if (!config.ok()) {
    std::cerr << "rankd inspect: " << config.status().message() << "\n";
    return 1;
  }
  const ModelConfig& c = *config;
  if (absl::GetFlag(FLAGS_json)) {
    google::protobuf::util::JsonPrintOptions opts;
    opts.preserve_proto_field_names = true;
    opts.always_print_primitive_fields = true;
    std::string json;
    if (!google::protobuf::util::MessageToJsonString(c, &json, opts).ok()) {
      std::cerr << "rankd inspect: cannot print the config as JSON\n";
      return 1;
    }
    std::cout << json << "\n";
    return 0;
  }
  std::cout << "model " << c.name() << " (" << dir << ")\n";
  std::cout << "  dense features " << c.num_dense() << ", sparse features "
            << c.sparse_features_size() << ", tables " << c.tables_size() << "\n";
  std::cout << "  bottom MLP " << Widths(c.num_dense(), c.bottom_mlp()) << "\n";
  std::cout << "  interaction " << rankd::v1::InteractionKind_Name(c.interaction().kind());
  if (c.interaction().kind() == rankd::v1::DCN_V2) {
    std::cout << " (" << c.interaction().dcn_num_layers() << " layers, rank "
              << c.interaction().dcn_low_rank() << ")";
  }
  std::cout << ", width " << engine::InteractionWidth(c) << "\n";
  std::cout << "  top MLP " << Widths(static_cast<int>(engine::InteractionWidth(c)), c.top_mlp())
            << " + sigmoid\n";
  std::cout << absl::StrFormat("  %-12s %-7s %12s %5s %5s %5s %-7s %12s\n", "table", "kind",
                               "rows", "dim", "dtype", "pool", "place", "bytes");
  std::map<std::string, int64_t> per_placement;
  int64_t total = 0;
  for (const auto& t : c.tables()) {
    int64_t bytes = t.num_rows() * t.dim() * DtypeBytes(t.dtype());
    if (t.kind() == rankd::v1::DYNAMIC) bytes += t.capacity() * 16;  // keys + row index
    const std::string place = rankd::v1::Placement_Name(t.placement());
    per_placement[place] += bytes;
    total += bytes;
    std::cout << absl::StrFormat("  %-12s %-7s %12d %5d %5s %5s %-7s %12s\n", t.name(),
                                 rankd::v1::TableKind_Name(t.kind()), t.num_rows(), t.dim(),
                                 rankd::v1::DataType_Name(t.dtype()),
                                 rankd::v1::PoolingMode_Name(t.pooling()), place, engine::HumanBytes(bytes));
  }
  int64_t dense_params = 0;
  int in = c.num_dense();
  for (int w : c.bottom_mlp()) {
    dense_params += static_cast<int64_t>(in + 1) * w;
    in = w;
  }
  in = static_cast<int>(engine::InteractionWidth(c));
  for (int w : c.top_mlp()) {
    dense_params += static_cast<int64_t>(in + 1) * w;
    in = w;
  }
  if (c.interaction().kind() == rankd::v1::DCN_V2) {
    const int64_t n = engine::InteractionWidth(c);
    dense_params += c.interaction().dcn_num_layers() * (2 * n * c.interaction().dcn_low_rank() + n);
  }
  std::cout << "  tables total " << engine::HumanBytes(total);
  for (const auto& [place, bytes] : per_placement) std::cout << "; " << place << " " << engine::HumanBytes(bytes);
  std::cout << "\n  dense parameters " << dense_params << " (" << engine::HumanBytes(dense_params * 4.0)
            << " fp32)\n";

  // The CUDA backend's placement for this config (what rankd serve --backend
  // cuda would load), before any weights are read.
  auto gpu = engine::ParseMemoryBudget("--gpu_memory", absl::GetFlag(FLAGS_gpu_memory));
  if (!gpu.ok() || gpu->bytes <= 0) {
    std::cerr << "rankd inspect: "
              << (gpu.ok() ? "--gpu_memory: must be a size like 80GiB"
                           : std::string(gpu.status().message()))
              << "\n";
    return 2;
  }
  auto budget = engine::ParseMemoryBudget("--plan_budget", absl::GetFlag(FLAGS_plan_budget));
  if (!budget.ok()) {
    std::cerr << "rankd inspect: " << budget.status().message() << "\n";
    return 2;
  }
  const int64_t kReserve = int64_t{2} << 30;
  const int64_t budget_bytes = budget->Resolve(gpu->bytes, gpu->bytes - kReserve);
  std::cout << "  placement on a GPU of " << engine::HumanBytes(static_cast<double>(gpu->bytes))
            << ", device-memory budget " << engine::HumanBytes(static_cast<double>(budget_bytes)) << ":\n";
  auto plan = engine::PlanPlacement(c, budget_bytes);
  if (!plan.ok()) {
    std::cout << "  refused: " << plan.status().message() << "\n";
    return 1;
  }
  std::cout << plan->Describe() << "\n";
  return 0;
}

}  // namespace rankd::server
