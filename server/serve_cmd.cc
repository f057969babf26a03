// rankd serve: serves the models under --model_root over gRPC (rankd.v1.Ranking,
// inference.GRPCInferenceService (KServe v2), grpc.health.v1.Health, reflection) with Prometheus metrics, and the admin
// API (rankd.v1.ModelControl) on a loopback listener; follows the repository
// (--model_control poll: every --repository_poll_s and on SIGHUP) until
// SIGTERM / SIGINT, then drains and exits 0.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "engine/gpu/gpu_backend.h"
#include "engine/model/error_text.h"
#include "engine/model/model_config_validation.h"
#include "engine/model/placement_plan.h"
#include "engine/serving/host_resources.h"
#include "engine/serving/observer.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/resource_quota.h"
#include "server/admin_auth.h"
#include "server/build_info.h"
#include "server/connection_options.h"
#include "server/http/http_server.h"
#include "server/kserve_service.h"
#include "server/lifecycle/model_manager.h"
#include "server/lifecycle/repository_poller.h"
#include "server/lifecycle/version_loader.h"
#include "server/metrics.h"
#include "server/model_control_service.h"
#include "server/protobuf_log.h"
#include "server/ranking_cq_front.h"
#include "server/ranking_service.h"
#include "server/tls.h"
#include "server/tools/commands.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(std::string, model_root, "models", "serve: directory of <name>/<version>/ model versions");
ABSL_FLAG(std::string, host, "0.0.0.0", "serve: address to listen on (gRPC and metrics)");
ABSL_FLAG(int, grpc_port, 8500, "serve: gRPC port (0 = any free port; see --port_file)");
ABSL_FLAG(int, metrics_port, 8502, "serve: Prometheus /metrics port (0 = any free port, -1 = off)");
ABSL_FLAG(std::string, port_file, "",
          "serve: once serving, write \"grpc_port=N\\nmetrics_port=M\\n...\" (every listener's "
          "port) to this file");
ABSL_FLAG(int, http_port, 8501,
          "serve: HTTP port: KServe v2 REST and POST /v1/models/{m}:score JSON (0 = any free "
          "port, -1 = off); TLS as the gRPC port when --tls_cert_file is set");
ABSL_FLAG(int, http_max_connections, 256,
          "serve: most HTTP connections served at once (a thread each); more wait for one to "
          "close");
ABSL_FLAG(int, http_read_timeout_ms, 5000,
          "serve: an HTTP connection that sends nothing for this long while a request is read "
          "(or takes nothing of the answer) is closed");
ABSL_FLAG(int, http_keep_alive_s, 5,
          "serve: an idle kept-alive HTTP connection is closed after this many seconds");
ABSL_FLAG(int64_t, http_request_timeout_ms, 10000,
          "serve: deadline of an HTTP inference request (a client may ask for less with a "
          "Request-Timeout-Ms header); 0 = the batcher's default");
ABSL_FLAG(std::string, backend, "auto",
          "serve: auto | cpu | cuda (auto = cuda when a usable GPU is present, else cpu)");
ABSL_FLAG(int, gpu_workers, 0, "serve: CUDA workers per GPU per model version (0 = model config, else 2)");
ABSL_FLAG(std::string, gpu_math, "fp32",
          "serve: MLP math on the GPU: fp32 (exact, matches the CPU engine to 1e-5) | tf32 "
          "(tensor cores, ~1e-3)");
ABSL_FLAG(std::string, gpu_cross_math, "auto",
          "serve: DCN cross layers on the GPU: auto (fp32 under --gpu_math fp32, tf32x3 under "
          "tf32) | fp32 | tf32x3 (split-precision TF32 tensor cores, nearly fp32) | bf16x3 "
          "(split-precision bf16 tensor cores, ~2^-17 per product) | tf32 (single pass: "
          "fastest, least accurate; figures in docs/operations.md)");
ABSL_FLAG(bool, gpu_graphs, true, "serve: replay CUDA graphs per batch-size bucket");
ABSL_FLAG(std::string, device_memory_budget, "",
          "serve: GPU memory each model may use per GPU: bytes (8G, 512MiB) or a fraction of "
          "the GPU's memory (0.5); tables beyond it go to pinned host memory behind an HBM "
          "cache (default: the GPU's free memory minus 2 GiB for workers)");
ABSL_FLAG(int, workers, 0, "serve: workers per model version (0 = model config, else automatic)");
ABSL_FLAG(int, completion_threads, 2,
          "serve: threads per model version that answer computed requests so workers go "
          "straight back to computing (0 = each worker answers its own batches; worth it where "
          "answering costs about as much host time as computing: small requests on a GPU)");
ABSL_FLAG(int, rpc_threads, -1,
          "serve: -1 = rankd.v1.Ranking and KServe v2 on gRPC's callback API (gRPC's own "
          "threads); N >= 1 = on N threads of rankd's own polling gRPC completion queues, one "
          "queue each (0 = half the usable CPUs, 2 to 8): less CPU and more requests/s for small "
          "requests, fewer requests/s for large ones on a few connections (docs/operations.md); "
          "at most 64");
ABSL_FLAG(int, cpu_compute_nice, 10,
          "serve: CPU backend: nice increment (0-19) of the threads that compute batches, so "
          "the threads that receive, refuse and answer requests run first when the cores are "
          "saturated (0 = same priority as the rest of the server)");
ABSL_FLAG(std::string, update_cpu_priority, "idle",
          "serve: CPU priority of the validation and staging of embedding update messages: "
          "idle (a helper thread at the SCHED_IDLE policy: a stream takes only cores serving "
          "leaves idle; on a saturated host updates slow down) | normal (the stream's own "
          "thread, competing with serving)");
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
ABSL_FLAG(int, gpu_pack_threads, -1,
          "serve: threads (one pool per model version, shared by its GPU workers) that split the host packing of "
          "batches of 1024 rows or more; -1 = half the usable CPUs, at most 8; 0 = each worker "
          "packs alone; at most 64");
ABSL_FLAG(int64_t, worker_spin_us, -1,
          "serve: a worker that finds its queue empty spins this long (us) before it sleeps: "
          "trades CPU for the wake-up latency of a sleeping thread (0 = sleep at once; at most "
          "10000; -1 = 1000 with the CUDA backend, 0 with the CPU backend, whose idle workers "
          "would take cores from the busy ones' compute)");
ABSL_FLAG(int, cpu_threads, 0, "serve: threads per CPU worker (0 = model config, else cores/workers)");
ABSL_FLAG(int64_t, max_message_bytes, 64 << 20,
          "serve: largest gRPC message accepted or sent (the admin listener's update "
          "messages too)");
ABSL_FLAG(int64_t, max_inflight_request_bytes, int64_t{256} << 20,
          "serve: most bytes of Score requests held at once, server-wide (each counted at its "
          "wire size, then at the memory its parsed message and response take); a request "
          "past it is answered RESOURCE_EXHAUSTED at once, before it is parsed (0 = no limit; "
          "else at least --max_message_bytes, so that any accepted message can be admitted)");
ABSL_FLAG(int, metrics_threads, 8,
          "serve: threads serving /metrics; each open connection holds one, idle ones for at "
          "most --metrics_request_timeout_ms");
ABSL_FLAG(int, metrics_request_timeout_ms, 2000,
          "serve: /metrics closes a connection that sends or reads nothing for this long (ms), "
          "so idle or half-open connections cannot hold its threads");
ABSL_FLAG(double, max_connection_age_s, 300,
          "serve: send GOAWAY to a client connection of the public gRPC port once it is this "
          "old (+-10% jitter), so clients reconnect and new replicas behind a load balancer get "
          "their share; RPCs in flight finish (0 = never)");
ABSL_FLAG(double, max_connection_age_grace_s, 30,
          "serve: after the age GOAWAY, how long RPCs in flight on the connection may take "
          "before it is closed");
ABSL_FLAG(double, keepalive_time_s, 60,
          "serve: ping a public connection quiet for this long and close it when no answer "
          "comes within --keepalive_timeout_s (0 = gRPC's default, 2 hours)");
ABSL_FLAG(double, keepalive_timeout_s, 20, "serve: see --keepalive_time_s");
ABSL_FLAG(double, keepalive_min_client_interval_s, 10,
          "serve: keepalive enforcement: clients pinging more often than this without RPC data "
          "get GOAWAY too_many_pings");
ABSL_FLAG(bool, keepalive_permit_without_calls, true,
          "serve: accept client keepalive pings on connections without RPCs in flight");
ABSL_FLAG(int, max_concurrent_streams, 0,
          "serve: calls one client connection may have open at once on the public port (HTTP/2 "
          "max concurrent streams; 0 = no limit): under overload the excess waits in the "
          "clients' channels instead of the server's transport");
ABSL_FLAG(int, max_candidates, 16384, "serve: most candidates in one request (0 = no limit)");
ABSL_FLAG(int64_t, max_ids_per_feature, 1 << 20,
          "serve: most ids of one sparse feature in one request (0 = no limit)");
ABSL_FLAG(double, max_abs_input, 1e9,
          "serve: largest |value| of a dense feature or per-id weight in a request; larger "
          "ones are refused (INVALID_ARGUMENT naming the field) because they overflow the "
          "model's float32 arithmetic to NaN (0 = no bound; values must be finite anyway)");
ABSL_FLAG(absl::Duration, drain_timeout, absl::Seconds(30),
          "serve: on SIGTERM, longest wait for admitted requests before exiting");
ABSL_FLAG(std::string, log_level, "info", "serve: trace | debug | info | warn | error");
ABSL_FLAG(std::string, model_control, "poll",
          "serve: none (load every version at start, any failure fails the start, nothing "
          "changes after) | poll (re-read --model_root every --repository_poll_s and on SIGHUP: "
          "load new versions, unload those the policy drops) | explicit (load --load_model at "
          "start, then only what the admin API asks)");
ABSL_FLAG(double, repository_poll_s, 5, "serve: seconds between repository polls (poll mode)");
ABSL_FLAG(std::string, load_model, "",
          "serve: explicit mode: models to load at start, comma-separated (* = every model)");
ABSL_FLAG(bool, exit_on_load_error, false,
          "serve: poll / explicit mode: a version that fails to load at start fails the start "
          "(none mode always does)");
ABSL_FLAG(std::string, version_transition, "availability",
          "serve: availability (a new version loads beside the old one, which serves until the "
          "new one is ready; refused with both sizes if it does not fit) | resource (the old "
          "versions it replaces are drained and unloaded first; requests in between get "
          "UNAVAILABLE)");
ABSL_FLAG(std::string, admin_host, "127.0.0.1",
          "serve: address of the admin listener (rankd.v1.ModelControl); keep it on loopback "
          "unless the network in front of it is trusted");
ABSL_FLAG(int, admin_port, 8503, "serve: admin gRPC port (0 = any free port, -1 = off)");
ABSL_FLAG(std::string, tls_cert_file, "",
          "serve: PEM certificate chain of the gRPC listeners (public and admin): TLS when set "
          "(with --tls_key_file); re-read every --tls_reload_s, so a renewed certificate "
          "written in place is served without a restart");
ABSL_FLAG(std::string, tls_key_file, "", "serve: PEM private key of --tls_cert_file");
ABSL_FLAG(std::string, tls_client_ca_file, "",
          "serve: PEM CAs of client certificates: mTLS (every client must present a "
          "certificate they signed); Kubernetes probes use --health_port");
ABSL_FLAG(int, tls_reload_s, 10, "serve: seconds between re-reads of the TLS files");
ABSL_FLAG(std::string, admin_token_file, "",
          "serve: file holding a bearer token every admin call must carry "
          "(\"authorization: Bearer <token>\"; rankctl --token_file); re-read when it changes. "
          "An admin listener off loopback needs this or mTLS");
ABSL_FLAG(int, health_port, -1,
          "serve: plaintext port serving only grpc.health.v1 (and reflection), for Kubernetes "
          "gRPC probes when the public port requires mTLS (0 = any free port, -1 = off); "
          "binds --host");
ABSL_FLAG(std::string, metrics_host, "",
          "serve: address of the /metrics listener (default: --host); 127.0.0.1 keeps metrics "
          "on loopback");
ABSL_FLAG(std::string, update_log_dir, "",
          "serve: directory of the models' update logs (<model>.updlog; created if missing): "
          "every embedding update is synced there before it is acknowledged and replayed when "
          "a version loads, so a restart loses none; a snapshot truncates it. Empty = off: "
          "updates since the last snapshot are lost at a restart");

namespace rankd::server {
namespace {

ConnectionOptions ConnectionOptionsFromFlags() {
  ConnectionOptions o;
  o.max_connection_age_s = absl::GetFlag(FLAGS_max_connection_age_s);
  o.max_connection_age_grace_s = absl::GetFlag(FLAGS_max_connection_age_grace_s);
  o.keepalive_time_s = absl::GetFlag(FLAGS_keepalive_time_s);
  o.keepalive_timeout_s = absl::GetFlag(FLAGS_keepalive_timeout_s);
  o.keepalive_min_client_interval_s = absl::GetFlag(FLAGS_keepalive_min_client_interval_s);
  o.keepalive_permit_without_calls = absl::GetFlag(FLAGS_keepalive_permit_without_calls);
  o.max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  return o;
}

TlsFiles TlsFilesFromFlags() {
  TlsFiles files;
  files.cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  files.key_file = absl::GetFlag(FLAGS_tls_key_file);
  files.client_ca_file = absl::GetFlag(FLAGS_tls_client_ca_file);
  files.reload_interval_s = absl::GetFlag(FLAGS_tls_reload_s);
  return files;
}

// "<flag>: must be in [min, max]<note>, got N" unless min <= `value` <= max.
template <typename T>
absl::Status CheckRange(absl::string_view flag, T value, T min, T max,
                        absl::string_view note = "") {
  if (value >= min && value <= max) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(flag, ": must be in [", min, ", ", max, "]", note, ", got ", value));
}

// The first failed of `checks` (in their order), else OK.
absl::Status FirstError(std::initializer_list<absl::Status> checks) {
  for (const absl::Status& s : checks) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// A listener's port (min: 0 = any free port allowed, -1 = the listener may
// also be off).
absl::Status CheckPort(absl::string_view flag, int port, int min) {
  return CheckRange(flag, port, min, 65535);
}

// --max_message_bytes: gRPC's message size limits are ints.
absl::Status CheckMessageSizeFlag() {
  return CheckRange<int64_t>("--max_message_bytes", absl::GetFlag(FLAGS_max_message_bytes), 1024,
                             (int64_t{1} << 31) - 1);
}

// The model workers' flags, and the request-size limits that share their
// ">= 0" message.
absl::Status CheckWorkerFlags() {
  if (absl::GetFlag(FLAGS_max_candidates) < 0 || absl::GetFlag(FLAGS_max_ids_per_feature) < 0) {
    return absl::InvalidArgumentError("--max_candidates and --max_ids_per_feature must be >= 0");
  }
  const std::string update_priority = absl::GetFlag(FLAGS_update_cpu_priority);
  if (update_priority != "idle" && update_priority != "normal") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--update_cpu_priority: must be idle or normal, got \"",
        engine::TruncateForError(update_priority), "\""));
  }
  return FirstError({
      CheckRange("--workers", absl::GetFlag(FLAGS_workers), 0, engine::kMaxWorkersPerDevice,
                 " (0 = model config)"),
      CheckRange("--cpu_threads", absl::GetFlag(FLAGS_cpu_threads), 0,
                 engine::kMaxCpuThreadsPerWorker, " (0 = model config, else cores / workers)"),
      CheckRange("--completion_threads", absl::GetFlag(FLAGS_completion_threads), 0, 256),
      CheckRange("--rpc_threads", absl::GetFlag(FLAGS_rpc_threads), -1, 64,
                 " (-1 = callback API, 0 = automatic)"),
      CheckRange("--cpu_compute_nice", absl::GetFlag(FLAGS_cpu_compute_nice), 0, 19),
      CheckRange("--gpu_pack_threads", absl::GetFlag(FLAGS_gpu_pack_threads), -1, 64,
                 " (-1 = default, 0 = none)"),
      CheckRange<int64_t>("--host_staging_mib", absl::GetFlag(FLAGS_host_staging_mib), 0, 1024),
      CheckRange<int64_t>("--worker_spin_us", absl::GetFlag(FLAGS_worker_spin_us), -1, 10000,
                          " (-1 = the backend's default)"),
  });
}

// --max_inflight_request_bytes: a budget below one message could never
// admit the largest message gRPC accepts.
absl::Status CheckInflightBudgetFlag() {
  const int64_t max_msg = absl::GetFlag(FLAGS_max_message_bytes);
  const int64_t max_inflight = absl::GetFlag(FLAGS_max_inflight_request_bytes);
  if (max_inflight != 0 && max_inflight < max_msg) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_inflight_request_bytes: must be 0 (no limit) or at least --max_message_bytes (",
        max_msg, "), got ", max_inflight));
  }
  return absl::OkStatus();
}

// The /metrics listener's threads and idle-connection timeout.
absl::Status CheckMetricsListenerFlags() {
  return FirstError({
      CheckRange("--metrics_threads", absl::GetFlag(FLAGS_metrics_threads), 1, 256),
      CheckRange("--metrics_request_timeout_ms", absl::GetFlag(FLAGS_metrics_request_timeout_ms),
                 100, 600000),
  });
}

// --max_abs_input (float32's range) and --drain_timeout.
absl::Status CheckInputBoundAndDrainFlags() {
  const double max_abs_input = absl::GetFlag(FLAGS_max_abs_input);
  if (!(max_abs_input >= 0 && max_abs_input <= 3.4e38)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_abs_input: must be in [0, 3.4e38], got ", max_abs_input));
  }
  if (absl::GetFlag(FLAGS_drain_timeout) < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--drain_timeout: must be >= 0");
  }
  return absl::OkStatus();
}

// --backend and the GPU backend's flags (parsed again, unchecked, by
// LoaderOptionsFromFlags).
absl::Status CheckBackendFlags() {
  const std::string backend = absl::GetFlag(FLAGS_backend);
  if (backend != "auto" && backend != "cpu" && backend != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("--backend: expected auto, cpu or cuda, got \"", backend, "\""));
  }
  if (auto cm = engine::gpu::ParseCrossMath(absl::GetFlag(FLAGS_gpu_cross_math)); !cm.ok()) {
    return cm.status();
  }
  if (auto math = engine::gpu::ParseMath(absl::GetFlag(FLAGS_gpu_math)); !math.ok()) {
    return math.status();
  }
  {
    auto budget = engine::ParseMemoryBudget("--device_memory_budget",
                                            absl::GetFlag(FLAGS_device_memory_budget));
    if (!budget.ok()) return budget.status();
  }
  return CheckRange("--gpu_workers", absl::GetFlag(FLAGS_gpu_workers), 0,
                    engine::kMaxWorkersPerDevice, " (0 = model config, else 2)");
}

// --model_control and the flags that go with its modes; warns (without
// failing) about explicit mode with nothing to load.
absl::Status CheckModelControlFlags() {
  const std::string control = absl::GetFlag(FLAGS_model_control);
  if (control != "none" && control != "poll" && control != "explicit") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--model_control: expected none, poll or explicit, got \"", control, "\""));
  }
  if (absl::Status s =
          CheckRange("--repository_poll_s", absl::GetFlag(FLAGS_repository_poll_s), 0.1, 86400.0);
      !s.ok()) {
    return s;
  }
  if (control == "explicit" && absl::GetFlag(FLAGS_load_model).empty()) {
    spdlog::warn("--model_control explicit with no --load_model: nothing is loaded until the "
                 "admin API asks");
  }
  if (control != "explicit" && !absl::GetFlag(FLAGS_load_model).empty()) {
    return absl::InvalidArgumentError("--load_model: only with --model_control explicit");
  }
  const std::string transition = absl::GetFlag(FLAGS_version_transition);
  if (transition != "availability" && transition != "resource") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--version_transition: expected availability or resource, got \"", transition, "\""));
  }
  return absl::OkStatus();
}

absl::Status CheckLogLevelFlag() {
  const std::string level = absl::GetFlag(FLAGS_log_level);
  if (spdlog::level::from_str(level) == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(absl::StrCat("--log_level: unknown level \"", level, "\""));
  }
  return absl::OkStatus();
}

// Off loopback the admin API changes what is served: it must not be open.
absl::Status CheckAdminExposureFlags() {
  const std::string admin_host = absl::GetFlag(FLAGS_admin_host);
  const bool loopback = admin_host == "127.0.0.1" || admin_host == "::1" ||
                        admin_host == "[::1]" || admin_host == "localhost";
  if (absl::GetFlag(FLAGS_admin_port) >= 0 && !loopback &&
      absl::GetFlag(FLAGS_admin_token_file).empty() &&
      absl::GetFlag(FLAGS_tls_client_ca_file).empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--admin_host: ", admin_host, " is not loopback: give --admin_token_file or mTLS "
        "(--tls_client_ca_file), or keep the admin listener on 127.0.0.1"));
  }
  return absl::OkStatus();
}

// Every serve flag, group by group; the first bad one is reported. The
// groups run in this fixed order, so that with several bad flags the one
// named stays the same from release to release.
absl::Status CheckFlags() {
  using Check = absl::Status (*)();
  const Check checks[] = {
      [] { return CheckPort("--grpc_port", absl::GetFlag(FLAGS_grpc_port), 0); },
      [] { return CheckPort("--metrics_port", absl::GetFlag(FLAGS_metrics_port), -1); },
      CheckMessageSizeFlag,
      CheckWorkerFlags,
      CheckInflightBudgetFlag,
      CheckMetricsListenerFlags,
      [] { return ValidateConnectionOptions(ConnectionOptionsFromFlags()); },
      CheckInputBoundAndDrainFlags,
      CheckBackendFlags,
      [] { return CheckPort("--admin_port", absl::GetFlag(FLAGS_admin_port), -1); },
      CheckModelControlFlags,
      CheckLogLevelFlag,
      [] { return CheckPort("--health_port", absl::GetFlag(FLAGS_health_port), -1); },
      [] { return ValidateTlsFiles(TlsFilesFromFlags()); },
      CheckAdminExposureFlags,
  };
  for (const Check check : checks) {
    if (absl::Status s = check(); !s.ok()) return s;
  }
  return absl::OkStatus();
}


// --worker_spin_us=-1 with the CUDA backend. A GPU worker's batch is short
// and its thread mostly waits, so spinning through the gap between
// back-to-back requests removes the worker's wake-up from each request's
// latency (docs/benchmarks.md, "Per-request host path").
constexpr int64_t kCudaWorkerSpinUs = 1000;

EngineVersionLoader::Options LoaderOptionsFromFlags(const std::string& backend) {
  EngineVersionLoader::Options o;
  o.workers_per_model = absl::GetFlag(FLAGS_workers);
  o.cpu_threads_per_worker = absl::GetFlag(FLAGS_cpu_threads);
  o.completion_threads = absl::GetFlag(FLAGS_completion_threads);
  o.complete_inline_when_idle = absl::GetFlag(FLAGS_completion_inline_when_idle);
  o.cpu_compute_nice = absl::GetFlag(FLAGS_cpu_compute_nice);
  o.idle_priority_update_staging = absl::GetFlag(FLAGS_update_cpu_priority) == "idle";
  o.worker_spin_us = absl::GetFlag(FLAGS_worker_spin_us);
  if (o.worker_spin_us < 0) o.worker_spin_us = backend == "cuda" ? kCudaWorkerSpinUs : 0;
  o.backend = backend;
  // Each value was checked by ValidateFlags.
  engine::gpu::Options& gpu = o.gpu;
  gpu.workers_per_device = absl::GetFlag(FLAGS_gpu_workers);
  gpu.math = *engine::gpu::ParseMath(absl::GetFlag(FLAGS_gpu_math));
  gpu.cross_math = *engine::gpu::ParseCrossMath(absl::GetFlag(FLAGS_gpu_cross_math));
  gpu.use_graphs = absl::GetFlag(FLAGS_gpu_graphs);
  gpu.host_staging_bytes = absl::GetFlag(FLAGS_host_staging_mib) << 20;
  gpu.shared_host_cache = absl::GetFlag(FLAGS_host_cache_shared);
  gpu.pack_threads = absl::GetFlag(FLAGS_gpu_pack_threads);
  gpu.budget = *engine::ParseMemoryBudget("--device_memory_budget",
                                          absl::GetFlag(FLAGS_device_memory_budget));
  return o;
}

ModelManager::Options ManagerOptionsFromFlags() {
  ModelManager::Options o;
  o.model_root = absl::GetFlag(FLAGS_model_root);
  const std::string control = absl::GetFlag(FLAGS_model_control);
  o.mode = control == "none"     ? ModelManager::Mode::kNone
           : control == "explicit" ? ModelManager::Mode::kExplicit
                                   : ModelManager::Mode::kPoll;
  o.transition = absl::GetFlag(FLAGS_version_transition) == "resource"
                     ? ModelManager::Transition::kResource
                     : ModelManager::Transition::kAvailability;
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_load_model), ',', absl::SkipWhitespace())) {
    o.load_models.emplace_back(absl::StripAsciiWhitespace(name));
  }
  o.exit_on_load_error = absl::GetFlag(FLAGS_exit_on_load_error);
  o.drain_timeout = absl::GetFlag(FLAGS_drain_timeout);
  o.update_log_dir = absl::GetFlag(FLAGS_update_log_dir);
  return o;
}

// A gRPC server listening on `address` alone with `credentials`, serving
// `service` (null: only the process-wide plugins, health and reflection).
// Null after logging "<port_flag>: cannot listen on <address>".
// `max_message_bytes` > 0: the listener's receive limit (else gRPC's 4 MiB).
std::unique_ptr<grpc::Server> StartListener(const char* port_flag, const std::string& address,
                                            std::shared_ptr<grpc::ServerCredentials> credentials,
                                            grpc::Service* service, int* port,
                                            int max_message_bytes = 0) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, std::move(credentials), port);
  if (max_message_bytes > 0) builder.SetMaxReceiveMessageSize(max_message_bytes);
  if (service != nullptr) builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *port == 0) {
    spdlog::error("{}: cannot listen on {}", port_flag, address);
    return nullptr;
  }
  return server;
}

// The admin listener: ModelControl, health and reflection (the process-wide
// plugins the public server enabled apply here too). Null after logging why.
// The listener uses the public port's TLS settings (mTLS included) and its
// --max_message_bytes, so producers may send update messages larger than
// gRPC's default 4 MiB.
std::unique_ptr<grpc::Server> StartAdminServer(ModelControlService* control, int* port) {
  return StartListener(
      "--admin_port",
      absl::StrCat(absl::GetFlag(FLAGS_admin_host), ":", absl::GetFlag(FLAGS_admin_port)),
      MakeServerCredentials(TlsFilesFromFlags()), control, port,
      static_cast<int>(absl::GetFlag(FLAGS_max_message_bytes)));
}

// The plaintext health listener (--health_port): grpc.health.v1 only (and
// reflection, a process-wide plugin), so Kubernetes' gRPC probes, which
// present no client certificate, work when the public port wants mTLS.
// Null after logging why.
std::unique_ptr<grpc::Server> StartHealthServer(const std::string& host, int* port) {
  return StartListener("--health_port", absl::StrCat(host, ":", absl::GetFlag(FLAGS_health_port)),
                       grpc::InsecureServerCredentials(), nullptr, port);
}

void WritePortFile(int grpc_port, int metrics_port, int admin_port, int health_port,
                   int http_port) {
  const std::string port_file = absl::GetFlag(FLAGS_port_file);
  if (port_file.empty()) return;
  std::ofstream f(port_file + ".tmp");
  f << "grpc_port=" << grpc_port << "\nmetrics_port=" << metrics_port
    << "\nadmin_port=" << admin_port << "\nhealth_port=" << health_port
    << "\nhttp_port=" << http_port << "\n";
  f.close();
  std::rename((port_file + ".tmp").c_str(), port_file.c_str());
}

// The process's signals, handled on one thread for the process's whole life.
// RunServe blocks them in every thread before any thread starts, so only
// this thread's sigwait receives them:
// - SIGHUP: poll the repository now (`poll_mode`); one that arrives while
//   the models load at start is kept and polls once the poller is set.
// - SIGTERM / SIGINT: the first sets the stop flag, which every model load
//   reads as its cancel flag (LoadOptions::cancel: a load in progress stops
//   within one 8 MiB chunk, so a start-up load no longer delays the exit),
//   and wakes WaitForStop. A second one exits at once with status 1,
//   without draining, for when even that is too slow (e.g. a load stuck in
//   a read of a hung network file system).
// Made once and never destroyed: the detached thread blocks in sigwait until
// the process exits and uses nothing but this object.
class SignalWatcher {
 public:
  static SignalWatcher* Start(const sigset_t& signals, bool poll_mode) {
    auto* watcher = new SignalWatcher(signals, poll_mode);  // lives until exit
    std::thread(&SignalWatcher::Run, watcher).detach();
    return watcher;
  }

  const std::atomic<bool>* stop_flag() const { return &stop_; }
  bool stop_requested() const { return stop_.load(); }
  // "SIGTERM" or "SIGINT" once stop_requested().
  const char* stop_signal_name() const {
    return stop_signal_.load() == SIGINT ? "SIGINT" : "SIGTERM";
  }
  void WaitForStop() { stopped_.WaitForNotification(); }
  // The poller SIGHUP kicks; null (before it is destroyed) = none.
  void SetPoller(RepositoryPoller* poller) {
    absl::MutexLock lock(&mu_);
    poller_ = poller;
    if (poller_ != nullptr && kick_pending_) poller_->Kick();
    kick_pending_ = false;
  }

 private:
  SignalWatcher(const sigset_t& signals, bool poll_mode)
      : signals_(signals), poll_mode_(poll_mode) {}

  void OnSighup() {
    absl::MutexLock lock(&mu_);
    if (!poll_mode_) {
      spdlog::info("SIGHUP received: ignored (--model_control is not poll)");
    } else if (poller_ == nullptr) {
      kick_pending_ = true;
      spdlog::info("SIGHUP received: the model repository is polled once serving");
    } else {
      spdlog::info("SIGHUP received: polling the model repository now");
      poller_->Kick();
    }
  }

  void Run() {
    while (true) {
      int signal_number = 0;
      if (sigwait(&signals_, &signal_number) != 0) continue;
      if (signal_number == SIGHUP) {
        OnSighup();
        continue;
      }
      const char* name = signal_number == SIGINT ? "SIGINT" : "SIGTERM";
      if (stop_.load()) {
        spdlog::warn("second stop signal ({}): exiting now without draining", name);
        spdlog::default_logger()->flush();
        _exit(1);
      }
      stop_signal_.store(signal_number);
      stop_.store(true);  // loads in progress stop at their next check
      spdlog::info("{}: stop requested (model loads in progress are cancelled; a second "
                   "SIGTERM or SIGINT exits at once)",
                   name);
      stopped_.Notify();
    }
  }

  const sigset_t signals_;
  const bool poll_mode_;
  std::atomic<bool> stop_{false};
  std::atomic<int> stop_signal_{0};
  absl::Notification stopped_;
  absl::Mutex mu_;
  RepositoryPoller* poller_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool kick_pending_ ABSL_GUARDED_BY(mu_) = false;  // SIGHUP before the poller
};

// Lifecycle events -> metrics and per-model health. Health calls arrive only
// after SetHealth (the gRPC server exists then).
class ServerLifecycle final : public ModelManager::Listener {
 public:
  explicit ServerLifecycle(Metrics* metrics) : metrics_(metrics) {}

  void OnVersionReady(const std::string& model, int64_t version) override {
    metrics_->AddVersion(model, version);
  }
  void OnVersionUnloaded(const std::string& model, int64_t version) override {
    metrics_->RemoveVersion(model, version);
  }
  void OnLoadFinished(const std::string& model, int64_t, bool ok, double seconds) override {
    metrics_->RecordModelLoad(model, ok, seconds);
  }
  void OnVersionStates(const std::string& model,
                       const std::map<VersionState, int>& counts) override {
    std::map<std::string, int> named;
    for (const auto& [state, n] : counts) {
      named[absl::AsciiStrToLower(VersionStateName(state))] = n;
    }
    metrics_->SetVersionStates(model, named);
  }
  void OnUpdateLogBytes(const std::string& model, int64_t bytes) override {
    metrics_->SetUpdateLogBytes(model, bytes);
  }
  void OnDynamicTableKeys(const std::string& model, const std::string& table, int64_t keys,
                          int64_t max_keys) override {
    metrics_->OnDynamicTableKeys(model, table, keys, max_keys);
  }
  void OnModelServing(const std::string& model, bool serving) override {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    for (grpc::HealthCheckServiceInterface* h : health_) h->SetServingStatus(model, serving);
  }

  // Every service SERVING, each known model by whether a version is READY.
  // Called once per listener that serves health (public, --health_port).
  void SetHealth(grpc::HealthCheckServiceInterface* health, const ModelManager& manager) {
    absl::MutexLock lock(&mu_);
    health_.push_back(health);
    health->SetServingStatus(true);
    auto list = manager.List("");
    for (const auto& m : list->models()) {
      bool ready = false;
      for (const auto& v : m.versions()) ready |= v.state() == rankd::v1::READY;
      health->SetServingStatus(m.name(), ready);
    }
  }
  // Every service NOT_SERVING for good (the server is stopping).
  void StopServing() {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (grpc::HealthCheckServiceInterface* h : health_) {
      h->SetServingStatus(false);  // every service
    }
  }

 private:
  Metrics* const metrics_;
  absl::Mutex mu_;
  std::vector<grpc::HealthCheckServiceInterface*> health_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

// The SIGTERM / SIGINT drain; never returns (exits 0).
// 1. Health turns NOT_SERVING and Score stops admitting: every request that
//    arrives from now on is answered UNAVAILABLE at once (retryable: the
//    client's retry goes to another replica), so no request is left without
//    an answer or answered CANCELLED.
// 2. Admitted requests (queued, computing) are computed and their answers
//    written, for up to --drain_timeout.
// 3. The admin listener and the models are shut down, and the process exits
//    without calling the public grpc::Server's Shutdown: gRPC C++'s
//    Shutdown answers every call that reaches the server after it begins
//    (clients keep sending until they see its GOAWAY) by destroying it,
//    which the client sees as CANCELLED, a code clients do not retry. The
//    process exit closes the connections instead; a client sees UNAVAILABLE
//    for anything it sent in that instant. Admitted requests were answered
//    in step 2 (their answers are written before the count drops).
[[noreturn]] void DrainAndExit(const char* signal_name, ServerLifecycle* lifecycle,
                               RankingService* service, RepositoryPoller* poller,
                               SignalWatcher* signals, grpc::Server* admin,
                               HttpServer* http, ModelManager* manager) {
  const absl::Duration drain = absl::GetFlag(FLAGS_drain_timeout);
  const absl::Time drain_start = absl::Now();
  spdlog::info("{} received: not serving, draining admitted requests (up to {}); new requests "
               "are answered UNAVAILABLE",
               signal_name, absl::FormatDuration(drain));
  lifecycle->StopServing();
  service->StopAdmitting();
  signals->SetPoller(nullptr);
  if (poller != nullptr) poller->Stop();  // waits for a poll in progress, whose loads are cancelled
  if (!service->WaitForAdmitted(drain_start + drain)) {
    spdlog::warn("--drain_timeout ({}) passed with {} admitted request(s) unanswered; their "
                 "clients see UNAVAILABLE when the connections close",
                 absl::FormatDuration(drain), service->requests_in_flight());
  }
  // Answers of the HTTP requests admitted are written: Stop lets each
  // connection finish the answer it is writing, then closes them all.
  if (http != nullptr) http->Stop();
  if (admin != nullptr) admin->Shutdown(absl::ToChronoTime(absl::Now()));
  manager->Shutdown();
  spdlog::info("drained in {:.3f} s; exiting", absl::ToDoubleSeconds(absl::Now() - drain_start));
  spdlog::default_logger()->flush();
  std::fflush(nullptr);
  _exit(0);
}

// Blocks the stop signals (and SIGHUP) in the calling thread, which must be
// the first: every thread started later inherits the mask, so only the
// SignalWatcher's sigwait sees them. Then starts the watcher.
SignalWatcher* BlockSignalsAndStartWatcher() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);  // poll the repository now
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  return SignalWatcher::Start(stop_signals, absl::GetFlag(FLAGS_model_control) == "poll");
}

// Debian's abseil is built without NDEBUG, so every absl::Mutex::Lock (ours
// and gRPC's: gpr mutexes are absl::Mutex) runs the deadlock detector: a
// global graph lock, a per-thread held-locks list and graph updates on each
// lock and mutex destruction. perf showed it on the request path
// (GraphCycles::GetId / RemoveNode); tests keep the detector on.
void TurnOffMutexDeadlockDetection() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

// --log_level and the line format; protobuf's own log lines go to spdlog.
void SetUpLogging() {
  spdlog::set_level(spdlog::level::from_str(absl::GetFlag(FLAGS_log_level)));
  // Client-triggered protobuf lines (invalid UTF-8 in a request) are bounded.
  RouteProtobufLogsToSpdlog();
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %v");
}

// The backend to serve on and the GPUs this build can use.
struct BackendChoice {
  std::string backend;     // "cpu" or "cuda" (--backend=auto resolved)
  int gpus = 0;            // usable GPUs
  std::string why_no_gpu;  // why there are none, when gpus is 0
};

// Resolves --backend=auto (cuda when a usable GPU is present) and logs the
// start-up lines; nullopt after logging why when --backend=cuda has no GPU.
std::optional<BackendChoice> ChooseBackend() {
  BackendChoice choice;
  choice.backend = absl::GetFlag(FLAGS_backend);
  choice.gpus = engine::gpu::UsableGpus(&choice.why_no_gpu);
  if (choice.backend == "auto") {
    choice.backend = choice.gpus > 0 ? "cuda" : "cpu";
    // A GPU that is there but cannot run this build deserves a warning; a
    // machine without GPU or driver is the normal CPU case.
    if (absl::StrContains(choice.why_no_gpu, "no kernel image")) {
      spdlog::warn("--backend=auto: serving on the CPU: {}", choice.why_no_gpu);
    }
  }
  if (choice.backend == "cuda" && choice.gpus == 0) {
    spdlog::error("--backend=cuda: no usable GPU ({})", choice.why_no_gpu);
    return std::nullopt;
  }
  spdlog::info("rankd {} starting: backend {} ({} GPU(s){}), model root {}", kRankdVersion,
               choice.backend, choice.gpus, choice.gpus == 0 ? ": " + choice.why_no_gpu : "",
               absl::GetFlag(FLAGS_model_root));
  spdlog::info("{}", engine::DescribeHostResources());
  return choice;
}

// Serves /metrics on --metrics_host (default `host`):--metrics_port, unless
// that is -1. False after logging why it cannot listen.
bool StartMetricsExposer(const std::string& host, Metrics* metrics) {
  if (absl::GetFlag(FLAGS_metrics_port) < 0) return true;
  Metrics::ExposerOptions exposer;
  exposer.num_threads = absl::GetFlag(FLAGS_metrics_threads);
  exposer.request_timeout_ms = absl::GetFlag(FLAGS_metrics_request_timeout_ms);
  const std::string metrics_host =
      absl::GetFlag(FLAGS_metrics_host).empty() ? host : absl::GetFlag(FLAGS_metrics_host);
  absl::Status s = metrics->StartExposer(
      absl::StrCat(metrics_host, ":", absl::GetFlag(FLAGS_metrics_port)), exposer);
  if (!s.ok()) {
    spdlog::error("{}", std::string(s.message()));
    return false;
  }
  spdlog::info("metrics on http://{}:{}/metrics", metrics_host, metrics->exposer_port());
  return true;
}

// Loads the models rankd starts with (ModelManager::Start). Returns the exit
// code when rankd must not go on to serve: 0 when a stop signal came during
// the loads, 1 when they failed; nullopt to serve.
std::optional<int> LoadModelsAtStart(ModelManager* manager, const SignalWatcher* signals) {
  absl::Status started = manager->Start();
  if (signals->stop_requested()) {
    // Nothing was admitted yet: nothing to drain. Loads still running when
    // the signal came were cancelled; loaded versions are released.
    spdlog::info("{} received while loading models: exiting without serving",
                 signals->stop_signal_name());
    manager->Shutdown();
    return 0;
  }
  if (!started.ok()) {
    spdlog::error("cannot load models: {}", std::string(started.message()));
    return 1;
  }
  return std::nullopt;
}

RankingService::Options RankingOptionsFromFlags(const std::string& backend) {
  RankingService::Options o;
  o.limits.max_candidates = absl::GetFlag(FLAGS_max_candidates);
  o.limits.max_ids_per_feature = absl::GetFlag(FLAGS_max_ids_per_feature);
  o.limits.max_abs_input = static_cast<float>(absl::GetFlag(FLAGS_max_abs_input));
  o.backend = backend;
  o.max_inflight_request_bytes = absl::GetFlag(FLAGS_max_inflight_request_bytes);
  return o;
}

// KServe v2's options: the same request limits as rankd.v1.Ranking, and
// "rankd_<backend>" as the platform reported.
KServeService::Options KServeOptions(const RankingService::Options& service_options) {
  KServeService::Options o;
  o.limits = service_options.limits;
  o.platform = absl::StrCat("rankd_", service_options.backend);
  return o;
}

// --rpc_threads: the completion-queue front's options, or nullopt for the
// callback API.
std::optional<RankingCqFront::Options> CqFrontOptionsFromFlags() {
  const int threads = absl::GetFlag(FLAGS_rpc_threads);
  if (threads < 0) return std::nullopt;
  RankingCqFront::Options o;
  o.threads = threads > 0 ? threads : std::clamp(engine::UsableCpus() / 2, 2, 8);
  return o;
}

// The public gRPC listener (--host:--grpc_port): rankd.v1.Ranking and KServe
// v2 (with --rpc_threads >= 0, Ranking and ModelInfer through the
// completion-queue front, made into `*front`), with health and reflection
// (process-wide plugins, enabled here, so the admin and health listeners
// built later have them too). Null after logging why it cannot listen;
// `*port` is the port it bound. The caller keeps `*front` alive longer than
// the server.
std::unique_ptr<grpc::Server> StartPublicServer(const std::string& host, const TlsFiles& tls,
                                                RankingService* service, KServeService* kserve,
                                                std::unique_ptr<RankingCqFront>* front,
                                                int* port) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  const std::string address = absl::StrCat(host, ":", absl::GetFlag(FLAGS_grpc_port));
  builder.AddListeningPort(address, MakeServerCredentials(tls), port);
  const int max_msg = static_cast<int>(absl::GetFlag(FLAGS_max_message_bytes));
  builder.SetMaxReceiveMessageSize(max_msg);
  builder.SetMaxSendMessageSize(max_msg);
  ApplyConnectionOptions(ConnectionOptionsFromFlags(), &builder);
  // Second line behind --max_inflight_request_bytes: rankd admits a request
  // only once gRPC has received all of it, so many large messages arriving
  // at once are buffered by gRPC's transport before any admission check.
  // gRPC's memory quota bounds those buffers, at twice the admission budget
  // (requests being received plus requests admitted); under its pressure
  // the transport resets streams still arriving (the client sees
  // RESOURCE_EXHAUSTED, "RST_STREAM with error code 11"; rankd never sees
  // them, so they are not in its metrics).
  const int64_t inflight_bytes = absl::GetFlag(FLAGS_max_inflight_request_bytes);
  if (inflight_bytes > 0) {
    grpc::ResourceQuota quota("rankd-public");
    quota.Resize(static_cast<size_t>(
        std::min<int64_t>(2 * inflight_bytes, std::numeric_limits<int64_t>::max() / 2)));
    builder.SetResourceQuota(quota);
  }
  if (std::optional<RankingCqFront::Options> cq = CqFrontOptionsFromFlags()) {
    absl::StatusOr<std::unique_ptr<RankingCqFront>> made =
        RankingCqFront::Create(service, kserve, *cq, &builder);
    if (!made.ok()) {
      spdlog::error("--rpc_threads: {}", std::string(made.status().message()));
      return nullptr;
    }
    *front = *std::move(made);
    spdlog::info("rankd.v1.Ranking and KServe ModelInfer on {} completion-queue thread(s) "
                 "(--rpc_threads)",
                 cq->threads);
  } else {
    builder.RegisterService(service);
    builder.RegisterService(kserve);
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *port == 0) {
    spdlog::error("--grpc_port: cannot listen on {}", address);
    return nullptr;
  }
  if (*front != nullptr) (*front)->Start();
  return server;
}

// The HTTP listener's options: the public port's host, request limits and
// TLS, with --http_*.
HttpServer::Options HttpOptionsFromFlags(const std::string& host, const std::string& platform,
                                         const engine::RequestLimits& limits,
                                         const TlsFiles& tls) {
  HttpServer::Options o;
  o.host = host;
  o.port = absl::GetFlag(FLAGS_http_port);
  o.max_threads = absl::GetFlag(FLAGS_http_max_connections);
  o.read_timeout_ms = absl::GetFlag(FLAGS_http_read_timeout_ms);
  o.keep_alive_timeout_s = absl::GetFlag(FLAGS_http_keep_alive_s);
  o.platform = platform;
  o.inference.limits = limits;
  o.inference.max_body_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  o.inference.request_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_http_request_timeout_ms));
  o.tls = tls;
  return o;
}

// The "serving" line: every listener, its port and how it is secured.
void LogServing(const ModelManager& manager, const std::string& host, int grpc_port,
                const TlsFiles& tls, const HttpServer* http, const grpc::Server* admin,
                int admin_port, const AdminAuth& auth, const grpc::Server* health,
                int health_port) {
  spdlog::info("serving {} model(s) on {}:{} (gRPC, {}){}{}{}", manager.ServedModels().size(),
               host, grpc_port, DescribeTls(tls),
               http ? absl::StrCat("; HTTP on ", host, ":", http->port(), " (",
                                   tls.enabled() ? "HTTPS" : "plaintext", ")")
                    : "",
               admin ? absl::StrCat("; admin API on ", absl::GetFlag(FLAGS_admin_host), ":",
                                    admin_port, auth.requires_token() ? " (token)" : "")
                     : "",
               health ? absl::StrCat("; plaintext health on ", host, ":", health_port) : "");
}

// --model_control poll: polls the repository every --repository_poll_s and
// on SIGHUP (a SIGHUP that came earlier polls at once); null otherwise.
std::unique_ptr<RepositoryPoller> StartRepositoryPoller(ModelManager* manager,
                                                        SignalWatcher* signals) {
  std::unique_ptr<RepositoryPoller> poller;
  if (absl::GetFlag(FLAGS_model_control) == "poll") {
    poller = std::make_unique<RepositoryPoller>(
        manager, absl::Seconds(absl::GetFlag(FLAGS_repository_poll_s)));
    signals->SetPoller(poller.get());
  }
  return poller;
}

}  // namespace

// Start-up, in order: signals blocked and watched, flags checked, logging,
// backend, /metrics, models loaded, the public gRPC listener, the admin,
// health and HTTP listeners, the port file, the repository poller; then
// serves until SIGTERM / SIGINT and drains (DrainAndExit). Everything made
// here lives in this frame until the process exits, so the services outlive
// the listeners that call them; an early return (a start-up failure)
// destroys them in reverse order of construction.
int RunServe() {
  SignalWatcher* signals = BlockSignalsAndStartWatcher();
  TurnOffMutexDeadlockDetection();
  absl::Status flags = CheckFlags();
  if (!flags.ok()) {
    std::fprintf(stderr, "rankd serve: %s\n", std::string(flags.message()).c_str());
    return 2;
  }
  SetUpLogging();
  const std::optional<BackendChoice> choice = ChooseBackend();
  if (!choice.has_value()) return 1;
  const std::string& backend = choice->backend;

  Metrics metrics(kRankdVersion, backend, engine::gpu::BuiltGpuArchs(),
                  backend == "cuda" ? "" : choice->why_no_gpu);
  const std::string host = absl::GetFlag(FLAGS_host);
  if (!StartMetricsExposer(host, &metrics)) return 1;

  EngineVersionLoader::Options loader_options = LoaderOptionsFromFlags(backend);
  loader_options.cancel = signals->stop_flag();  // SIGTERM cancels loads in progress
  EngineVersionLoader loader(loader_options, &metrics,
                             [&metrics](const engine::Model& m) { metrics.AddModel(m); });
  ServerLifecycle lifecycle(&metrics);
  auto manager = ModelManager::Create(ManagerOptionsFromFlags(), &loader, &lifecycle, nullptr);
  if (!manager.ok()) {
    spdlog::error("{}", std::string(manager.status().message()));
    return 2;
  }
  if (std::optional<int> exit_code = LoadModelsAtStart(manager->get(), signals)) {
    return *exit_code;
  }

  const RankingService::Options service_options = RankingOptionsFromFlags(backend);
  RankingService service(manager->get(), &metrics, service_options);
  const KServeService::Options kserve_options = KServeOptions(service_options);
  KServeService kserve(manager->get(), &metrics, service.budget(), kserve_options);

  const TlsFiles tls = TlsFilesFromFlags();
  int grpc_port = 0;
  std::unique_ptr<RankingCqFront> cq_front;  // outlives the server
  std::unique_ptr<grpc::Server> server =
      StartPublicServer(host, tls, &service, &kserve, &cq_front, &grpc_port);
  if (server == nullptr) return 1;
  absl::StatusOr<std::unique_ptr<AdminAuth>> auth =
      AdminAuth::Create(absl::GetFlag(FLAGS_admin_token_file));
  if (!auth.ok()) {
    spdlog::error("{}", std::string(auth.status().message()));
    return 2;
  }
  ModelControlService control(manager->get(), &metrics, auth->get());
  int admin_port = 0;
  std::unique_ptr<grpc::Server> admin;
  if (absl::GetFlag(FLAGS_admin_port) >= 0) {
    admin = StartAdminServer(&control, &admin_port);
    if (admin == nullptr) return 1;
  }
  int health_port = 0;
  std::unique_ptr<grpc::Server> health;
  if (absl::GetFlag(FLAGS_health_port) >= 0) {
    health = StartHealthServer(host, &health_port);
    if (health == nullptr) return 1;
  }
  std::unique_ptr<HttpServer> http;
  if (absl::GetFlag(FLAGS_http_port) >= 0) {
    auto started_http = HttpServer::Start(
        HttpOptionsFromFlags(host, kserve_options.platform, service_options.limits, tls),
        manager->get(), &metrics, service.budget());
    if (!started_http.ok()) {
      spdlog::error("{}", std::string(started_http.status().message()));
      return started_http.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
    }
    http = *std::move(started_http);
  }
  lifecycle.SetHealth(server->GetHealthCheckService(), **manager);
  if (health) lifecycle.SetHealth(health->GetHealthCheckService(), **manager);
  LogServing(**manager, host, grpc_port, tls, http.get(), admin.get(), admin_port, **auth,
             health.get(), health_port);
  WritePortFile(grpc_port, metrics.exposer_port(), admin_port, health_port,
                http ? http->port() : 0);

  std::unique_ptr<RepositoryPoller> poller = StartRepositoryPoller(manager->get(), signals);
  signals->WaitForStop();
  DrainAndExit(signals->stop_signal_name(), &lifecycle, &service, poller.get(), signals,
               admin.get(), http.get(), manager->get());
}

}  // namespace rankd::server
