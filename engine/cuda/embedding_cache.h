// An HBM cache of the hot rows of one HOST table on one GPU.
//
// Device state: a slot map (int32 per table row: slot or -1), `capacity`
// cached rows, and an access log the lookup kernel samples accesses into
// (kernels/cuda/embedding_lookup.h, DeviceTable). Lookups of cached rows read
// HBM; the others read the pinned host rows in the same kernel. Results never
// depend on the cache (same bytes, same arithmetic).
//
// Refresh (the maintenance thread, never a request): read the new log
// entries, let the HotSet policy pick rows to admit and evict, then
//   1. clear the evicted rows' slot-map entries and wait for the device;
//   2. ReaderGate::WaitForReaders: batches that might still read the old
//      mapping finish (requests never wait for this);
//   3. copy the admitted rows into their slots, then publish their slot-map
//      entries (a running batch sees either -1, read from host, or the filled
//      slot: both correct).
// The warm start (before traffic) holds rows [0, capacity): datasets often
// number ids by frequency.
//
// Ownership and threading: owned by its DeviceModel; Describe is called once
// at construction; Refresh only from the maintenance thread; stats() from any
// thread.
#ifndef RANKD_ENGINE_CUDA_EMBEDDING_CACHE_H_
#define RANKD_ENGINE_CUDA_EMBEDDING_CACHE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/cuda/cuda_util.h"
#include "engine/cuda/hot_set.h"
#include "engine/cuda/reader_gate.h"
#include "kernels/cuda/embedding_lookup.h"

namespace rankd::engine::cuda {

class EmbeddingCache {
 public:
  struct Options {
    int64_t capacity_rows = 0;     // slots (> 0)
    int sample_shift = 4;          // log about 1 access in 2^sample_shift
    int64_t log_entries = 1 << 20; // access log size, rounded up to a power of two
    int64_t max_changes = 1 << 16; // rows admitted per refresh
    bool prefill = true;           // warm start with rows [0, capacity)
    float decay = 0.8f;            // hot-set counts kept per refresh (hot_set.h)
  };

  // `host_rows` is the device alias of the table's pinned rows (HostTables).
  static absl::StatusOr<std::unique_ptr<EmbeddingCache>> Create(const std::string& table,
                                                                int64_t num_rows,
                                                                int64_t row_bytes,
                                                                const void* host_rows,
                                                                const Options& options);

  // Fills the cache fields of the table's kernel descriptor.
  void Describe(kernels::cuda::DeviceTable* table) const;

  // One refresh on `stream` (see above). `gate` guards the workers' batches.
  absl::Status Refresh(cudaStream_t stream, ReaderGate* gate);

  struct Stats {
    int64_t capacity = 0;
    int64_t occupied = 0;
    int64_t refreshes = 0;
    int64_t admitted = 0;  // rows copied in since start (incl. the warm start)
    int64_t sampled = 0;   // access-log entries read
  };
  Stats stats() const;
  const std::string& table() const { return table_; }
  // Device bytes this cache holds (slot map, rows, log).
  int64_t device_bytes() const;

 private:
  EmbeddingCache(std::string table, int64_t num_rows, int64_t row_bytes, const void* host_rows,
                 const Options& options);
  absl::Status Init();
  absl::Status Upload(const std::vector<int64_t>& rows, const std::vector<int32_t>& slots,
                      cudaStream_t stream);

  const std::string table_;
  const int64_t num_rows_;
  const int64_t row_bytes_;
  const void* host_rows_;
  Options options_;
  HotSet hot_;

  DeviceBuffer slot_map_, cache_rows_, log_, head_;
  DeviceBuffer change_rows_, change_slots_;  // max_changes each
  PinnedBuffer host_head_, host_log_, host_change_rows_, host_change_slots_;
  uint64_t last_head_ = 0;

  std::atomic<int64_t> occupied_{0}, refreshes_{0}, admitted_{0}, sampled_{0};
};

}  // namespace rankd::engine::cuda

#endif  // RANKD_ENGINE_CUDA_EMBEDDING_CACHE_H_
