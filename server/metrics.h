// Prometheus metrics of the server (prometheus-cpp), fed by the server's RPC
// handlers and by the engine through the ServingObserver interface.
//
// Names follow Prometheus conventions: `rankd_` prefix, base units, `_total`
// counters, histograms with bucket edges at common SLOs (1, 2, 5, 10, 20,
// 50 ms ...). Labels are bounded: `model` is a model's name (requests for
// unknown models are counted under model=""), `version` a live version of it
// (series of a version are removed when it unloads; requests that named no
// servable version count under version=""), `code` a gRPC code name, `table`
// a table of a model, `state` a version state, `result` success or failed.
//
// Threading: every method is thread-safe. The hot path takes a reader lock
// (series are added while serving, when a version loads) and prometheus-cpp's
// atomics; it creates a series only the first time a (version, code) pair is
// seen.
#ifndef RANKD_SERVER_METRICS_H_
#define RANKD_SERVER_METRICS_H_

#include <array>
#include <map>
#include <utility>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/model/model.h"
#include "engine/serving/observer.h"
#include "server/embedding_update_listener.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace rankd::server {

class Metrics final : public engine::ServingObserver, public EmbeddingUpdateListener {
 public:
  // Labels of rankd_build_info: build_version, backend, cuda_archs (the
  // architectures of the binary's device code, "900") and gpu (why the
  // CUDA backend is not in use: "" when it is, e.g. "device 0 (...): this
  // binary has no kernel image for it ..." under --backend auto).
  Metrics(const std::string& build_version, const std::string& backend,
          const std::string& cuda_archs = "", const std::string& gpu_note = "");

  // How /metrics is served (prometheus-cpp's civetweb server).
  struct ExposerOptions {
    // Threads serving scrapes. Civetweb gives each connection a thread for
    // as long as it is open, so idle or slow connections each take one;
    // more threads than the few connections a scraper and a curl make leave
    // scrapes room.
    int num_threads = 8;
    // Longest wait for a connection's next bytes (reading the request,
    // writing the answer) before civetweb closes it: bounds how long an
    // idle, half-open or trickling connection holds a thread (civetweb's
    // default is 30 s, which let two idle connections block scrapes).
    int request_timeout_ms = 2000;
  };
  // Serves /metrics on `address` ("0.0.0.0:8502"; port 0 = any free port),
  // without HTTP keep-alive (each scrape is one connection, closed after
  // the answer). Errors name the address.
  absl::Status StartExposer(const std::string& address, const ExposerOptions& options);
  // The bound port once StartExposer succeeded, else 0.
  int exposer_port() const;

  // Registers the model's series (tables, queue, batches; idempotent per
  // model) when a version's files are loaded, before its warm-up.
  void AddModel(const engine::Model& model);
  // A version starts taking traffic: its request series and
  // rankd_model_ready{model, version} = 1.
  void AddVersion(const std::string& name, int64_t version);
  // A version was unloaded: its request series and readiness series go.
  void RemoveVersion(const std::string& name, int64_t version);

  // Lifecycle: one load attempt (load + warm-up seconds), and the number of
  // versions of a model in each state ("loading", "ready", ...).
  void RecordModelLoad(const std::string& name, bool ok, double seconds);
  void SetVersionStates(const std::string& name, const std::map<std::string, int>& counts);

  // The front end a request came through: rankd_requests_total's
  // `protocol` label.
  enum class Protocol {
    kRankd,       // "rankd": rankd.v1.Ranking/Score over gRPC
    kKServe,      // "kserve": KServe v2 ModelInfer over gRPC
    kKServeHttp,  // "kserve_http": KServe v2 REST .../infer
    kHttp,        // "http": the native REST endpoint /v1/models/{m}:score
  };
  static constexpr int kNumProtocols = 4;
  static const char* ProtocolName(Protocol protocol);

  // One finished inference request, whatever its outcome (each front end
  // calls this once per request). `model` is a model's name or "" (unknown
  // model); `version` the version that answered, 0 when none was found.
  void RecordRequest(absl::string_view model, int64_t version, absl::StatusCode code,
                     absl::Duration duration, Protocol protocol);

  // Where an admitted gRPC Score or ModelInfer call's time went outside the
  // batcher, under one lock: rankd_intake_duration_seconds{model}, from its
  // handler's start to `model`'s queue (parse, validation, routing), and,
  // when it was computed, rankd_answer_duration_seconds{model}, from the
  // end of its batch to its answer (the completion hand-off, checks, metrics,
  // serialization); each with any wait for a core between them.
  void RecordOutsideBatcher(absl::string_view model, absl::Duration intake,
                            std::optional<absl::Duration> answer);

  // A Score request refused before it reached a model:
  // rankd_requests_refused_total{reason}, reason one of "malformed" (not a
  // valid ScoreRequest), "inflight_bytes" (--max_inflight_request_bytes),
  // "shutting_down" (arrived after SIGTERM). RecordRequest counts it too.
  void RecordRefused(absl::string_view reason);
  // rankd_request_bytes_in_flight: bytes of admitted Score requests.
  void SetRequestBytesInFlight(int64_t bytes);

  // engine::ServingObserver.
  void OnRequestDone(const engine::ModelVersionRef& model,
                     const engine::RequestEvent& event) override;
  void OnBatch(const engine::ModelVersionRef& model,
               const engine::BatchEvent& event) override;
  void OnQueueDepth(const engine::ModelVersionRef& model, int64_t queued_requests,
                    int64_t queued_candidates) override;
  void OnUnresolvedIds(const engine::ModelVersionRef& model, absl::string_view table,
                       bool dynamic_table, int64_t count) override;
  // rankd_nonfinite_scores_total{model}.
  void OnNonFiniteScores(const engine::ModelVersionRef& model, int64_t count) override;
  void OnEmbeddingCache(const engine::ModelVersionRef& model, absl::string_view table,
                        int64_t hits, int64_t misses, int64_t host_read_bytes,
                        double occupancy) override;

  // EmbeddingUpdateListener: rankd_embedding_updates_total (rows),
  // rankd_embedding_evictions_total, rankd_embedding_update_lag_seconds,
  // rankd_dynamic_table_keys and rankd_dynamic_table_max_keys.
  void OnUpdateApplied(const std::string& model, const std::string& table,
                       const engine::DeltaResult& result, double lag_seconds) override;
  void OnDynamicTableKeys(const std::string& model, const std::string& table, int64_t keys,
                          int64_t max_keys) override;
  // rankd_update_log_bytes (--update_log_dir).
  void SetUpdateLogBytes(const std::string& model, int64_t bytes);
  prometheus::Registry& registry() { return *registry_; }

 private:
  static constexpr int kNumCodes = 17;
  // The constructor's family registrations, by subject (in this order).
  void AddRequestFamilies();
  void AddBatchFamilies();
  void AddModelFamilies();
  void AddTableFamilies();
  // Request series of one (model, version); version 0 = version="".
  struct VersionSeries {
    std::string model;
    std::string version;
    // By protocol, then code.
    std::array<std::array<std::atomic<prometheus::Counter*>, kNumCodes>, kNumProtocols>
        requests{};
    prometheus::Histogram* request_duration = nullptr;
  };
  struct ModelSeries {
    std::string name;
    // Request series by version (0 = version=""); looked up per request
    // without building a key.
    absl::flat_hash_map<int64_t, std::unique_ptr<VersionSeries>> versions;
    prometheus::Histogram* intake_duration = nullptr;
    prometheus::Histogram* answer_duration = nullptr;
    prometheus::Histogram* queue_duration = nullptr;
    prometheus::Histogram* compute_duration = nullptr;
    prometheus::Histogram* batch_candidates = nullptr;
    prometheus::Histogram* batch_requests = nullptr;
    prometheus::Counter* candidates = nullptr;
    prometheus::Counter* batches = nullptr;
    prometheus::Counter* nonfinite_scores = nullptr;
    prometheus::Gauge* queue_requests = nullptr;
    prometheus::Gauge* queue_candidates = nullptr;
    absl::flat_hash_map<std::string, prometheus::Counter*> out_of_range;  // by table
    absl::flat_hash_map<std::string, prometheus::Counter*> missing;       // by table
    struct CacheSeries {
      prometheus::Counter* hits = nullptr;
      prometheus::Counter* misses = nullptr;
      prometheus::Counter* host_read_bytes = nullptr;
      prometheus::Gauge* occupancy = nullptr;
    };
    absl::flat_hash_map<std::string, CacheSeries> cache;  // by table
  };
  ModelSeries* Find(absl::string_view model) ABSL_SHARED_LOCKS_REQUIRED(mu_);
  ModelSeries* FindOrAdd(const std::string& model) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  VersionSeries* FindOrAddVersion(const std::string& model, int64_t version)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  VersionSeries* FindVersion(absl::string_view model, int64_t version)
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  prometheus::Counter* RequestCounter(VersionSeries* series, absl::StatusCode code,
                                      Protocol protocol);

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  prometheus::Family<prometheus::Counter>* requests_total_;
  prometheus::Family<prometheus::Histogram>* request_duration_;
  prometheus::Family<prometheus::Counter>* requests_refused_;
  prometheus::Counter* refused_malformed_;
  prometheus::Counter* refused_inflight_bytes_;
  prometheus::Counter* refused_shutting_down_;
  prometheus::Gauge* request_bytes_in_flight_;
  prometheus::Family<prometheus::Histogram>* intake_duration_;
  prometheus::Family<prometheus::Histogram>* answer_duration_;
  prometheus::Family<prometheus::Histogram>* queue_duration_;
  prometheus::Family<prometheus::Histogram>* compute_duration_;
  prometheus::Family<prometheus::Histogram>* batch_candidates_;
  prometheus::Family<prometheus::Histogram>* batch_requests_;
  prometheus::Family<prometheus::Counter>* candidates_total_;
  prometheus::Family<prometheus::Counter>* batches_total_;
  prometheus::Family<prometheus::Counter>* nonfinite_scores_;
  prometheus::Family<prometheus::Gauge>* queue_requests_;
  prometheus::Family<prometheus::Gauge>* queue_candidates_;
  prometheus::Family<prometheus::Counter>* ids_out_of_range_;
  prometheus::Family<prometheus::Counter>* ids_missing_;
  prometheus::Family<prometheus::Gauge>* model_ready_;
  prometheus::Family<prometheus::Counter>* cache_hits_;
  prometheus::Family<prometheus::Counter>* cache_misses_;
  prometheus::Family<prometheus::Counter>* host_read_bytes_;
  prometheus::Family<prometheus::Gauge>* cache_occupancy_;
  prometheus::Family<prometheus::Counter>* model_loads_;
  prometheus::Family<prometheus::Histogram>* model_load_duration_;
  prometheus::Family<prometheus::Gauge>* model_versions_;
  prometheus::Family<prometheus::Counter>* embedding_updates_;
  prometheus::Family<prometheus::Counter>* embedding_evictions_;
  prometheus::Family<prometheus::Histogram>* embedding_update_lag_;
  prometheus::Family<prometheus::Gauge>* dynamic_table_keys_;
  prometheus::Family<prometheus::Gauge>* dynamic_table_max_keys_;
  prometheus::Family<prometheus::Gauge>* update_log_bytes_;

  // Guards the maps (series are added and removed while serving); readers
  // take it shared. Series objects are owned by the registry's families.
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<ModelSeries>> models_ ABSL_GUARDED_BY(mu_);
  // A request counter made for a (version, code) pair the first time: under
  // a separate lock, so the hot path never takes mu_ exclusively.
  absl::Mutex counter_mu_;
};

}  // namespace rankd::server

#endif  // RANKD_SERVER_METRICS_H_
