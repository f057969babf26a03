// forward_bench: the CUDA engine's forward on one GPU, checked against the CPU
// engine and timed. Reads one ScoreRequest (JSON line; `rankd gen-requests`)
// of B candidates, runs it through a CudaWorker once (packs, copies, captures
// the bucket's CUDA graph), compares the scores with the CPU engine, then
// times:
//   forward  replays of the captured forward with the inputs already on the
//            device (CUDA events, median of --iters after --warmup);
//   execute  the whole Execute() call: pack on the host, one copy in, forward,
//            one copy out, synchronize (host clock, median), and its phases
//            (CudaWorker::HostPathTimes: offsets, pack, enqueue, wait for
//            the GPU, unpack; medians of each);
//   steady   --steady_workers workers of the same GPU, as the server runs
//            them, each fed the request back to back on its own thread: wall
//            time / batches, so one worker's packing overlaps another's GPU
//            work (scores checked against the CPU engine too); the median of
//            --steady_windows windows, with the fastest and slowest.
// Prints one line: model, batch, math, max rel error, forward us, execute us,
// host phases of execute and of the steady state, device stages.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/synchronization/barrier.h"
#include "bench/bench_input.h"
#include "bench/gpu/check_cuda.h"
#include "bench/gpu/event_timer.h"
#include "bench/median.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/batch_stats.h"
#include "engine/cuda/cuda_worker.h"
#include "engine/cuda/cuda_worker_probe.h"
#include "engine/cuda/pack_pool.h"
#include "engine/model/placement_plan.h"

ABSL_FLAG(std::string, model, "", "model version directory");
ABSL_FLAG(std::string, request, "", "JSON lines file; the first line is used");
ABSL_FLAG(std::string, math, "fp32", "fp32 | tf32");
ABSL_FLAG(int, iters, 200, "timed iterations");
ABSL_FLAG(int, warmup, 20, "untimed iterations first");
ABSL_FLAG(double, tolerance, 1e-5, "max relative error vs the CPU engine (exit 1 beyond)");
ABSL_FLAG(bool, fused, true, "allow the fused tiny-model kernel");
ABSL_FLAG(std::string, label, "", "label for the result line");
ABSL_FLAG(bool, compact_ids, true,
          "CudaWorker::Options::compact_ids: 32-bit ids and bag offsets where the model allows");
ABSL_FLAG(bool, small_rows_mlp, true,
          "CudaWorker::Options::small_rows_mlp: MLP layers of slices of <= 16 rows on the "
          "small-rows kernel instead of cuBLASLt");
ABSL_FLAG(int64_t, lookup_beside_mlp_max_rows, -1,
          "CudaWorker::Options::lookup_beside_mlp_max_rows: slices of at most this many padded "
          "rows pool beside the bottom MLP (-1 = the worker's default, 0 = never)");
ABSL_FLAG(int64_t, dense_first_min_rows, -1,
          "CudaWorker::Options::dense_first_min_rows: one-slice batches of at least this many "
          "rows pack and copy their dense rows first and start the bottom MLP while the rest "
          "is packed (-1 = the worker's default, 0 = never)");
ABSL_FLAG(int64_t, dense_first_max_rows, -1,
          "CudaWorker::Options::dense_first_max_rows (-1 = the worker's default)");
ABSL_FLAG(int64_t, copy_beside_mlp_min_rows, -1,
          "CudaWorker::Options::copy_beside_mlp_min_rows: one-slice batches of at least this many "
          "rows copy their bags and ids beside the bottom MLP (-1 = the worker's default, 0 = "
          "never)");
ABSL_FLAG(int64_t, unit_bags_min_rows, -1,
          "CudaWorker::Options::unit_bags_min_rows: buckets of at least this many rows pack "
          "one-id bags as ids only (-1 = the worker's default, 0 = never)");
ABSL_FLAG(bool, unit_bag_kernel, true,
          "CudaWorker::Options::unit_bag_kernel: pool unit features with the unit-bag kernel "
          "(false: the general pooling kernel)");
ABSL_FLAG(bool, fused_lookup_dot, true,
          "CudaWorker::Options::fused_lookup_dot: run an all-unit batch's lookup fused with the "
          "dot interaction (false: two launches)");
ABSL_FLAG(int, pack_threads, -1,
          "CudaWorker::Options::pack_threads: threads that split the host packing (-1 = "
          "default, 0 = none)");
ABSL_FLAG(std::string, cross_math, "auto",
          "DCN cross layers: auto | fp32 | tf32x3 | bf16x3 | tf32 (CudaWorker::CrossMath)");
ABSL_FLAG(int, parallel_pack_min_rows, 1024,
          "CudaWorker::Options::parallel_pack_min_rows: smaller slices are packed without the pool");
ABSL_FLAG(int, max_rows, 0,
          "CudaWorker::Options::max_rows: rows per slice (0 = the whole batch in one slice; "
          "the forward figure is then of the last slice)");
ABSL_FLAG(int, steady_workers, 2,
          "steady state: this many workers on the one GPU (the server's default per GPU), "
          "sharing one packing pool, each running Execute back to back (0 = skip)");
ABSL_FLAG(int, steady_windows, 5,
          "steady state: windows of --iters / 2 batches per worker; the figure is their "
          "median (min and max printed beside it)");
ABSL_FLAG(bool, steady_warm_up, true,
          "steady state: warm each worker as the server does (Worker::WarmUp: the paths of "
          "an idle and a busy GPU) rather than with two batches alone; steady_first_us shows "
          "what the first window side by side costs either way");
ABSL_FLAG(double, host_cache_fraction, -1,
          ">= 0: also run every table in pinned host memory (placement HOST) behind an HBM "
          "cache of this fraction of its rows, refresh the caches between runs, and require "
          "scores bit-identical to the all-in-HBM engine (same kernels)");

namespace {

using rankd::bench::Median;

// Wall time per batch of workers running Execute back to back, each on its
// own thread: the median, fastest and slowest of the windows.
struct SteadyTimes {
  double median_us = 0, min_us = 0, max_us = 0;
  double first_us = 0;  // the first window's (kept out of the figure), per batch
  // Host phases of the timed windows' Execute calls, every worker's
  // (CudaWorker::HostPathTimes; medians printed as steady_host_us).
  std::vector<double> phases[5];
};

// The five phases of CudaWorker::HostPathTimes, in the order printed.
void AddPhases(const rankd::engine::cuda::CudaWorker::HostPathTimes& h, std::vector<double>* out) {
  const double phases[] = {h.offsets_us, h.pack_us, h.enqueue_us, h.wait_us, h.unpack_us};
  for (int k = 0; k < 5; ++k) out[k].push_back(phases[k]);
}

// "offsets=..,pack=..,enqueue=..,wait=..,unpack=.." (medians), or "-".
std::string PhaseMedians(const std::vector<double>* phases) {
  if (phases[0].empty()) return "-";
  const char* names[] = {"offsets", "pack", "enqueue", "wait", "unpack"};
  std::string out;
  for (int k = 0; k < 5; ++k) {
    char buf[48];
    std::snprintf(buf, sizeof(buf), "%s%s=%.1f", k == 0 ? "" : ",", names[k], Median(phases[k]));
    out += buf;
  }
  return out;
}

// Each window starts every worker's thread, releases them together (thread
// start-up is not timed) and stops the clock when the last is done; one
// scheduling stall then moves one window, not the figure. A first window,
// kept out of the figure, warms what only runs side by side. Leaves each
// worker's last scores in `outs` (cleared to NaN first, so a worker that
// wrote nothing fails the caller's check).
absl::StatusOr<SteadyTimes> MeasureSteadyState(
    const std::vector<std::unique_ptr<rankd::engine::cuda::CudaWorker>>& workers,
    absl::Span<const rankd::engine::Request* const> reqs, std::vector<std::vector<float>>* outs,
    int per_worker, int windows, bool warm_paths) {
  const int n = static_cast<int>(workers.size());
  std::vector<absl::Status> status(n);
  std::vector<std::array<std::vector<double>, 5>> phases(n);  // each worker's, timed windows
  auto run = [&](int w, int batches, bool timed) {
    absl::Span<float> o[] = {absl::MakeSpan((*outs)[w])};
    rankd::engine::cuda::CudaWorkerProbe probe(workers[w].get());
    for (int i = 0; i < batches && status[w].ok(); ++i) {
      status[w] = workers[w]->Execute(reqs, o, nullptr);
      if (timed) AddPhases(probe.last_host_path(), phases[w].data());
    }
  };
  // Graphs captured, arenas sized: the server's warm-up (CudaWorker::WarmUp:
  // the paths of an idle and of a busy GPU), or two batches alone.
  for (int w = 0; w < n; ++w) {
    if (warm_paths) {
      absl::Span<float> o[] = {absl::MakeSpan((*outs)[w])};
      if (absl::Status s = workers[w]->WarmUp(reqs, o); !s.ok()) return s;
    } else {
      run(w, 2, false);
    }
  }
  std::vector<double> per_batch;
  double first_us = 0;
  // Window 0 is not in the figure: without warm_paths, workers side by side
  // take paths that one alone does not (CudaWorker::Options::
  // dense_first_min_rows), whose graphs are captured on first use.
  for (int k = 0; k <= windows; ++k) {
    if (k == 1) {
      for (auto& o : *outs) std::fill(o.begin(), o.end(), std::nanf(""));
    }
    absl::Barrier* start = new absl::Barrier(n + 1);  // deletes itself
    std::vector<std::thread> threads;
    for (int w = 0; w < n; ++w) {
      threads.emplace_back([&, w, start] {
        if (start->Block()) delete start;
        run(w, per_worker, k > 0);
      });
    }
    if (start->Block()) delete start;
    const auto t0 = std::chrono::steady_clock::now();
    for (auto& t : threads) t.join();
    const auto t1 = std::chrono::steady_clock::now();
    const double us = std::chrono::duration<double, std::micro>(t1 - t0).count() /
                      (static_cast<double>(per_worker) * n);
    if (k == 0) {
      first_us = us;
      continue;
    }
    per_batch.push_back(us);
  }
  for (const absl::Status& st : status) {
    if (!st.ok()) return st;
  }
  SteadyTimes out;
  out.median_us = Median(per_batch);
  out.min_us = *std::min_element(per_batch.begin(), per_batch.end());
  out.max_us = *std::max_element(per_batch.begin(), per_batch.end());
  out.first_us = first_us;
  for (int w = 0; w < n; ++w) {
    for (int k = 0; k < 5; ++k) {
      out.phases[k].insert(out.phases[k].end(), phases[w][k].begin(), phases[w][k].end());
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto input =
      rankd::bench::LoadBenchInput(absl::GetFlag(FLAGS_model), absl::GetFlag(FLAGS_request));
  if (!input.ok()) {
    std::cerr << input.status() << "\n";
    return 2;
  }
  const std::shared_ptr<const rankd::engine::Model>* model = &(*input)->model;
  const rankd::engine::Request* req = &(*input)->request;
  const int b = req->num_candidates;

  // Reference: the CPU engine.
  rankd::engine::CpuEngine::Options co;
  auto cpu = rankd::engine::CpuEngine::Create(*model, co);
  auto want = (*cpu)->Score(*req);
  if (!want.ok()) {
    std::cerr << want.status() << "\n";
    return 2;
  }

  rankd::engine::cuda::DeviceModel::Options dmo;
  rankd::kernels::cuda::TinyDlrmShape tiny;
  dmo.pad_inputs = !(absl::GetFlag(FLAGS_fused) && rankd::engine::cuda::TinyShapeFor(**model, dmo.device, &tiny));
  rankd::engine::cuda::CudaWorker::Options wo;
  if (!rankd::engine::cuda::ParseCrossMath(absl::GetFlag(FLAGS_cross_math), &wo.cross_math)) {
    std::cerr << "--cross_math: expected auto, fp32, tf32x3, bf16x3 or tf32\n";
    return 2;
  }
  wo.math = absl::GetFlag(FLAGS_math) == "tf32" ? rankd::kernels::cuda::MathMode::kTf32
                                                : rankd::kernels::cuda::MathMode::kFp32;
  dmo.cross_split = rankd::engine::cuda::CrossSplitFor(wo);
  auto dm = rankd::engine::cuda::DeviceModel::Create(*model, dmo);
  if (!dm.ok()) {
    std::cerr << dm.status() << "\n";
    return 2;
  }
  wo.max_rows = absl::GetFlag(FLAGS_max_rows) > 0 ? absl::GetFlag(FLAGS_max_rows) : std::max(b, 16);
  wo.allow_fused_tiny = absl::GetFlag(FLAGS_fused);
  wo.compact_ids = absl::GetFlag(FLAGS_compact_ids);
  wo.small_rows_mlp = absl::GetFlag(FLAGS_small_rows_mlp);
  wo.unit_bag_kernel = absl::GetFlag(FLAGS_unit_bag_kernel);
  wo.fused_lookup_dot = absl::GetFlag(FLAGS_fused_lookup_dot);
  wo.pack_threads = absl::GetFlag(FLAGS_pack_threads);
  if (absl::GetFlag(FLAGS_dense_first_min_rows) >= 0) {
    wo.dense_first_min_rows = absl::GetFlag(FLAGS_dense_first_min_rows);
  }
  if (absl::GetFlag(FLAGS_copy_beside_mlp_min_rows) >= 0) {
    wo.copy_beside_mlp_min_rows = absl::GetFlag(FLAGS_copy_beside_mlp_min_rows);
  }
  if (absl::GetFlag(FLAGS_unit_bags_min_rows) >= 0) {
    wo.unit_bags_min_rows = absl::GetFlag(FLAGS_unit_bags_min_rows);
  }
  if (absl::GetFlag(FLAGS_dense_first_max_rows) >= 0) {
    wo.dense_first_max_rows = absl::GetFlag(FLAGS_dense_first_max_rows);
  }
  if (absl::GetFlag(FLAGS_lookup_beside_mlp_max_rows) >= 0) {
    wo.lookup_beside_mlp_max_rows = absl::GetFlag(FLAGS_lookup_beside_mlp_max_rows);
  }
  wo.parallel_pack_min_rows = absl::GetFlag(FLAGS_parallel_pack_min_rows);
  auto worker = rankd::engine::cuda::CudaWorker::Create(*dm, wo, "bench");
  if (!worker.ok()) {
    std::cerr << worker.status() << "\n";
    return 2;
  }
  rankd::engine::cuda::CudaWorkerProbe probe(worker->get());
  std::vector<float> got(b, std::nanf(""));
  const rankd::engine::Request* reqs[] = {&*req};
  absl::Span<float> outs[] = {absl::MakeSpan(got)};
  // Twice: the first captures the graph, the second replays it.
  for (int i = 0; i < 2; ++i) {
    std::fill(got.begin(), got.end(), std::nanf(""));
    absl::Status s = (*worker)->Execute(reqs, outs, nullptr);
    if (!s.ok()) {
      std::cerr << s << "\n";
      return 2;
    }
  }
  double max_rel = 0;
  for (int i = 0; i < b; ++i) {
    const double ref = (*want)[i];
    const double err = std::isnan(got[i]) ? INFINITY : std::abs(got[i] - ref) / std::max(std::abs(ref), 1e-30);
    max_rel = std::max(max_rel, err);
  }

  cudaStream_t stream = probe.stream();
  rankd::bench::EventTimer timer;
  std::vector<double> fwd;
  for (int i = 0; i < absl::GetFlag(FLAGS_warmup) + absl::GetFlag(FLAGS_iters); ++i) {
    absl::Status s;
    const double ms = timer.Ms(stream, [&] { s = probe.ReplayLastForward(); });
    if (!s.ok()) {
      std::cerr << s << "\n";
      return 2;
    }
    if (i >= absl::GetFlag(FLAGS_warmup)) fwd.push_back(ms * 1000.0);
  }
  std::vector<double> exec;
  std::vector<double> host_phases[5];  // AddPhases' order
  for (int i = 0; i < absl::GetFlag(FLAGS_warmup) + absl::GetFlag(FLAGS_iters) / 2; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    absl::Status s = (*worker)->Execute(reqs, outs, nullptr);
    const auto t1 = std::chrono::steady_clock::now();
    if (!s.ok()) {
      std::cerr << s << "\n";
      return 2;
    }
    if (i >= absl::GetFlag(FLAGS_warmup)) {
      exec.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      AddPhases(probe.last_host_path(), host_phases);
    }
  }
  // Execute's wall time by phase (CudaWorker::HostPathTimes), medians.
  const std::string host_path = PhaseMedians(host_phases);
  // Steady state: workers of this GPU back to back, one shared packing pool.
  SteadyTimes steady;
  const int steady_workers = absl::GetFlag(FLAGS_steady_workers);
  if (steady_workers > 0) {
    namespace ec = rankd::engine::cuda;
    std::shared_ptr<ec::PackPool> pool;
    const int threads = wo.pack_threads < 0 ? ec::PackPool::DefaultThreads() : wo.pack_threads;
    if (threads > 0) pool = std::make_shared<ec::PackPool>(threads);
    std::vector<std::unique_ptr<ec::CudaWorker>> workers;
    for (int w = 0; w < steady_workers; ++w) {
      auto sw = ec::CudaWorker::Create(*dm, wo, "steady", pool);
      if (!sw.ok()) {
        std::cerr << sw.status() << "\n";
        return 2;
      }
      workers.push_back(std::move(*sw));
    }
    std::vector<std::vector<float>> outs_w(steady_workers, std::vector<float>(b));
    auto st = MeasureSteadyState(workers, reqs, &outs_w, std::max(1, absl::GetFlag(FLAGS_iters) / 2),
                                 std::max(1, absl::GetFlag(FLAGS_steady_windows)),
                                 absl::GetFlag(FLAGS_steady_warm_up));
    if (!st.ok()) {
      std::cerr << st.status() << "\n";
      return 2;
    }
    steady = *st;
    for (int w = 0; w < steady_workers; ++w) {
      for (int i = 0; i < b; ++i) {
        const double ref = (*want)[i];
        const double err = std::isnan(outs_w[w][i])
                               ? INFINITY
                               : std::abs(outs_w[w][i] - ref) / std::max(std::abs(ref), 1e-30);
        max_rel = std::max(max_rel, err);
      }
    }
  }
  // Per-stage device times (direct launches, no graph), median over runs.
  std::string stages = "-";
  {
    std::vector<std::vector<double>> runs;
    for (int i = 0; i < 30; ++i) {
      auto st = probe.ProfileLastForward();
      if (!st.ok() || st->empty()) break;
      runs.push_back(*st);
    }
    if (!runs.empty()) {
      stages.clear();
      const char* names[] = {"bottom", "lookup", "interaction", "top"};
      for (size_t k = 0; k < runs[0].size() && k < 4; ++k) {
        std::vector<double> v;
        for (auto& r : runs) v.push_back(r[k]);
        char buf[64];
        std::snprintf(buf, sizeof(buf), "%s%s=%.1f", stages.empty() ? "" : ",", names[k], Median(v));
        stages += buf;
      }
    }
  }
  // HOST placement: the same model with every table in pinned host memory,
  // against the all-in-HBM general path (same kernels, so bit-identical).
  std::string host_result;
  bool host_ok = true;
  const double fraction = absl::GetFlag(FLAGS_host_cache_fraction);
  if (fraction >= 0) {
    namespace ec = rankd::engine::cuda;
    auto plan = rankd::engine::PlanPlacement(rankd::engine::PlanInputFromModel(**model),
                                             int64_t{1} << 50);
    if (!plan.ok()) {
      std::cerr << plan.status() << "\n";
      return 2;
    }
    for (size_t t = 0; t < plan->tables.size(); ++t) {
      rankd::engine::TablePlan& tp = plan->tables[t];
      const int64_t rows = (*model)->tables[t].num_rows;
      tp.tier = rankd::engine::Tier::kHost;
      tp.cache_rows = std::min<int64_t>(rows, static_cast<int64_t>(fraction * rows));
      tp.cache_bytes = tp.cache_rows > 0 ? 4 * rows + tp.cache_rows * tp.row_bytes : 0;
    }
    ec::DeviceModel::Options ho;
    ho.cross_split = dmo.cross_split;
    ho.plan = std::make_shared<const rankd::engine::PlacementPlan>(*plan);
    ho.refresh_interval_ms = 0;  // refreshed by hand below
    ho.cache.prefill = false;    // start cold: every refresh changes the cache
    ho.cache.sample_shift = 0;   // log every access: small batches still fill it
    auto hdm = ec::DeviceModel::Create(*model, ho);
    ec::DeviceModel::Options ro;  // all tables in HBM
    ro.cross_split = dmo.cross_split;
    auto rdm = ec::DeviceModel::Create(*model, ro);
    if (!hdm.ok() || !rdm.ok()) {
      std::cerr << (hdm.ok() ? rdm.status() : hdm.status()) << "\n";
      return 2;
    }
    ec::CudaWorker::Options go = wo;
    go.allow_fused_tiny = false;
    auto hw = ec::CudaWorker::Create(*hdm, go, "host");
    auto rw = ec::CudaWorker::Create(*rdm, go, "hbm");
    if (!hw.ok() || !rw.ok()) {
      std::cerr << (hw.ok() ? rw.status() : hw.status()) << "\n";
      return 2;
    }
    std::vector<float> ref(b), host(b);
    absl::Span<float> ref_out[] = {absl::MakeSpan(ref)};
    absl::Span<float> host_out[] = {absl::MakeSpan(host)};
    absl::Status s = (*rw)->Execute(reqs, ref_out, nullptr);
    int mismatched_runs = 0;
    int64_t hits = 0, misses = 0;
    for (int run = 0; run < 4 && s.ok(); ++run) {
      std::fill(host.begin(), host.end(), std::nanf(""));
      rankd::engine::BatchStats st;
      s = (*hw)->Execute(reqs, host_out, &st);
      if (!s.ok()) break;
      if (std::memcmp(host.data(), ref.data(), sizeof(float) * b) != 0) ++mismatched_runs;
      hits = misses = 0;
      for (size_t t = 0; t < st.host_tables.size(); ++t) {
        if (!st.host_tables[t]) continue;
        misses += st.host_tables[t]->host_reads;
        hits += st.host_tables[t]->lookups - st.unresolved_ids_per_table[t] -
                st.host_tables[t]->host_reads;
      }
      s = (*hdm)->RefreshCachesNow();  // the next run sees a changed cache
    }
    if (!s.ok()) {
      std::cerr << s << "\n";
      return 2;
    }
    host_ok = mismatched_runs == 0;
    char buf[160];
    std::snprintf(buf, sizeof(buf), " host_cache=%.2f host_exact=%s last_hit_rate=%.3f",
                  fraction, host_ok ? "yes" : "NO", hits + misses > 0 ? double(hits) / (hits + misses) : 0.0);
    host_result = buf;
  }
  const bool ok = max_rel <= absl::GetFlag(FLAGS_tolerance) && host_ok;
  std::printf("RESULT label=%s model=%s batch=%d max_rows=%d math=%s cross=%s fused=%d small_rows=%d beside_max_rows=%lld dense_first_min_rows=%lld unit_bags_min_rows=%lld pack_threads=%d "
              "max_rel_err=%.3e forward_us=%.2f execute_us=%.2f steady_us=%.2f steady_min_us=%.2f "
              "steady_max_us=%.2f steady_first_us=%.2f (x%d workers) "
              "host_us=%s steady_host_us=%s stages_us=%s%s %s\n",
              absl::GetFlag(FLAGS_label).c_str(), (*model)->name.c_str(), b, wo.max_rows,
              absl::GetFlag(FLAGS_math).c_str(), absl::GetFlag(FLAGS_cross_math).c_str(), probe.uses_fused_tiny() ? 1 : 0,
              wo.small_rows_mlp ? 1 : 0, static_cast<long long>(wo.lookup_beside_mlp_max_rows),
              static_cast<long long>(wo.dense_first_min_rows),
              static_cast<long long>(wo.unit_bags_min_rows),
              absl::GetFlag(FLAGS_pack_threads), max_rel, Median(fwd), Median(exec), steady.median_us,
              steady.min_us, steady.max_us, steady.first_us, steady_workers, host_path.c_str(),
              PhaseMedians(steady.phases).c_str(), stages.c_str(), host_result.c_str(), ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
