// What a scored batch did besides scoring, reported by every backend (CPU
// engine, CUDA workers) and fed to metrics through the serving observer. Kept
// in its own header so backend-neutral code (engine/serving/) need not include
// a backend.
#ifndef RANKD_ENGINE_BATCH_STATS_H_
#define RANKD_ENGINE_BATCH_STATS_H_

#include <cstdint>
#include <optional>
#include <vector>

namespace rankd::engine {

// What a batch did to one table in pinned host memory (CUDA backend,
// placement HOST) and its HBM cache.
struct HostTableStats {
  int64_t lookups = 0;     // ids looked up
  int64_t host_reads = 0;  // of those, not in the HBM cache (read from host memory)
  // Rows actually copied from host memory: each distinct missed row of a
  // batch once (plus direct reads past the staging buffer).
  int64_t host_rows_read = 0;
  // The cache's slots used / slots; none when the table has no cache.
  std::optional<double> cache_occupancy;
};

struct BatchStats {
  // Ids that did not resolve (out of range / missing key) and pooled the
  // default vector, per table (Model::tables order).
  std::vector<int64_t> unresolved_ids_per_table;
  // Per table (Model::tables order) when the backend has tables in host
  // memory, empty otherwise; none for a table in device memory. Cache hits =
  // lookups - unresolved - host reads.
  std::vector<std::optional<HostTableStats>> host_tables;
};

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_BATCH_STATS_H_
