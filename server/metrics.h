// Prometheus metrics of the server (prometheus-cpp), fed by the server's RPC
// handlers and by the engine through the ServingObserver interface.
//
// Names follow Prometheus conventions: `rankd_` prefix, base units, `_total`
// counters, histograms with bucket edges at common SLOs (1, 2, 5, 10, 20,
// 50 ms ...). Labels are bounded: `model` is a served model's name (requests
// for unknown models are counted under model=""), `code` a gRPC code name,
// `table` a table of a served model.
//
// Threading: every method is thread-safe and does not block beyond
// prometheus-cpp's own atomics; per-model series are created by AddModel
// before serving starts, so the hot path never creates series or takes a
// lock (except the first time a (model, code) pair is seen).
#ifndef RANKD_SERVER_METRICS_H_
#define RANKD_SERVER_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/model/model.h"
#include "engine/serving/observer.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace rankd::server {

class Metrics final : public engine::ServingObserver {
 public:
  // build_version and backend label rankd_build_info.
  Metrics(const std::string& build_version, const std::string& backend);

  // Serves /metrics on `address` ("0.0.0.0:8502"; port 0 = any free port).
  // Errors name the address.
  absl::Status StartExposer(const std::string& address);
  // The bound port once StartExposer succeeded, else 0.
  int exposer_port() const;

  // Registers the series of one model version (before it serves).
  void AddModel(const engine::Model& model);
  void SetModelReady(const std::string& name, int64_t version, bool ready);

  // One finished RPC, whatever its outcome (the server calls this once per
  // Score RPC). `model` must be a served model's name or "" (unknown model).
  void RecordRequest(absl::string_view model, absl::StatusCode code,
                     absl::Duration duration);

  // engine::ServingObserver.
  void OnRequestDone(const engine::ModelVersionRef& model,
                     const engine::RequestEvent& event) override;
  void OnBatch(const engine::ModelVersionRef& model,
               const engine::BatchEvent& event) override;
  void OnQueueDepth(const engine::ModelVersionRef& model, int64_t queued_requests,
                    int64_t queued_candidates) override;
  void OnUnresolvedIds(const engine::ModelVersionRef& model, absl::string_view table,
                       bool dynamic_table, int64_t count) override;
  void OnEmbeddingCache(const engine::ModelVersionRef& model, absl::string_view table,
                        int64_t hits, int64_t misses, int64_t host_read_bytes,
                        double occupancy) override;

  prometheus::Registry& registry() { return *registry_; }

 private:
  static constexpr int kNumCodes = 17;
  struct ModelSeries {
    std::string name;
    std::array<std::atomic<prometheus::Counter*>, kNumCodes> requests{};
    prometheus::Histogram* request_duration = nullptr;
    prometheus::Histogram* queue_duration = nullptr;
    prometheus::Histogram* compute_duration = nullptr;
    prometheus::Histogram* batch_candidates = nullptr;
    prometheus::Histogram* batch_requests = nullptr;
    prometheus::Counter* candidates = nullptr;
    prometheus::Counter* batches = nullptr;
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
  ModelSeries* Find(absl::string_view model);
  ModelSeries* FindOrAdd(const std::string& model);
  prometheus::Counter* RequestCounter(ModelSeries* series, absl::StatusCode code);

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  prometheus::Family<prometheus::Counter>* requests_total_;
  prometheus::Family<prometheus::Histogram>* request_duration_;
  prometheus::Family<prometheus::Histogram>* queue_duration_;
  prometheus::Family<prometheus::Histogram>* compute_duration_;
  prometheus::Family<prometheus::Histogram>* batch_candidates_;
  prometheus::Family<prometheus::Histogram>* batch_requests_;
  prometheus::Family<prometheus::Counter>* candidates_total_;
  prometheus::Family<prometheus::Counter>* batches_total_;
  prometheus::Family<prometheus::Gauge>* queue_requests_;
  prometheus::Family<prometheus::Gauge>* queue_candidates_;
  prometheus::Family<prometheus::Counter>* ids_out_of_range_;
  prometheus::Family<prometheus::Counter>* ids_missing_;
  prometheus::Family<prometheus::Gauge>* model_ready_;
  prometheus::Family<prometheus::Counter>* cache_hits_;
  prometheus::Family<prometheus::Counter>* cache_misses_;
  prometheus::Family<prometheus::Counter>* host_read_bytes_;
  prometheus::Family<prometheus::Gauge>* cache_occupancy_;

  absl::Mutex mu_;  // guards creation of series (AddModel, first code seen)
  // Written only under mu_ before serving, and read lock-free afterwards:
  // node-stable map, entries never removed.
  absl::flat_hash_map<std::string, std::unique_ptr<ModelSeries>> models_;
};

}  // namespace rankd::server

#endif  // RANKD_SERVER_METRICS_H_
