// rankd serve: loads every model under --model_root and serves them over gRPC
// (rankd.v1.Ranking, grpc.health.v1.Health, reflection) with Prometheus
// metrics, until SIGTERM / SIGINT, then drains and exits 0.
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "engine/model/placement_plan.h"
#include "absl/flags/flag.h"
#include "absl/synchronization/mutex.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "engine/cuda/cuda_worker.h"
#include "engine/serving/observer.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/build_info.h"
#include "server/metrics.h"
#include "server/model_registry.h"
#include "server/ranking_service.h"
#include "server/tools/commands.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(std::string, model_root, "models", "serve: directory of <name>/<version>/ model versions");
ABSL_FLAG(std::string, host, "0.0.0.0", "serve: address to listen on (gRPC and metrics)");
ABSL_FLAG(int, grpc_port, 8500, "serve: gRPC port (0 = any free port; see --port_file)");
ABSL_FLAG(int, metrics_port, 8502, "serve: Prometheus /metrics port (0 = any free port, -1 = off)");
ABSL_FLAG(std::string, port_file, "",
          "serve: once serving, write \"grpc_port=N\\nmetrics_port=M\\n\" to this file");
ABSL_FLAG(std::string, backend, "auto",
          "serve: auto | cpu | cuda (auto = cuda when a usable GPU is present, else cpu)");
ABSL_FLAG(int, gpu_workers, 0, "serve: CUDA workers per GPU per model version (0 = model config, else 2)");
ABSL_FLAG(std::string, gpu_math, "fp32",
          "serve: MLP math on the GPU: fp32 (exact, matches the CPU engine to 1e-5) | tf32 "
          "(tensor cores, ~1e-3)");
ABSL_FLAG(bool, gpu_graphs, true, "serve: replay CUDA graphs per batch-size bucket");
ABSL_FLAG(std::string, device_memory_budget, "",
          "serve: GPU memory each model may use per GPU: bytes (8G, 512MiB) or a fraction of "
          "the GPU's memory (0.5); tables beyond it go to pinned host memory behind an HBM "
          "cache (default: the GPU's free memory minus 2 GiB for workers)");
ABSL_FLAG(int, workers, 0, "serve: workers per model version (0 = model config, else automatic)");
ABSL_FLAG(int, completion_threads, 2,
          "serve: threads per model version that answer computed requests so workers go "
          "straight back to computing (0 = each worker answers its own batches; 2 measured "
          "+51% 1-candidate req/s on the H100, bench/NOTES.md)");
ABSL_FLAG(bool, completion_inline_when_idle, true,
          "serve: with --completion_threads, a batch of under 8 requests that leaves the queue "
          "empty is answered by its worker (one thread wake-up less per request at low load)");
ABSL_FLAG(int64_t, host_staging_mib, 128,
          "serve: HBM per GPU worker for the rows a batch misses in the HBM cache of HOST "
          "tables, each copied from host memory once per batch (0 = misses are read from host "
          "memory inside the pooling kernel; at most 1024: it comes out of the 2 GiB per-GPU worker reserve)");
ABSL_FLAG(bool, host_cache_shared, true,
          "serve: HOST tables with the same row size share one HBM cache whose slots go to the "
          "rows accessed most in any of them (false: each table caches its own share, the plan's "
          "rows of it)");
ABSL_FLAG(int64_t, worker_spin_us, 0,
          "serve: a worker that finds its queue empty spins this long (us) before it sleeps: "
          "trades CPU for the wake-up latency of a sleeping thread (0 = sleep at once; at most "
          "10000)");
ABSL_FLAG(int, cpu_threads, 0, "serve: threads per CPU worker (0 = model config, else cores/workers)");
ABSL_FLAG(int64_t, max_message_bytes, 64 << 20, "serve: largest gRPC message accepted or sent");
ABSL_FLAG(int, max_candidates, 16384, "serve: most candidates in one request (0 = no limit)");
ABSL_FLAG(int64_t, max_ids_per_feature, 1 << 20,
          "serve: most ids of one sparse feature in one request (0 = no limit)");
ABSL_FLAG(absl::Duration, drain_timeout, absl::Seconds(30),
          "serve: on SIGTERM, longest wait for admitted requests before exiting");
ABSL_FLAG(std::string, log_level, "info", "serve: trace | debug | info | warn | error");

namespace rankd::server {
namespace {

absl::Status CheckFlags() {
  auto port_ok = [](int p, int min) { return p >= min && p <= 65535; };
  if (!port_ok(absl::GetFlag(FLAGS_grpc_port), 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--grpc_port: must be in [0, 65535], got ",
                                                   absl::GetFlag(FLAGS_grpc_port)));
  }
  if (!port_ok(absl::GetFlag(FLAGS_metrics_port), -1)) {
    return absl::InvalidArgumentError(absl::StrCat("--metrics_port: must be in [-1, 65535], got ",
                                                   absl::GetFlag(FLAGS_metrics_port)));
  }
  const int64_t max_msg = absl::GetFlag(FLAGS_max_message_bytes);
  if (max_msg < 1024 || max_msg > (int64_t{1} << 31) - 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_message_bytes: must be in [1024, 2147483647], got ", max_msg));
  }
  if (absl::GetFlag(FLAGS_max_candidates) < 0 || absl::GetFlag(FLAGS_max_ids_per_feature) < 0 ||
      absl::GetFlag(FLAGS_workers) < 0 || absl::GetFlag(FLAGS_cpu_threads) < 0 ||
      absl::GetFlag(FLAGS_completion_threads) < 0) {
    return absl::InvalidArgumentError(
        "--max_candidates, --max_ids_per_feature, --workers, --cpu_threads and "
        "--completion_threads must be >= 0");
  }
  if (absl::GetFlag(FLAGS_host_staging_mib) < 0 || absl::GetFlag(FLAGS_host_staging_mib) > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("--host_staging_mib: must be in [0, 1024], got ",
                                                   absl::GetFlag(FLAGS_host_staging_mib)));
  }
  if (absl::GetFlag(FLAGS_worker_spin_us) < 0 || absl::GetFlag(FLAGS_worker_spin_us) > 10000) {
    return absl::InvalidArgumentError(absl::StrCat("--worker_spin_us: must be in [0, 10000], got ",
                                                   absl::GetFlag(FLAGS_worker_spin_us)));
  }
  if (absl::GetFlag(FLAGS_drain_timeout) < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--drain_timeout: must be >= 0");
  }
  const std::string backend = absl::GetFlag(FLAGS_backend);
  if (backend != "auto" && backend != "cpu" && backend != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("--backend: expected auto, cpu or cuda, got \"", backend, "\""));
  }
  const std::string math = absl::GetFlag(FLAGS_gpu_math);
  if (math != "fp32" && math != "tf32") {
    return absl::InvalidArgumentError(
        absl::StrCat("--gpu_math: expected fp32 or tf32, got \"", math, "\""));
  }
  {
    auto budget = engine::ParseMemoryBudget("--device_memory_budget",
                                            absl::GetFlag(FLAGS_device_memory_budget));
    if (!budget.ok()) return budget.status();
  }
  if (absl::GetFlag(FLAGS_gpu_workers) < 0) {
    return absl::InvalidArgumentError("--gpu_workers: must be >= 0");
  }
  const std::string level = absl::GetFlag(FLAGS_log_level);
  if (spdlog::level::from_str(level) == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(absl::StrCat("--log_level: unknown level \"", level, "\""));
  }
  return absl::OkStatus();
}

}  // namespace

int RunServe() {
  // Block the stop signals before any thread starts, so every thread inherits
  // the mask and only the sigwait below sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // Debian's abseil is built without NDEBUG, so every absl::Mutex::Lock (ours
  // and gRPC's: gpr mutexes are absl::Mutex) runs the deadlock detector: a
  // global graph lock, a per-thread held-locks list and graph updates on each
  // lock and mutex destruction. perf showed it on the request path
  // (GraphCycles::GetId / RemoveNode); tests keep the detector on.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  absl::Status flags = CheckFlags();
  if (!flags.ok()) {
    std::fprintf(stderr, "rankd serve: %s\n", std::string(flags.message()).c_str());
    return 2;
  }
  spdlog::set_level(spdlog::level::from_str(absl::GetFlag(FLAGS_log_level)));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %v");
  std::string backend = absl::GetFlag(FLAGS_backend);
  std::string why_no_gpu;
  const int gpus = engine::cuda::UsableCudaDevices(&why_no_gpu);
  if (backend == "auto") backend = gpus > 0 ? "cuda" : "cpu";
  if (backend == "cuda" && gpus == 0) {
    spdlog::error("--backend=cuda: no usable GPU ({})", why_no_gpu);
    return 1;
  }
  spdlog::info("rankd {} starting: backend {} ({} GPU(s){}), model root {}", kRankdVersion,
               backend, gpus, gpus == 0 ? ": " + why_no_gpu : "",
               absl::GetFlag(FLAGS_model_root));

  Metrics metrics(kRankdVersion, backend);
  const std::string host = absl::GetFlag(FLAGS_host);
  if (absl::GetFlag(FLAGS_metrics_port) >= 0) {
    absl::Status s = metrics.StartExposer(absl::StrCat(host, ":", absl::GetFlag(FLAGS_metrics_port)));
    if (!s.ok()) {
      spdlog::error("{}", std::string(s.message()));
      return 1;
    }
    spdlog::info("metrics on http://{}:{}/metrics", host, metrics.exposer_port());
  }

  ModelRegistry::Options registry_options;
  registry_options.model_root = absl::GetFlag(FLAGS_model_root);
  registry_options.workers_per_model = absl::GetFlag(FLAGS_workers);
  registry_options.cpu_threads_per_worker = absl::GetFlag(FLAGS_cpu_threads);
  registry_options.completion_threads = absl::GetFlag(FLAGS_completion_threads);
  registry_options.complete_inline_when_idle = absl::GetFlag(FLAGS_completion_inline_when_idle);
  registry_options.worker_spin_us = absl::GetFlag(FLAGS_worker_spin_us);
  registry_options.backend = backend;
  registry_options.gpu_workers_per_device = absl::GetFlag(FLAGS_gpu_workers);
  registry_options.cuda.math = absl::GetFlag(FLAGS_gpu_math) == "tf32"
                                   ? kernels::cuda::MathMode::kTf32
                                   : kernels::cuda::MathMode::kFp32;
  registry_options.cuda.use_graphs = absl::GetFlag(FLAGS_gpu_graphs);
  registry_options.cuda.host_staging_bytes = absl::GetFlag(FLAGS_host_staging_mib) << 20;
  registry_options.cuda.shared_host_cache = absl::GetFlag(FLAGS_host_cache_shared);
  registry_options.cuda.budget = *engine::ParseMemoryBudget(
      "--device_memory_budget", absl::GetFlag(FLAGS_device_memory_budget));  // validated above
  auto registry = ModelRegistry::Create(
      registry_options, &metrics, [&](const engine::Model& m) { metrics.AddModel(m); },
      [&](const engine::Model& m) { metrics.SetModelReady(m.name, m.version, true); });
  if (!registry.ok()) {
    spdlog::error("cannot load models: {}", std::string(registry.status().message()));
    return 1;
  }

  engine::RequestLimits limits;
  limits.max_candidates = absl::GetFlag(FLAGS_max_candidates);
  limits.max_ids_per_feature = absl::GetFlag(FLAGS_max_ids_per_feature);
  RankingService service(registry->get(), &metrics, limits, backend);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int grpc_port = 0;
  const std::string address = absl::StrCat(host, ":", absl::GetFlag(FLAGS_grpc_port));
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &grpc_port);
  const int max_msg = static_cast<int>(absl::GetFlag(FLAGS_max_message_bytes));
  builder.SetMaxReceiveMessageSize(max_msg);
  builder.SetMaxSendMessageSize(max_msg);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || grpc_port == 0) {
    spdlog::error("--grpc_port: cannot listen on {}", address);
    return 1;
  }
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  auto set_health = [&](bool serving) {
    health->SetServingStatus(serving);  // every service, "" included
    for (const std::string& name : (*registry)->ModelNames()) {
      health->SetServingStatus(name, serving);
    }
  };
  set_health(true);
  spdlog::info("serving {} model(s) on {}:{} (gRPC)", (*registry)->ModelNames().size(), host,
               grpc_port);
  const std::string port_file = absl::GetFlag(FLAGS_port_file);
  if (!port_file.empty()) {
    std::ofstream f(port_file + ".tmp");
    f << "grpc_port=" << grpc_port << "\nmetrics_port=" << metrics.exposer_port() << "\n";
    f.close();
    std::rename((port_file + ".tmp").c_str(), port_file.c_str());
  }

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  const absl::Duration drain = absl::GetFlag(FLAGS_drain_timeout);
  spdlog::info("{} received: not serving, draining admitted requests (up to {})",
               signal_number == SIGTERM ? "SIGTERM" : "SIGINT", absl::FormatDuration(drain));
  set_health(false);
  const absl::Time drain_start = absl::Now();
  // Stops accepting RPCs and waits for those in flight (queued in batchers,
  // answered by workers); past the deadline the rest are cancelled.
  server->Shutdown(absl::ToChronoTime(drain_start + drain));
  (*registry)->Shutdown();
  server->Wait();
  spdlog::info("drained in {:.3f} s; exiting", absl::ToDoubleSeconds(absl::Now() - drain_start));
  return 0;
}

}  // namespace rankd::server
