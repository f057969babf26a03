#include "server/metrics.h"

#include <exception>

#include "absl/strings/str_cat.h"

namespace rankd::server {
namespace {

// Latency buckets (seconds): dense around the 1-50 ms SLOs ranking services set.
const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* b = new prometheus::Histogram::BucketBoundaries{
      0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  return *b;
}

// Update lag: from a few ms (a producer beside the server) to minutes (a
// backlog).
const prometheus::Histogram::BucketBoundaries& LagBuckets() {
  static const auto* b = new prometheus::Histogram::BucketBoundaries{
      0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300};
  return *b;
}

const prometheus::Histogram::BucketBoundaries& PowersOfTwo(int max_exp) {
  static auto* cache = new std::vector<prometheus::Histogram::BucketBoundaries>(32);
  auto& b = (*cache)[max_exp];
  if (b.empty()) {
    for (int e = 0; e <= max_exp; ++e) b.push_back(static_cast<double>(1LL << e));
  }
  return b;
}

// Registers the metric family `name` (described by `help`) in `registry`;
// `builder` is prometheus::BuildCounter(), BuildGauge() or BuildHistogram().
template <typename Builder>
auto* AddFamily(prometheus::Registry& registry, Builder builder, const std::string& name,
                const std::string& help) {
  return &builder.Name(name).Help(help).Register(registry);
}

const char* CodeName(absl::StatusCode code) {
  static const char* kNames[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT",
                                 "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
                                 "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                                 "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
                                 "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
                                 "UNAUTHENTICATED"};
  const int c = static_cast<int>(code);
  return (c >= 0 && c < 17) ? kNames[c] : "UNKNOWN";
}

}  // namespace

Metrics::Metrics(const std::string& build_version, const std::string& backend,
                 const std::string& cuda_archs, const std::string& gpu_note)
    : registry_(std::make_shared<prometheus::Registry>()) {
  AddRequestFamilies();
  AddBatchFamilies();
  AddModelFamilies();
  AddTableFamilies();
  AddFamily(*registry_, prometheus::BuildGauge(), "rankd_build_info",
            "Build and backend of this server (value 1).")
      ->Add({{"version", build_version},
             {"backend", backend},
             {"cuda_archs", cuda_archs},
             {"gpu", gpu_note}})
      .Set(1);
  absl::MutexLock lock(&mu_);
  FindOrAdd("");  // requests for unknown models
  FindOrAddVersion("", 0);
}

// Requests: outcomes, refusals, bytes in flight, intake and answer times.
void Metrics::AddRequestFamilies() {
  using prometheus::BuildCounter;
  using prometheus::BuildGauge;
  using prometheus::BuildHistogram;
  requests_total_ = AddFamily(*registry_, BuildCounter(), "rankd_requests_total",
                              "Inference requests finished, by model, version, gRPC status code "
                              "and protocol (rankd, kserve, kserve_http, http).");
  request_duration_ = AddFamily(*registry_, BuildHistogram(), "rankd_request_duration_seconds",
                                "Score RPC time in the server, arrival to answer.");
  requests_refused_ =
      AddFamily(*registry_, BuildCounter(), "rankd_requests_refused_total",
                "Score RPCs refused before reaching a model, by reason: malformed (not a valid "
                "ScoreRequest), inflight_bytes (--max_inflight_request_bytes), shutting_down "
                "(after SIGTERM). Also counted in rankd_requests_total.");
  refused_malformed_ = &requests_refused_->Add({{"reason", "malformed"}});
  refused_inflight_bytes_ = &requests_refused_->Add({{"reason", "inflight_bytes"}});
  refused_shutting_down_ = &requests_refused_->Add({{"reason", "shutting_down"}});
  request_bytes_in_flight_ = &AddFamily(*registry_, BuildGauge(), "rankd_request_bytes_in_flight",
                                        "Bytes of admitted Score requests not yet answered (held "
                                        "against --max_inflight_request_bytes).")
                                  ->Add({});
  intake_duration_ =
      AddFamily(*registry_, BuildHistogram(), "rankd_intake_duration_seconds",
                "Time from a gRPC Score or ModelInfer call's arrival to its model's queue: "
                "parse, validation and routing.");
  answer_duration_ =
      AddFamily(*registry_, BuildHistogram(), "rankd_answer_duration_seconds",
                "Time from the end of a gRPC Score or ModelInfer call's batch to its answer: "
                "completion hand-off, checks, metrics and serialization.");
}

// The batcher and the workers: queues, batches, candidates, ids.
void Metrics::AddBatchFamilies() {
  using prometheus::BuildCounter;
  using prometheus::BuildGauge;
  using prometheus::BuildHistogram;
  queue_duration_ = AddFamily(*registry_, BuildHistogram(), "rankd_queue_duration_seconds",
                              "Time a request waited in the batcher before its batch was cut.");
  compute_duration_ = AddFamily(*registry_, BuildHistogram(), "rankd_compute_duration_seconds",
                                "Time a worker took to score one batch.");
  batch_candidates_ = AddFamily(*registry_, BuildHistogram(), "rankd_batch_candidates",
                                "Candidates per executed batch.");
  batch_requests_ = AddFamily(*registry_, BuildHistogram(), "rankd_batch_requests",
                              "Requests per executed batch.");
  candidates_total_ =
      AddFamily(*registry_, BuildCounter(), "rankd_candidates_total", "Candidates scored.");
  batches_total_ =
      AddFamily(*registry_, BuildCounter(), "rankd_batches_total", "Batches executed.");
  nonfinite_scores_ = AddFamily(*registry_, BuildCounter(), "rankd_nonfinite_scores_total",
                                "Scores that came out NaN or Inf (float32 overflow); their "
                                "requests were answered INTERNAL, never OK.");
  queue_requests_ = AddFamily(*registry_, BuildGauge(), "rankd_queue_requests",
                              "Requests waiting in the batcher.");
  queue_candidates_ = AddFamily(*registry_, BuildGauge(), "rankd_queue_candidates",
                                "Candidates waiting in the batcher.");
  ids_out_of_range_ = AddFamily(*registry_, BuildCounter(), "rankd_ids_out_of_range_total",
                                "Ids outside a static table that pooled the default vector.");
  ids_missing_ = AddFamily(*registry_, BuildCounter(), "rankd_ids_missing_total",
                           "Keys not stored in a dynamic table that pooled the default vector.");
}

// Model versions: readiness, loads and states.
void Metrics::AddModelFamilies() {
  using prometheus::BuildCounter;
  using prometheus::BuildGauge;
  using prometheus::BuildHistogram;
  model_ready_ = AddFamily(*registry_, BuildGauge(), "rankd_model_ready",
                           "1 when the model version is loaded, warmed up and serving.");
  model_loads_ =
      AddFamily(*registry_, BuildCounter(), "rankd_model_loads_total",
                "Model version loads (files, placement, warm-up), by result: success or failed.");
  model_load_duration_ =
      AddFamily(*registry_, BuildHistogram(), "rankd_model_load_duration_seconds",
                "Time to load and warm up one model version.");
  model_versions_ =
      AddFamily(*registry_, BuildGauge(), "rankd_model_versions",
                "Versions of a model in each state (loading, ready, draining, unloaded, failed).");
}

// Embedding tables: the HBM cache, online updates, dynamic keys, update logs.
void Metrics::AddTableFamilies() {
  using prometheus::BuildCounter;
  using prometheus::BuildGauge;
  using prometheus::BuildHistogram;
  cache_hits_ = AddFamily(*registry_, BuildCounter(), "rankd_embedding_cache_hits_total",
                          "Lookups of a table in pinned host memory served from its HBM cache (0 "
                          "for tables in HBM and on the CPU backend).");
  cache_misses_ =
      AddFamily(*registry_, BuildCounter(), "rankd_embedding_cache_misses_total",
                "Lookups of a table in pinned host memory that read the row from host memory.");
  host_read_bytes_ = AddFamily(*registry_, BuildCounter(), "rankd_embedding_host_read_bytes_total",
                               "Bytes of embedding rows the GPU read from pinned host memory.");
  cache_occupancy_ = AddFamily(*registry_, BuildGauge(), "rankd_embedding_cache_occupancy_ratio",
                               "Used slots / slots of the HBM cache serving a table (shared by the "
                               "HOST tables of one row size; 0 without a cache).");
  embedding_updates_ = AddFamily(*registry_, BuildCounter(), "rankd_embedding_updates_total",
                                 "Embedding rows written by online updates (static rows, dynamic "
                                 "keys inserted or assigned), per model and table.");
  embedding_evictions_ =
      AddFamily(*registry_, BuildCounter(), "rankd_embedding_evictions_total",
                "Keys a full dynamic table dropped (lowest LRU / LFU score) for new keys.");
  embedding_update_lag_ = AddFamily(
      *registry_, BuildHistogram(), "rankd_embedding_update_lag_seconds",
      "Time from an update's producer timestamp to its application (messages with a timestamp).");
  dynamic_table_keys_ = AddFamily(*registry_, BuildGauge(), "rankd_dynamic_table_keys",
                                  "Keys a dynamic table holds (the version last updated).");
  dynamic_table_max_keys_ = AddFamily(*registry_, BuildGauge(), "rankd_dynamic_table_max_keys",
                                      "Most keys a dynamic table may hold (max_keys).");
  update_log_bytes_ = AddFamily(*registry_, BuildGauge(), "rankd_update_log_bytes",
                                "Size of a model's update log (--update_log_dir): updates since "
                                "its last truncating snapshot.");
}

absl::Status Metrics::StartExposer(const std::string& address,
                                   const ExposerOptions& options) {
  if (options.num_threads < 1 || options.request_timeout_ms < 1) {
    return absl::InvalidArgumentError(
        "metrics exposer: num_threads and request_timeout_ms must be >= 1");
  }
  // Civetweb options (prometheus-cpp passes them through). Keep-alive stays
  // off (civetweb's default, said here because it matters): a kept-alive
  // connection would hold a thread between scrapes.
  std::vector<std::string> civetweb = {
      "listening_ports", address,
      "num_threads", absl::StrCat(options.num_threads),
      "request_timeout_ms", absl::StrCat(options.request_timeout_ms),
      "enable_keep_alive", "no",
      // Closing a connection waits at most this long for the client's
      // side of the close.
      "linger_timeout_ms", "500",
  };
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(std::move(civetweb));
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("--metrics_port: cannot serve /metrics on ", address, ": ", e.what()));
  }
  exposer_->RegisterCollectable(registry_);
  return absl::OkStatus();
}

int Metrics::exposer_port() const {
  if (exposer_ == nullptr) return 0;
  auto ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports[0];
}

Metrics::ModelSeries* Metrics::Find(absl::string_view model) {
  auto it = models_.find(model);
  if (it != models_.end()) return it->second.get();
  return models_.find("")->second.get();
}

Metrics::VersionSeries* Metrics::FindVersion(absl::string_view model, int64_t version) {
  ModelSeries* m = Find(model);  // unknown models: the "" series
  auto it = m->versions.find(version);
  if (it == m->versions.end()) it = m->versions.find(0);
  if (it != m->versions.end()) return it->second.get();
  return models_.find("")->second->versions.at(0).get();
}

Metrics::VersionSeries* Metrics::FindOrAddVersion(const std::string& model, int64_t version) {
  auto& slot = FindOrAdd(model)->versions[version];
  if (slot != nullptr) return slot.get();
  slot = std::make_unique<VersionSeries>();
  slot->model = model;
  slot->version = version == 0 ? "" : absl::StrCat(version);
  slot->request_duration =
      &request_duration_->Add({{"model", model}, {"version", slot->version}}, LatencyBuckets());
  return slot.get();
}

Metrics::ModelSeries* Metrics::FindOrAdd(const std::string& model) {
  auto& slot = models_[model];
  if (slot != nullptr) return slot.get();
  slot = std::make_unique<ModelSeries>();
  ModelSeries* s = slot.get();
  s->name = model;
  const prometheus::Labels l = {{"model", model}};
  s->intake_duration = &intake_duration_->Add(l, LatencyBuckets());
  s->answer_duration = &answer_duration_->Add(l, LatencyBuckets());
  s->queue_duration = &queue_duration_->Add(l, LatencyBuckets());
  s->compute_duration = &compute_duration_->Add(l, LatencyBuckets());
  s->batch_candidates = &batch_candidates_->Add(l, PowersOfTwo(17));
  s->batch_requests = &batch_requests_->Add(l, PowersOfTwo(10));
  s->candidates = &candidates_total_->Add(l);
  s->batches = &batches_total_->Add(l);
  s->nonfinite_scores = &nonfinite_scores_->Add(l);
  s->queue_requests = &queue_requests_->Add(l);
  s->queue_candidates = &queue_candidates_->Add(l);
  return s;
}

void Metrics::AddModel(const engine::Model& model) {
  // Both results exist from the first load on, so an alert sees the first
  // failure as an increase.
  model_loads_->Add({{"model", model.name}, {"result", "success"}});
  model_loads_->Add({{"model", model.name}, {"result", "failed"}});
  embedding_update_lag_->Add({{"model", model.name}}, LagBuckets());
  absl::MutexLock lock(&mu_);
  ModelSeries* s = FindOrAdd(model.name);
  FindOrAddVersion(model.name, 0);
  for (const engine::EmbeddingTable& t : model.tables) {
    const prometheus::Labels l = {{"model", model.name}, {"table", t.name}};
    auto& map = t.dynamic ? s->missing : s->out_of_range;
    if (!map.contains(t.name)) {
      map[t.name] = t.dynamic ? &ids_missing_->Add(l) : &ids_out_of_range_->Add(l);
    }
    if (t.dynamic) {
      embedding_updates_->Add(l);
      embedding_evictions_->Add(l);
      dynamic_table_keys_->Add(l).Set(static_cast<double>(t.num_rows));
      dynamic_table_max_keys_->Add(l).Set(static_cast<double>(t.max_keys));
    }
    if (!s->cache.contains(t.name)) {
      ModelSeries::CacheSeries& c = s->cache[t.name];
      c.hits = &cache_hits_->Add(l);
      c.misses = &cache_misses_->Add(l);
      c.host_read_bytes = &host_read_bytes_->Add(l);
      c.occupancy = &cache_occupancy_->Add(l);
    }
  }
}

void Metrics::OnUpdateApplied(const std::string& model, const std::string& table,
                              const engine::DeltaResult& result, double lag_seconds) {
  const prometheus::Labels l = {{"model", model}, {"table", table}};
  embedding_updates_->Add(l).Increment(static_cast<double>(result.rows_applied));
  if (result.keys_evicted > 0) {
    embedding_evictions_->Add(l).Increment(static_cast<double>(result.keys_evicted));
  }
  if (lag_seconds >= 0) {
    embedding_update_lag_->Add({{"model", model}}, LagBuckets()).Observe(lag_seconds);
  }
}

void Metrics::OnDynamicTableKeys(const std::string& model, const std::string& table,
                                 int64_t keys, int64_t max_keys) {
  const prometheus::Labels l = {{"model", model}, {"table", table}};
  dynamic_table_keys_->Add(l).Set(static_cast<double>(keys));
  dynamic_table_max_keys_->Add(l).Set(static_cast<double>(max_keys));
}

void Metrics::SetUpdateLogBytes(const std::string& model, int64_t bytes) {
  update_log_bytes_->Add({{"model", model}}).Set(static_cast<double>(bytes));
}

void Metrics::AddVersion(const std::string& name, int64_t version) {
  absl::MutexLock lock(&mu_);
  FindOrAdd(name);
  FindOrAddVersion(name, version);
  model_ready_->Add({{"model", name}, {"version", absl::StrCat(version)}}).Set(1);
}

void Metrics::RemoveVersion(const std::string& name, int64_t version) {
  if (version == 0) return;  // the model's version="" series stay
  absl::MutexLock lock(&mu_);
  auto m = models_.find(name);
  if (m != models_.end()) {
    auto& versions = m->second->versions;
    auto it = versions.find(version);
    if (it != versions.end()) {
      for (auto& by_code : it->second->requests) {
        for (auto& counter : by_code) {
          if (prometheus::Counter* c = counter.load()) requests_total_->Remove(c);
        }
      }
      request_duration_->Remove(it->second->request_duration);
      versions.erase(it);
    }
  }
  model_ready_->Remove(&model_ready_->Add({{"model", name}, {"version", absl::StrCat(version)}}));
}

void Metrics::RecordModelLoad(const std::string& name, bool ok, double seconds) {
  model_loads_->Add({{"model", name}, {"result", ok ? "success" : "failed"}}).Increment();
  if (ok) {
    static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
        0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200};
    model_load_duration_->Add({{"model", name}}, *buckets).Observe(seconds);
  }
}

void Metrics::SetVersionStates(const std::string& name, const std::map<std::string, int>& counts) {
  for (const auto& [state, n] : counts) {
    model_versions_->Add({{"model", name}, {"state", state}}).Set(n);
  }
}

const char* Metrics::ProtocolName(Protocol protocol) {
  switch (protocol) {
    case Protocol::kKServe:
      return "kserve";
    case Protocol::kKServeHttp:
      return "kserve_http";
    case Protocol::kHttp:
      return "http";
    default:
      return "rankd";
  }
}

prometheus::Counter* Metrics::RequestCounter(VersionSeries* s, absl::StatusCode code,
                                             Protocol protocol) {
  int c = static_cast<int>(code);
  if (c < 0 || c >= kNumCodes) c = static_cast<int>(absl::StatusCode::kUnknown);
  const int p = static_cast<int>(protocol);
  std::atomic<prometheus::Counter*>& slot = s->requests[p][c];
  prometheus::Counter* counter = slot.load(std::memory_order_acquire);
  if (counter == nullptr) {
    absl::MutexLock lock(&counter_mu_);
    counter = slot.load(std::memory_order_acquire);
    if (counter == nullptr) {
      counter = &requests_total_->Add({{"model", s->model},
                                       {"version", s->version},
                                       {"code", CodeName(static_cast<absl::StatusCode>(c))},
                                       {"protocol", ProtocolName(protocol)}});
      slot.store(counter, std::memory_order_release);
    }
  }
  return counter;
}

void Metrics::RecordRefused(absl::string_view reason) {
  if (reason == "malformed") {
    refused_malformed_->Increment();
  } else if (reason == "inflight_bytes") {
    refused_inflight_bytes_->Increment();
  } else {
    refused_shutting_down_->Increment();
  }
}

void Metrics::SetRequestBytesInFlight(int64_t bytes) {
  request_bytes_in_flight_->Set(static_cast<double>(bytes));
}

void Metrics::RecordRequest(absl::string_view model, int64_t version, absl::StatusCode code,
                            absl::Duration duration, Protocol protocol) {
  absl::ReaderMutexLock lock(&mu_);
  VersionSeries* s = FindVersion(model, version);
  RequestCounter(s, code, protocol)->Increment();
  s->request_duration->Observe(absl::ToDoubleSeconds(duration));
}

void Metrics::RecordOutsideBatcher(absl::string_view model, absl::Duration intake,
                                   std::optional<absl::Duration> answer) {
  absl::ReaderMutexLock lock(&mu_);
  ModelSeries* s = Find(model);
  s->intake_duration->Observe(absl::ToDoubleSeconds(intake));
  if (answer.has_value()) s->answer_duration->Observe(absl::ToDoubleSeconds(*answer));
}

void Metrics::OnRequestDone(const engine::ModelVersionRef& model,
                            const engine::RequestEvent& event) {
  absl::ReaderMutexLock lock(&mu_);
  ModelSeries* s = Find(model.name);
  if (event.total > absl::ZeroDuration()) {  // admitted: it waited in the queue
    s->queue_duration->Observe(absl::ToDoubleSeconds(event.queue));
  }
  if (event.code == absl::StatusCode::kOk) s->candidates->Increment(event.candidates);
}

void Metrics::OnBatch(const engine::ModelVersionRef& model, const engine::BatchEvent& event) {
  absl::ReaderMutexLock lock(&mu_);
  ModelSeries* s = Find(model.name);
  s->compute_duration->Observe(absl::ToDoubleSeconds(event.compute));
  s->batch_candidates->Observe(static_cast<double>(event.candidates));
  s->batch_requests->Observe(static_cast<double>(event.requests));
  s->batches->Increment();
}

void Metrics::OnQueueDepth(const engine::ModelVersionRef& model, int64_t queued_requests,
                           int64_t queued_candidates) {
  absl::ReaderMutexLock lock(&mu_);
  ModelSeries* s = Find(model.name);
  s->queue_requests->Set(static_cast<double>(queued_requests));
  s->queue_candidates->Set(static_cast<double>(queued_candidates));
}

void Metrics::OnUnresolvedIds(const engine::ModelVersionRef& model, absl::string_view table,
                              bool dynamic_table, int64_t count) {
  absl::ReaderMutexLock lock(&mu_);
  ModelSeries* s = Find(model.name);
  const auto& map = dynamic_table ? s->missing : s->out_of_range;
  auto it = map.find(table);
  if (it != map.end()) it->second->Increment(static_cast<double>(count));
}

void Metrics::OnNonFiniteScores(const engine::ModelVersionRef& model, int64_t count) {
  absl::ReaderMutexLock lock(&mu_);
  Find(model.name)->nonfinite_scores->Increment(static_cast<double>(count));
}

void Metrics::OnEmbeddingCache(const engine::ModelVersionRef& model, absl::string_view table,
                               int64_t hits, int64_t misses, int64_t host_read_bytes,
                               double occupancy) {
  absl::ReaderMutexLock lock(&mu_);
  ModelSeries* s = Find(model.name);
  auto it = s->cache.find(table);
  if (it == s->cache.end()) return;
  if (hits > 0) it->second.hits->Increment(static_cast<double>(hits));
  if (misses > 0) it->second.misses->Increment(static_cast<double>(misses));
  if (host_read_bytes > 0) it->second.host_read_bytes->Increment(static_cast<double>(host_read_bytes));
  it->second.occupancy->Set(occupancy > 0 ? occupancy : 0.0);
}

}  // namespace rankd::server
