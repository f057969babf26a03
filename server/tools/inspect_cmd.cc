// rankd inspect: what a model version holds and what it needs in memory.
// Reads only model.pbtxt (never the weights), so it is instant for any size;
// with --check it also loads the version as `rankd serve` would (weights
// opened and validated, every value read, warm-up scored on the CPU) and
// exits non-zero with the first error, without serving.
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
#include "engine/gpu/gpu_backend.h"
#include "engine/model/model_loader.h"
#include "engine/model/model_shapes.h"
#include "engine/serving/cpu_worker.h"
#include "engine/serving/model_instance.h"
#include "engine/serving/warmup.h"
#include "google/protobuf/util/json_util.h"
#include "server/tools/commands.h"

ABSL_DECLARE_FLAG(std::string, model);
ABSL_FLAG(bool, json, false, "inspect: print the resolved config (defaults filled) as proto3 JSON");
ABSL_FLAG(bool, check, false,
          "inspect: also load the version as rankd serve would (config, weights file, tensor "
          "names, dtypes and shapes, NaN/Inf in rows and weights, duplicate keys, host memory, "
          "CPU warm-up scores finite) without serving; exit 1 with the error if it would fail");
ABSL_FLAG(std::string, gpu_memory, "",
          "inspect: GPU memory the placement plan is made for (default: this machine's "
          "smallest GPU, or 80GiB, an H100, on a machine without one)");
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

// The name the server expects in model.pbtxt for `dir`: its parent's name
// when `dir` is a repository version directory (<root>/<name>/<version>),
// else "" (any name: a directory outside a repository).
std::string ExpectedModelName(const std::string& dir) {
  if (VersionFromDirectory(dir) <= 0) return "";
  std::string path = dir;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) return "";
  const std::string parent = path.substr(0, slash);
  const size_t start = parent.rfind('/');
  return start == std::string::npos ? parent : parent.substr(start + 1);
}

// Loads `dir` as rankd serve does at start (engine::LoadModel with its
// checks), then warms it up on CPU workers through a ModelInstance, whose
// completion refuses non-finite scores. OK or the first error.
absl::Status CheckLoad(const std::string& dir) {
  engine::LoadOptions load;
  load.log = [](const std::string& line) { std::cerr << "rankd inspect: " << line << "\n"; };
  auto model = engine::LoadModel(dir, VersionFromDirectory(dir), ExpectedModelName(dir), load);
  if (!model.ok()) return model.status();
  auto workers = engine::CreateCpuWorkers(*model, /*num_workers=*/1, /*threads_per_worker=*/0);
  if (!workers.ok()) return workers.status();
  auto instance = engine::ModelInstance::Create(
      *model, engine::ModelInstance::OptionsFromConfig((*model)->config), *std::move(workers));
  if (!instance.ok()) return instance.status();
  // The server's warm-up sizes (EngineVersionLoader::Options).
  return engine::WarmUp(**instance, {1, 64});
}

// --check: 0 when a load would succeed, else 1 with the error on stderr.
int RunCheck(const std::string& dir) {
  if (absl::Status s = CheckLoad(dir); !s.ok()) {
    std::cerr << "rankd inspect: check failed: " << s.message() << "\n";
    return 1;
  }
  std::cout << "check: OK (" << dir << " loads and warms up as rankd serve would load it)\n";
  return 0;
}

// Prints the config as proto3 JSON (defaults filled); false if it cannot.
bool PrintJson(const ModelConfig& c) {
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  opts.always_print_primitive_fields = true;
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(c, &json, opts).ok()) {
    std::cerr << "rankd inspect: cannot print the config as JSON\n";
    return false;
  }
  std::cout << json << "\n";
  return true;
}

// Weights and biases of the MLPs and the cross layers.
int64_t DenseParameters(const ModelConfig& c) {
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
  return dense_params;
}

// The model's shape, one line per table, and the bytes they take.
void PrintSummary(const ModelConfig& c, const std::string& dir) {
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
    std::cout << absl::StrFormat(
        "  %-12s %-7s %12d %5d %5s %5s %-7s %12s\n", t.name(), rankd::v1::TableKind_Name(t.kind()),
        t.num_rows(), t.dim(), rankd::v1::DataType_Name(t.dtype()),
        rankd::v1::PoolingMode_Name(t.pooling()), place, engine::HumanBytes(bytes));
  }
  std::cout << "  tables total " << engine::HumanBytes(total);
  for (const auto& [place, bytes] : per_placement) {
    std::cout << "; " << place << " " << engine::HumanBytes(bytes);
  }
  const int64_t dense_params = DenseParameters(c);
  std::cout << "\n  dense parameters " << dense_params << " ("
            << engine::HumanBytes(dense_params * 4.0) << " fp32)\n";
}

// The CUDA backend's placement for this config (what rankd serve --backend
// cuda would load), before any weights are read. 0 when it places the tables,
// 1 when it refuses, 2 for a bad --gpu_memory or --plan_budget.
int PrintPlacement(const ModelConfig& c) {
  std::string gpu_memory = absl::GetFlag(FLAGS_gpu_memory);
  if (gpu_memory.empty()) {
    const int64_t here = engine::gpu::SmallestGpuMemoryBytes();
    gpu_memory = here > 0 ? absl::StrCat(here) : "80GiB";
  }
  auto gpu = engine::ParseMemoryBudget("--gpu_memory", gpu_memory);
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
            << ", device-memory budget " << engine::HumanBytes(static_cast<double>(budget_bytes))
            << ":\n";
  auto plan = engine::PlanPlacement(c, budget_bytes);
  if (!plan.ok()) {
    std::cout << "  refused: " << plan.status().message() << "\n";
    return 1;
  }
  std::cout << plan->Describe() << "\n";
  return 0;
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
    std::cerr << "rankd inspect: " << (absl::GetFlag(FLAGS_check) ? "check failed: " : "")
              << config.status().message() << "\n";
    return 1;
  }
  if (absl::GetFlag(FLAGS_json)) {
    if (!PrintJson(*config)) return 1;
  } else {
    PrintSummary(*config, dir);
    if (const int rc = PrintPlacement(*config); rc != 0) return rc;
  }
  return absl::GetFlag(FLAGS_check) ? RunCheck(dir) : 0;
}

}  // namespace rankd::server
