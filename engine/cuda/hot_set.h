// Which rows of a HOST table its HBM cache should hold: the policy half of
// the embedding cache (engine/cuda/embedding_cache.h), plain C++ so it is
// tested without a GPU.
//
// Policy: a static hot set refreshed from sampled access counts. The lookup
// kernel samples about one access in 2^k into a log; each refresh adds the
// log's rows to decayed counts (x0.8 every refresh, so the set follows
// traffic that shifts), and the cache is changed towards the `capacity` rows
// with the highest counts. A cached row is only replaced by one counted
// strictly more often (no churn between equals), and at most `max_changes`
// rows move per refresh (bounded work off the request path).
//
// Threading: not thread-safe; one maintenance thread owns it.
#ifndef RANKD_ENGINE_CUDA_HOT_SET_H_
#define RANKD_ENGINE_CUDA_HOT_SET_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"

namespace rankd::engine::cuda {

class HotSet {
 public:
  // A table of `num_rows` rows and a cache of `capacity` slots (<= num_rows).
  // Counts are multiplied by `decay` (clamped to [0, 1]) every refresh: a
  // sample weighs about 1 / (1 - decay) refreshes.
  HotSet(int64_t num_rows, int64_t capacity, float decay = 0.8f);

  // Marks rows [0, capacity) as cached in slots [0, capacity): the cache's
  // warm start before any traffic is seen.
  void Prefill();
  // Marks rows[i] as cached in slot i (at most capacity rows, each in
  // [0, num_rows) and distinct); the other slots are free.
  void Prefill(absl::Span<const int64_t> rows);

  struct Change {
    // Rows leaving the cache, and the slots they free.
    std::vector<int64_t> evict_rows;
    std::vector<int32_t> evict_slots;
    // Rows entering the cache, and their slots (free slots first).
    std::vector<int64_t> admit_rows;
    std::vector<int32_t> admit_slots;
    bool empty() const { return admit_rows.empty() && evict_rows.empty(); }
  };

  // Adds sampled rows (out-of-range ones are ignored) and returns the change
  // towards the hottest rows; nothing is committed until Apply.
  Change Plan(absl::Span<const int64_t> sampled, int64_t max_changes);
  // Commits a change Plan returned (after the device caught up with it).
  void Apply(const Change& change);

  int64_t capacity() const { return capacity_; }
  int64_t occupied() const { return capacity_ - static_cast<int64_t>(free_slots_.size()); }
  // Slot of a row, or -1 (for tests and checks).
  int32_t SlotOf(int64_t row) const;
  int64_t tracked_rows() const { return static_cast<int64_t>(counts_.size()); }

 private:
  float Count(int64_t row) const;

  int64_t num_rows_;
  int64_t capacity_;
  float decay_;
  absl::flat_hash_map<int64_t, float> counts_;  // decayed sampled accesses
  absl::flat_hash_map<int64_t, int32_t> slot_of_;  // cached row -> slot
  std::vector<int64_t> row_of_slot_;               // slot -> row, -1 = free
  std::vector<int32_t> free_slots_;
};

}  // namespace rankd::engine::cuda

#endif  // RANKD_ENGINE_CUDA_HOT_SET_H_
