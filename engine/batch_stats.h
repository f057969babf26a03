// What a scored batch did besides scoring, reported by every backend (CPU
// engine, CUDA workers) and fed to metrics through the serving observer. Kept
// in its own header so backend-neutral code (engine/serving/) need not include
// a backend.
#ifndef RANKD_ENGINE_BATCH_STATS_H_
#define RANKD_ENGINE_BATCH_STATS_H_

#include <cstdint>
#include <vector>

namespace rankd::engine {

struct BatchStats {
  // Ids that did not resolve (out of range / missing key) and pooled the
  // default vector, per table (Model::tables order).
  std::vector<int64_t> unresolved_ids_per_table;
  // CUDA backend with HOST tables only (empty otherwise), per table: ids
  // looked up, and of those the rows read from host memory (not in the HBM
  // cache). Cache hits = lookups - unresolved - host reads.
  std::vector<int64_t> lookups_per_table;
  std::vector<int64_t> host_reads_per_table;
  // Of those, the rows actually copied from host memory: each distinct
  // missed row of a batch once (plus direct reads past the staging buffer).
  std::vector<int64_t> host_rows_read_per_table;
  // The HBM cache's occupancy per table (slots used / slots), -1 for a HOST
  // table without a cache, -2 for a table in HBM.
  std::vector<double> cache_occupancy_per_table;
};

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_BATCH_STATS_H_
