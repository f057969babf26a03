// tiny_bench: the fused tiny-DLRM kernel (kernels/cuda/tiny_dlrm.h) at
// several batch sizes, inputs already on the device (what the engine's
// worker launches after its one host-to-device copy).
//
//   tiny_bench                          # mini preset (MODELS.md), 3 tables
//   tiny_bench --num_tables 16          # the n_sparse sweep
//   tiny_bench --model /path/to/model/1 # any DOT model the kernel supports
//
// Per batch size: a correctness gate against the CPU engine (same model, same
// requests; fails the run if any score is off), then CUDA-event timings
// (warm-up, then the median of --iters single launches, each bracketed by
// its own events) of (a) plain launches and (b) replays of a CUDA graph
// holding the launch (how the engine runs it), and the per-launch time of
// --iters back-to-back launches / replays. Inputs rotate over --sets device
// copies so a launch does not only read what the previous one left in L2.
// Prints a table last.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/gpu/event_timer.h"
#include "engine/cuda/testing/tiny_dlrm_host.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/generator/model_generator.h"
#include "engine/model/model_loader.h"
#include "engine/request.h"
#include "kernels/cuda/tiny_dlrm.h"

ABSL_FLAG(std::string, model, "",
          "model version directory to load; empty = generate the mini preset in a temp dir");
ABSL_FLAG(int, num_tables, 3, "mini preset: number of tables (3..16, the n_sparse sweep)");
ABSL_FLAG(std::string, dtype, "fp32", "mini preset: row type, fp32 | fp16 | bf16");
ABSL_FLAG(std::string, batches, "256,1024,2048,4096", "batch sizes (candidates)");
ABSL_FLAG(int, bag, 1, "ids per bag");
ABSL_FLAG(int, iters, 200, "timed repetitions per measurement (median reported)");
ABSL_FLAG(int, warmup, 50, "untimed launches first");
ABSL_FLAG(int, sets, 8, "input sets on the device, rotated between launches");
ABSL_FLAG(bool, check, true, "compare every batch size's scores with the CPU engine first");
ABSL_FLAG(uint64_t, seed, 1, "random inputs");

namespace rankd::bench {
namespace {

using engine::Model;
using engine::cuda::CudaStatus;
using engine::cuda::testing::TinyDlrmDeviceBatch;
using engine::cuda::testing::TinyDlrmDeviceModel;

#define RETURN_IF_ERROR(expr)            \
  do {                                   \
    const absl::Status s_ = (expr);      \
    if (!s_.ok()) return s_;             \
  } while (0)

// A request that owns its arrays.
struct OwnedRequest {
  int32_t num_candidates = 0;
  std::vector<float> dense;
  std::vector<std::vector<int64_t>> ids;
  std::vector<std::vector<int32_t>> lengths;
  engine::Request view() const {
    engine::Request r;
    r.num_candidates = num_candidates;
    r.dense = dense;
    for (size_t f = 0; f < ids.size(); ++f) {
      r.features.push_back(engine::FeatureInput{ids[f], lengths[f], {}});
    }
    return r;
  }
};

// Dense features in [0, 3) (never zero), ids uniform over each table's rows
// (keys for DYNAMIC tables), `bag` ids per bag.
OwnedRequest RandomRequest(const Model& m, int32_t candidates, int bag, uint64_t seed) {
  std::mt19937_64 rng(seed);
  OwnedRequest r;
  r.num_candidates = candidates;
  std::uniform_real_distribution<float> u(0.0f, 3.0f);
  r.dense.resize(static_cast<size_t>(candidates) * m.num_dense);
  for (float& x : r.dense) {
    do x = u(rng); while (x == 0.0f);
  }
  for (const engine::SparseFeature& f : m.features) {
    const engine::EmbeddingTable& t = m.tables[f.table];
    std::uniform_int_distribution<int64_t> row(0, t.num_rows - 1);
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < static_cast<int64_t>(candidates) * bag; ++i) {
      const int64_t rr = row(rng);
      ids.push_back(t.dynamic ? reinterpret_cast<const int64_t*>(t.keys.data)[rr] : rr);
    }
    r.ids.push_back(std::move(ids));
    r.lengths.push_back(std::vector<int32_t>(candidates, bag));
  }
  return r;
}

double Percentile(std::vector<float> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5));
  return v[i];
}

// One way of launching, timed (us): each launch alone (median, p10, p90)
// and per launch of a back-to-back run.
struct Timing {
  double med = 0, p10 = 0, p90 = 0;
  double b2b = 0;
};

struct Row {
  int64_t batch = 0;
  double min_bytes = 0;  // each input read once, scores written once
  double max_abs_err = 0;
  Timing plain;  // one launch of the kernel per call
  Timing graph;  // one CUDA graph replay per call
};

// Times fn(i) bracketed by events, `iters` times; returns the samples (us).
template <typename Fn>
absl::StatusOr<std::vector<float>> TimeEach(cudaStream_t stream, int iters, Fn fn) {
  rankd::bench::EventTimer timer;
  std::vector<float> us;
  for (int i = 0; i < iters; ++i) {
    absl::Status s;
    const double ms = timer.Ms(stream, [&] { s = fn(i); });
    RETURN_IF_ERROR(s);
    us.push_back(static_cast<float>(ms * 1000.0));
  }
  return us;
}

// Per-launch time of `iters` back-to-back calls of fn.
template <typename Fn>
absl::StatusOr<double> TimeBackToBack(cudaStream_t stream, int iters, Fn fn) {
  absl::Status s;
  const double ms = rankd::bench::EventTimer().Ms(stream, [&] {
    for (int i = 0; i < iters && s.ok(); ++i) s = fn(i);
  });
  RETURN_IF_ERROR(s);
  return ms * 1000.0 / iters;
}

// fn(i) `warmup` times untimed, then timed by TimeEach and TimeBackToBack,
// `iters` calls each.
template <typename Fn>
absl::StatusOr<Timing> TimeLaunches(cudaStream_t stream, int warmup, int iters, Fn fn) {
  for (int i = 0; i < warmup; ++i) RETURN_IF_ERROR(fn(i));
  absl::StatusOr<std::vector<float>> each = TimeEach(stream, iters, fn);
  if (!each.ok()) return each.status();
  Timing timing;
  timing.med = Percentile(*each, 0.5);
  timing.p10 = Percentile(*each, 0.1);
  timing.p90 = Percentile(*each, 0.9);
  absl::StatusOr<double> b2b = TimeBackToBack(stream, iters, fn);
  if (!b2b.ok()) return b2b.status();
  timing.b2b = *b2b;
  return timing;
}

absl::Status Run() {
  // ---- model
  std::shared_ptr<const Model> model;
  std::string label;
  std::string temp_dir;
  if (!absl::GetFlag(FLAGS_model).empty()) {
    absl::StatusOr<std::shared_ptr<const Model>> m = engine::LoadModel(absl::GetFlag(FLAGS_model));
    if (!m.ok()) return m.status();
    model = *m;
    label = absl::GetFlag(FLAGS_model);
  } else {
    engine::GenerateOptions o;
    o.preset = "mini";
    o.num_tables = absl::GetFlag(FLAGS_num_tables);
    const std::string dtype = absl::GetFlag(FLAGS_dtype);
    if (dtype == "fp16") {
      o.dtype = rankd::v1::FP16;
    } else if (dtype == "bf16") {
      o.dtype = rankd::v1::BF16;
    } else if (dtype != "fp32") {
      return absl::InvalidArgumentError("--dtype: fp32, fp16 or bf16");
    }
    char tmpl[] = "/tmp/tiny_bench_XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return absl::InternalError("mkdtemp failed");
    temp_dir = tmpl;
    const std::string dir = temp_dir + "/mini/1";
    RETURN_IF_ERROR(engine::GenerateModel(o, dir));
    absl::StatusOr<std::shared_ptr<const Model>> m = engine::LoadModel(dir);
    std::error_code ec;
    if (!m.ok()) {
      std::filesystem::remove_all(temp_dir, ec);
      return m.status();
    }
    model = *m;
    std::filesystem::remove_all(temp_dir, ec);  // the model is in memory now
    label = absl::StrCat("mini preset, ", o.num_tables, " tables, ", dtype);
  }
  std::vector<int64_t> batches;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_batches), ',')) {
    int64_t b = 0;
    if (!absl::SimpleAtoi(s, &b) || b <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("--batches: bad size '", s, "'"));
    }
    batches.push_back(b);
  }
  const int iters = std::max(1, absl::GetFlag(FLAGS_iters));
  const int warmup = std::max(1, absl::GetFlag(FLAGS_warmup));
  const int sets = std::max(1, absl::GetFlag(FLAGS_sets));
  const int bag = std::max(0, absl::GetFlag(FLAGS_bag));

  cudaDeviceProp prop;
  RETURN_IF_ERROR(CudaStatus(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties"));
  absl::StatusOr<std::unique_ptr<TinyDlrmDeviceModel>> dm = TinyDlrmDeviceModel::Create(model);
  if (!dm.ok()) return dm.status();
  const kernels::cuda::TinyDlrmShape& shape = (*dm)->shape();
  const int warps = kernels::cuda::TinyDlrmBlockThreads(shape) / 32;
  std::printf("tiny_bench: %s on %s (%d SMs)\n", label.c_str(), prop.name,
              prop.multiProcessorCount);
  std::printf("  shape: dense %d, bottom", shape.num_dense);
  for (int l = 0; l < shape.num_bottom; ++l) std::printf(" %d", shape.bottom[l]);
  std::printf(", %d features x dim %d, top", shape.num_features, shape.dim);
  for (int l = 0; l < shape.num_top; ++l) std::printf(" %d", shape.top[l]);
  std::printf("%s; block: %d warps, %zu B shared, 32 candidates\n",
              shape.self_interaction ? ", self interaction" : "", warps,
              kernels::cuda::TinyDlrmSharedBytes(shape));

  absl::StatusOr<std::unique_ptr<engine::CpuEngine>> cpu =
      engine::CpuEngine::Create(model, engine::CpuEngine::Options{});
  if (!cpu.ok()) return cpu.status();

  cudaStream_t stream = nullptr;
  RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                             "cudaStreamCreate"));
  std::vector<Row> table;
  bool all_ok = true;
  for (const int64_t batch : batches) {
    Row row;
    row.batch = batch;
    {
      double bytes = 4.0 * batch * model->num_dense + 4.0 * batch +
                     4.0 * kernels::cuda::TinyDlrmPackedFloats(shape);
      for (const engine::SparseFeature& f : model->features) {
        const engine::EmbeddingTable& t = model->tables[f.table];
        bytes += 8.0 * (batch + 1) + 8.0 * batch * bag + 1.0 * batch * bag * t.row_bytes();
        if (t.dynamic) bytes += 128.0 * batch * bag + 8.0 * batch * bag;  // bucket + slot row
      }
      row.min_bytes = bytes;
    }
    // ---- inputs: `sets` batches on the device
    std::vector<OwnedRequest> owned;
    std::vector<std::unique_ptr<TinyDlrmDeviceBatch>> dev;
    for (int s = 0; s < sets; ++s) {
      owned.push_back(RandomRequest(*model, static_cast<int32_t>(batch), bag,
                                    absl::GetFlag(FLAGS_seed) * 1000003 + batch * 31 + s));
      const engine::Request req = owned.back().view();
      const engine::Request* reqs[] = {&req};
      absl::StatusOr<std::unique_ptr<TinyDlrmDeviceBatch>> b =
          TinyDlrmDeviceBatch::Create(**dm, reqs);
      if (!b.ok()) return b.status();
      dev.push_back(std::move(*b));
    }
    // ---- correctness gate: set 0 against the CPU engine
    if (absl::GetFlag(FLAGS_check)) {
      RETURN_IF_ERROR(dev[0]->Reset(stream));
      RETURN_IF_ERROR(dev[0]->Launch(stream));
      absl::StatusOr<std::vector<float>> got = dev[0]->Scores(stream);
      if (!got.ok()) return got.status();
      absl::StatusOr<std::vector<float>> want = (*cpu)->Score(owned[0].view());
      if (!want.ok()) return want.status();
      int64_t bad = 0;
      for (int64_t i = 0; i < batch; ++i) {
        const double p = (*want)[i];
        const double err = std::fabs(static_cast<double>((*got)[i]) - p);
        const double z = std::log(p / (1.0 - p));
        const bool ok = err <= 1e-6 || err <= 1e-5 * std::fabs(z) * p * (1.0 - p);
        if (!ok) {
          if (bad < 5) {
            std::printf("  MISMATCH batch %ld candidate %ld: gpu %.9g cpu %.9g\n",
                        static_cast<long>(batch), static_cast<long>(i), (*got)[i], p);
          }
          ++bad;
        }
        row.max_abs_err = std::max(row.max_abs_err, std::isfinite(err) ? err : INFINITY);
      }
      if (bad > 0) all_ok = false;
    }
    // ---- plain launches
    auto launch = [&](int i) { return dev[i % sets]->Launch(stream); };
    absl::StatusOr<Timing> plain = TimeLaunches(stream, warmup, iters, launch);
    if (!plain.ok()) return plain.status();
    row.plain = *plain;
    // ---- CUDA graphs, one per input set
    std::vector<cudaGraphExec_t> execs;
    for (int s = 0; s < sets; ++s) {
      cudaGraph_t graph = nullptr;
      RETURN_IF_ERROR(CudaStatus(
          cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "begin capture"));
      const absl::Status launched = dev[s]->Launch(stream);
      RETURN_IF_ERROR(CudaStatus(cudaStreamEndCapture(stream, &graph), "end capture"));
      RETURN_IF_ERROR(launched);
      cudaGraphExec_t exec = nullptr;
      RETURN_IF_ERROR(CudaStatus(cudaGraphInstantiate(&exec, graph, 0), "graph instantiate"));
      cudaGraphDestroy(graph);
      execs.push_back(exec);
    }
    auto replay = [&](int i) {
      return CudaStatus(cudaGraphLaunch(execs[i % sets], stream), "graph launch");
    };
    absl::StatusOr<Timing> graph = TimeLaunches(stream, warmup, iters, replay);
    if (!graph.ok()) return graph.status();
    row.graph = *graph;
    RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream), "sync"));
    for (cudaGraphExec_t e : execs) cudaGraphExecDestroy(e);
    // The replays computed real scores too: re-check the last one is sane.
    absl::StatusOr<std::vector<float>> last = dev[(iters - 1) % sets]->Scores(stream);
    if (!last.ok()) return last.status();
    for (float p : *last) {
      if (!(p >= 0.0f && p <= 1.0f)) {
        all_ok = false;
        std::printf("  batch %ld: a replayed score is not a probability (%g)\n",
                    static_cast<long>(batch), p);
        break;
      }
    }
    table.push_back(row);
  }
  cudaStreamDestroy(stream);

  // min KB: bytes one launch must move at least (each input read once, scores
  // written once); at ~3 TB/s, 300 KB is 0.1 us: the kernel is latency-bound.
  std::printf("\n%-6s | %-7s | %-25s | %-25s | %-13s | %-12s | %s\n", "batch", "min KB",
              "launch us: med [p10,p90]", "graph us: med [p10,p90]", "b2b us/launch",
              "b2b us/graph", "max|p-p_cpu|");
  for (const Row& r : table) {
    std::printf("%-6ld | %7.1f | %8.2f [%6.2f, %6.2f] | %8.2f [%6.2f, %6.2f] | %13.2f | %12.2f | %.2e\n",
                static_cast<long>(r.batch), r.min_bytes / 1024.0, r.plain.med, r.plain.p10,
                r.plain.p90, r.graph.med, r.graph.p10, r.graph.p90, r.plain.b2b, r.graph.b2b,
                r.max_abs_err);
  }
  std::printf("(launch/graph: one launch between two events, %d samples; b2b: %d back-to-back "
              "launches / %d; inputs rotate over %d sets)\n",
              iters, iters, iters, sets);
  if (!all_ok) return absl::InternalError("scores differ from the CPU engine (see above)");
  return absl::OkStatus();
}

}  // namespace
}  // namespace rankd::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const absl::Status s = rankd::bench::Run();
  if (!s.ok()) {
    std::fprintf(stderr, "tiny_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
