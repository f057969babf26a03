// An HBM cache of the hot rows of one or more HOST tables on one GPU.
//
// Shared slots. The tables a cache serves (its members, all with the same
// row size) share one pool of `capacity` row slots, and the policy (HotSet)
// ranks all of their rows together: the slots go to the rows accessed most,
// whichever table they belong to. A table looked up 100 times per candidate
// then gets far more of the slots than one looked up once, which a fixed
// share per table cannot do (the hit rates of both on the mlperf shape:
// docs/benchmarks.md). The
// lookup kernel needs nothing new: each member's descriptor points at the
// shared rows and at its own slot map.
//
// Device state: per member a slot map (int32 per table row: slot or -1) and
// an access log the lookup kernel samples accesses into
// (kernels/cuda/embedding_lookup.h, DeviceTable); the pool's cached rows.
// Lookups of cached rows read HBM; the others read the pinned host rows.
// Results never depend on the cache (same bytes, same arithmetic).
//
// Refresh (the maintenance thread, never a request): read every member's new
// log entries, let the HotSet policy pick rows to admit and evict, then
//   1. clear the evicted rows' slot-map entries and wait for the device;
//   2. ReaderGate::WaitForReaders: batches that might still read the old
//      mapping finish (requests never wait for this);
//   3. copy the admitted rows into their slots, then publish their slot-map
//      entries (a running batch sees either -1, read from host, or the filled
//      slot: both correct).
// The warm start (before traffic) holds rows [0, warm_rows) of each member:
// datasets often number ids by frequency.
//
// Ownership and threading: owned by its DeviceModel; Describe is called once
// at construction; Refresh only from the maintenance thread; stats() and
// cached_rows() from any thread.
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
    int64_t capacity_rows = 0;     // slots of the whole cache (> 0)
    int sample_shift = 4;          // log about 1 access in 2^sample_shift
    int64_t log_entries = 1 << 20; // access log size per member, rounded up to a power of two
    int64_t max_changes = 1 << 16; // rows admitted per refresh (whole cache)
    bool prefill = true;           // warm start with rows [0, warm_rows) of each member
    float decay = 0.8f;            // hot-set counts kept per refresh (hot_set.h)
  };

  // One table the cache serves.
  struct Member {
    std::string table;
    int64_t num_rows = 0;
    const void* host_rows = nullptr;  // device alias of its pinned rows (HostTables)
    // Rows [0, warm_rows) go into the cache at the warm start (Options::
    // prefill); the members' warm_rows together must fit the capacity.
    int64_t warm_rows = 0;
    // Its access log's entries, rounded up to a power of two (0 = Options::
    // log_entries): room for the accesses sampled between two refreshes.
    int64_t log_entries = 0;
  };

  // A cache shared by `members` (at least one; every member's rows are
  // `row_bytes` long).
  static absl::StatusOr<std::unique_ptr<EmbeddingCache>> Create(std::vector<Member> members,
                                                                int64_t row_bytes,
                                                                const Options& options);
  // A cache of one table (warm start: rows [0, capacity)).
  static absl::StatusOr<std::unique_ptr<EmbeddingCache>> Create(const std::string& table,
                                                                int64_t num_rows,
                                                                int64_t row_bytes,
                                                                const void* host_rows,
                                                                const Options& options);

  // Fills the cache fields of member `member`'s kernel descriptor.
  void Describe(int member, kernels::cuda::DeviceTable* table) const;
  void Describe(kernels::cuda::DeviceTable* table) const { Describe(0, table); }

  // One refresh on `stream` (see above). `gate` guards the workers' batches.
  absl::Status Refresh(cudaStream_t stream, ReaderGate* gate);

  struct Stats {
    int64_t capacity = 0;  // slots of the whole cache
    int64_t occupied = 0;  // slots holding a row (of any member)
    int64_t refreshes = 0;
    int64_t admitted = 0;  // rows copied in since start (incl. the warm start)
    int64_t sampled = 0;   // access-log entries read
  };
  Stats stats() const;
  int num_members() const { return static_cast<int>(members_.size()); }
  const std::string& table(int member = 0) const;
  // Rows of member `member` in the cache now.
  int64_t cached_rows(int member) const;
  // Device bytes this cache holds (slot maps, rows, logs).
  int64_t device_bytes() const;

 private:
  struct MemberState {
    std::string table;
    int64_t num_rows = 0;
    const void* host_rows = nullptr;
    int64_t warm_rows = 0;
    int64_t log_entries = 0;  // a power of two
    int64_t first = 0;  // its rows are HotSet rows [first, first + num_rows)
    DeviceBuffer slot_map, log, head;
    PinnedBuffer host_head, host_log;
    uint64_t last_head = 0;
    std::atomic<int64_t> cached{0};
  };

  EmbeddingCache(int64_t total_rows, int64_t row_bytes, const Options& options);
  absl::Status Init();
  // Member of a HotSet row.
  int MemberOf(int64_t row) const;
  // Appends the fresh part of member m's access log to `samples` (as HotSet rows).
  absl::Status ReadLog(MemberState& m, cudaStream_t stream, std::vector<int64_t>* samples);
  // Writes (row, slot) pairs to the device grouped by member, then calls
  // `launch(member, device rows, device slots, count)` for each member that
  // has any; rows are the member's own row indices.
  template <typename Launch>
  absl::Status ForEachMember(const std::vector<int64_t>& rows, const std::vector<int32_t>& slots,
                             cudaStream_t stream, const Launch& launch);

  const int64_t row_bytes_;
  Options options_;
  HotSet hot_;
  std::vector<std::unique_ptr<MemberState>> members_;

  DeviceBuffer cache_rows_;
  DeviceBuffer change_rows_, change_slots_;  // max_changes each
  PinnedBuffer host_change_rows_, host_change_slots_;

  std::atomic<int64_t> occupied_{0}, refreshes_{0}, admitted_{0}, sampled_{0};
};

}  // namespace rankd::engine::cuda

#endif  // RANKD_ENGINE_CUDA_EMBEDDING_CACHE_H_
