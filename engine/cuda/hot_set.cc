#include "engine/cuda/hot_set.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"

namespace rankd::engine::cuda {
namespace {
// Counts below this after decay are forgotten, which bounds the rows tracked
// (with decay 0.8 a single sample is kept about 10 refreshes).
constexpr float kForget = 0.1f;
}  // namespace

HotSet::HotSet(int64_t num_rows, int64_t capacity, float decay)
    : num_rows_(num_rows),
      capacity_(std::min(capacity, num_rows)),
      decay_(std::min(std::max(decay, 0.0f), 1.0f)) {
  row_of_slot_.assign(capacity_, -1);
  for (int64_t s = capacity_ - 1; s >= 0; --s) free_slots_.push_back(static_cast<int32_t>(s));
}

void HotSet::Prefill() {
  slot_of_.clear();
  free_slots_.clear();
  for (int64_t s = 0; s < capacity_; ++s) {
    row_of_slot_[s] = s;
    slot_of_[s] = static_cast<int32_t>(s);
  }
}

void HotSet::Prefill(absl::Span<const int64_t> rows) {
  slot_of_.clear();
  free_slots_.clear();
  row_of_slot_.assign(capacity_, -1);
  const int64_t n = std::min<int64_t>(capacity_, static_cast<int64_t>(rows.size()));
  for (int64_t s = 0; s < n; ++s) {
    row_of_slot_[s] = rows[s];
    slot_of_[rows[s]] = static_cast<int32_t>(s);
  }
  for (int64_t s = capacity_ - 1; s >= n; --s) free_slots_.push_back(static_cast<int32_t>(s));
}

float HotSet::Count(int64_t row) const {
  auto it = counts_.find(row);
  return it == counts_.end() ? 0.0f : it->second;
}

int32_t HotSet::SlotOf(int64_t row) const {
  auto it = slot_of_.find(row);
  return it == slot_of_.end() ? -1 : it->second;
}

HotSet::Change HotSet::Plan(absl::Span<const int64_t> sampled, int64_t max_changes) {
  // Decay, then count the new samples.
  for (auto it = counts_.begin(); it != counts_.end();) {
    it->second *= decay_;
    if (it->second < kForget) {
      counts_.erase(it++);
    } else {
      ++it;
    }
  }
  for (int64_t r : sampled) {
    if (r >= 0 && r < num_rows_) counts_[r] += 1.0f;
  }
  Change change;
  if (capacity_ == 0) return change;

  // Uncached candidates, hottest first.
  std::vector<std::pair<float, int64_t>> candidates;
  for (const auto& [row, count] : counts_) {
    if (!slot_of_.contains(row)) candidates.emplace_back(count, row);
  }
  const int64_t want = std::min<int64_t>(max_changes, static_cast<int64_t>(candidates.size()));
  std::partial_sort(candidates.begin(), candidates.begin() + want, candidates.end(),
                    [](const auto& a, const auto& b) {
                      return a.first != b.first ? a.first > b.first : a.second < b.second;
                    });
  candidates.resize(want);

  // Free slots first.
  size_t next = 0;
  std::vector<int32_t> free = free_slots_;
  while (next < candidates.size() && !free.empty()) {
    change.admit_rows.push_back(candidates[next++].second);
    change.admit_slots.push_back(free.back());
    free.pop_back();
  }
  if (next == candidates.size()) return change;

  // Then replace the coldest cached rows by hotter candidates.
  std::vector<std::pair<float, int32_t>> cached;  // (count, slot)
  cached.reserve(slot_of_.size());
  for (const auto& [row, slot] : slot_of_) cached.emplace_back(Count(row), slot);
  const int64_t victims =
      std::min<int64_t>(static_cast<int64_t>(candidates.size() - next),
                        static_cast<int64_t>(cached.size()));
  std::partial_sort(cached.begin(), cached.begin() + victims, cached.end(),
                    [](const auto& a, const auto& b) {
                      return a.first != b.first ? a.first < b.first : a.second < b.second;
                    });
  for (int64_t v = 0; v < victims && next < candidates.size(); ++v, ++next) {
    if (!(candidates[next].first > cached[v].first)) break;  // strictly hotter only
    const int32_t slot = cached[v].second;
    change.evict_rows.push_back(row_of_slot_[slot]);
    change.evict_slots.push_back(slot);
    change.admit_rows.push_back(candidates[next].second);
    change.admit_slots.push_back(slot);
  }
  return change;
}

void HotSet::Apply(const Change& change) {
  for (size_t i = 0; i < change.evict_rows.size(); ++i) {
    slot_of_.erase(change.evict_rows[i]);
    row_of_slot_[change.evict_slots[i]] = -1;
  }
  const absl::flat_hash_set<int32_t> taken(change.admit_slots.begin(), change.admit_slots.end());
  free_slots_.erase(std::remove_if(free_slots_.begin(), free_slots_.end(),
                                   [&](int32_t s) { return taken.contains(s); }),
                    free_slots_.end());
  for (size_t i = 0; i < change.admit_rows.size(); ++i) {
    row_of_slot_[change.admit_slots[i]] = change.admit_rows[i];
    slot_of_[change.admit_rows[i]] = change.admit_slots[i];
  }
}

}  // namespace rankd::engine::cuda
