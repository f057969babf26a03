#include "kernels/cpu/dynamic_table.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "kernels/cpu/hash_table.h"

namespace rankd::kernels {
namespace {

int64_t StartBucket(int64_t key, int64_t num_buckets) {
  return static_cast<int64_t>(HashKey(key) & static_cast<uint64_t>(num_buckets - 1));
}

// Slot holding `key` (a valid key), or -1. Passes tombstones; an empty slot
// or num_buckets buckets end the probe.
int64_t FindSlot(const DynamicTableView& v, int64_t key) {
  int64_t bucket = StartBucket(key, v.num_buckets);
  for (int64_t probe = 0; probe < v.num_buckets; ++probe) {
    const int64_t base = bucket * kBucketSlots;
    for (int s = 0; s < kBucketSlots; ++s) {
      const int64_t k = v.slot_keys[base + s];
      if (k == key) return base + s;
      if (k == kEmptyKey) return -1;
    }
    bucket = (bucket + 1) & (v.num_buckets - 1);
  }
  return -1;
}

// First empty (or, with reuse_tombstones, deleted) slot on key's probe path,
// or -1 when there is none.
int64_t FreeSlot(const DynamicTableView& v, int64_t key, bool reuse_tombstones) {
  int64_t bucket = StartBucket(key, v.num_buckets);
  for (int64_t probe = 0; probe < v.num_buckets; ++probe) {
    const int64_t base = bucket * kBucketSlots;
    for (int s = 0; s < kBucketSlots; ++s) {
      const int64_t k = v.slot_keys[base + s];
      if (k == kEmptyKey || (reuse_tombstones && k == kDeletedKey)) return base + s;
    }
    bucket = (bucket + 1) & (v.num_buckets - 1);
  }
  return -1;
}

void EraseAt(const DynamicTableView& v, int64_t slot) {
  const int64_t row = v.slot_rows[slot];
  v.slot_keys[slot] = kDeletedKey;
  v.slot_rows[slot] = kMissingRow;
  v.row_keys[row] = kEmptyKey;
  v.free_rows[v.counters->free_count++] = row;
  v.counters->size--;
  v.counters->tombstones++;
}

char* RowPtr(const DynamicTableView& v, int64_t row) {
  return static_cast<char*>(v.rows) + row * v.row_bytes;
}

}  // namespace

HashTableView AsHashTableView(const DynamicTableView& view) {
  return HashTableView{view.slot_keys, view.slot_rows, view.num_buckets};
}

absl::Status CheckDynamicTableView(const DynamicTableView& v) {
  if (v.num_buckets <= 0 || (v.num_buckets & (v.num_buckets - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_buckets must be a power of two, got ", v.num_buckets));
  }
  if (v.max_keys <= 0 || v.max_keys > v.num_slots()) {
    return absl::InvalidArgumentError(absl::StrCat("max_keys ", v.max_keys,
                                                   " must be in [1, num_slots = ",
                                                   v.num_slots(), "]"));
  }
  if (v.row_bytes <= 0) return absl::InvalidArgumentError("row_bytes must be > 0");
  if (v.slot_keys == nullptr || v.slot_rows == nullptr || v.row_keys == nullptr ||
      v.scores == nullptr || v.free_rows == nullptr || v.counters == nullptr ||
      v.rows == nullptr) {
    return absl::InvalidArgumentError("dynamic table view has a null array");
  }
  return absl::OkStatus();
}

absl::Status InitDynamicTable(const DynamicTableView& v, absl::Span<const int64_t> keys) {
  if (absl::Status s = CheckDynamicTableView(v); !s.ok()) return s;
  const int64_t n = static_cast<int64_t>(keys.size());
  if (n > v.max_keys) {
    return absl::InvalidArgumentError(
        absl::StrCat(n, " initial keys exceed max_keys ", v.max_keys));
  }
  for (int64_t s = 0; s < v.num_slots(); ++s) {
    v.slot_keys[s] = kEmptyKey;
    v.slot_rows[s] = kMissingRow;
  }
  for (int64_t r = 0; r < n; ++r) {
    const int64_t key = keys[r];
    if (key == kEmptyKey || key == kDeletedKey) {
      return absl::InvalidArgumentError(absl::StrCat(
          "key at row ", r, " is ", key, ", which the dynamic table reserves (empty / deleted)"));
    }
    const int64_t found = FindSlot(v, key);
    if (found >= 0) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate key ", key, " at rows ",
                                                     v.slot_rows[found], " and ", r));
    }
    const int64_t slot = FreeSlot(v, key, /*reuse_tombstones=*/false);
    v.slot_keys[slot] = key;  // n <= max_keys <= num_slots: there is one
    v.slot_rows[slot] = r;
  }
  for (int64_t r = 0; r < v.max_keys; ++r) {
    v.row_keys[r] = r < n ? keys[r] : kEmptyKey;
    v.scores[r] = 0;
  }
  const int64_t free_count = v.max_keys - n;
  for (int64_t i = 0; i < free_count; ++i) v.free_rows[i] = v.max_keys - 1 - i;
  v.counters->size = n;
  v.counters->free_count = free_count;
  v.counters->tombstones = 0;
  return absl::OkStatus();
}

absl::Status CheckUpsertKeys(absl::Span<const int64_t> keys, int64_t max_keys) {
  if (static_cast<int64_t>(keys.size()) > max_keys) {
    return absl::InvalidArgumentError(
        absl::StrCat(keys.size(), " keys in one upsert exceed max_keys ", max_keys));
  }
  std::unordered_map<int64_t, int64_t> seen;
  seen.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i] == kEmptyKey || keys[i] == kDeletedKey) {
      return absl::InvalidArgumentError(
          absl::StrCat("key ", i, " is ", keys[i], ", a reserved value"));
    }
    auto [it, inserted] = seen.emplace(keys[i], static_cast<int64_t>(i));
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat("key ", keys[i], " repeats at positions ",
                                                     it->second, " and ", i));
    }
  }
  return absl::OkStatus();
}

DynamicStats DynamicErase(const DynamicTableView& v, absl::Span<const int64_t> keys) {
  DynamicStats stats;
  for (const int64_t key : keys) {
    const int64_t slot =
        (key == kEmptyKey || key == kDeletedKey) ? -1 : FindSlot(v, key);
    if (slot < 0) {
      ++stats.not_found;
      continue;
    }
    EraseAt(v, slot);
    ++stats.deleted;
  }
  return stats;
}

int64_t DynamicRehash(const DynamicTableView& v) {
  for (int64_t s = 0; s < v.num_slots(); ++s) {
    v.slot_keys[s] = kEmptyKey;
    v.slot_rows[s] = kMissingRow;
  }
  int64_t failed = 0;
  for (int64_t r = 0; r < v.max_keys; ++r) {
    const int64_t key = v.row_keys[r];
    if (key == kEmptyKey) continue;
    const int64_t slot = FreeSlot(v, key, /*reuse_tombstones=*/false);
    if (slot < 0) {
      ++failed;
      continue;
    }
    v.slot_keys[slot] = key;
    v.slot_rows[slot] = r;
  }
  v.counters->tombstones = 0;
  return failed;
}

DynamicStats DynamicUpsert(const DynamicTableView& v, absl::Span<const int64_t> keys,
                           const void* src, EvictionPolicy policy, uint64_t now,
                           int64_t* evicted_keys) {
  DynamicStats stats;
  const int64_t n = static_cast<int64_t>(keys.size());
  std::vector<int64_t> rows(n);
  int64_t new_count = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t slot = FindSlot(v, keys[i]);
    rows[i] = slot >= 0 ? v.slot_rows[slot] : kMissingRow;
    if (slot < 0) ++new_count;
  }
  stats.inserted = new_count;
  stats.updated = n - new_count;

  // Eviction: the `need` smallest (score, key) among stored keys not in the call.
  const int64_t need = std::max<int64_t>(0, new_count - v.counters->free_count);
  if (need > 0) {
    std::vector<uint8_t> touched(v.max_keys, 0);
    for (int64_t i = 0; i < n; ++i) {
      if (rows[i] >= 0) touched[rows[i]] = 1;
    }
    std::vector<std::tuple<uint64_t, int64_t, int64_t>> candidates;  // score, key, row
    candidates.reserve(v.counters->size);
    for (int64_t r = 0; r < v.max_keys; ++r) {
      if (v.row_keys[r] != kEmptyKey && !touched[r]) {
        candidates.emplace_back(v.scores[r], v.row_keys[r], r);
      }
    }
    const int64_t take = std::min<int64_t>(need, static_cast<int64_t>(candidates.size()));
    std::partial_sort(candidates.begin(), candidates.begin() + take, candidates.end());
    for (int64_t j = 0; j < take; ++j) {
      const int64_t key = std::get<1>(candidates[j]);
      EraseAt(v, FindSlot(v, key));
      if (evicted_keys != nullptr) evicted_keys[j] = key;
    }
    stats.evicted = take;
  }

  if (new_count > 0 && v.counters->tombstones > 0 &&
      v.counters->size + v.counters->tombstones + new_count > DynamicMaxOccupied(v.num_slots())) {
    stats.failed += DynamicRehash(v);
    ++stats.rehashes;
  }

  const char* src_bytes = static_cast<const char*>(src);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t key = keys[i];
    int64_t row = rows[i];
    if (row >= 0) {
      if (policy == EvictionPolicy::kLru) {
        v.scores[row] = now;
      } else if (policy == EvictionPolicy::kLfu) {
        v.scores[row] += 1;
      }
    } else {
      if (v.counters->free_count <= 0) {  // only if the precondition was broken
        ++stats.failed;
        --stats.inserted;
        continue;
      }
      const int64_t slot = FreeSlot(v, key, /*reuse_tombstones=*/true);
      if (slot < 0) {
        ++stats.failed;
        --stats.inserted;
        continue;
      }
      row = v.free_rows[--v.counters->free_count];
      if (v.slot_keys[slot] == kDeletedKey) v.counters->tombstones--;
      v.slot_keys[slot] = key;
      v.slot_rows[slot] = row;
      v.row_keys[row] = key;
      v.scores[row] = policy == EvictionPolicy::kLru   ? now
                      : policy == EvictionPolicy::kLfu ? 1
                                                       : 0;
      v.counters->size++;
    }
    std::memcpy(RowPtr(v, row), src_bytes + i * v.row_bytes, v.row_bytes);
  }
  return stats;
}

absl::Status ValidateDynamicTable(const DynamicTableView& v) {
  if (absl::Status s = CheckDynamicTableView(v); !s.ok()) return s;
  const DynamicTableCounters& c = *v.counters;
  if (c.size < 0 || c.free_count < 0 || c.size + c.free_count != v.max_keys) {
    return absl::InternalError(absl::StrCat("counters: size ", c.size, " + free ", c.free_count,
                                            " != max_keys ", v.max_keys));
  }
  int64_t stored = 0;
  for (int64_t r = 0; r < v.max_keys; ++r) {
    const int64_t key = v.row_keys[r];
    if (key == kEmptyKey) continue;
    ++stored;
    const int64_t slot = FindSlot(v, key);
    if (slot < 0 || v.slot_rows[slot] != r) {
      return absl::InternalError(absl::StrCat("key ", key, " of row ", r, " not found at its row"));
    }
  }
  if (stored != c.size) {
    return absl::InternalError(absl::StrCat(stored, " stored rows, size says ", c.size));
  }
  std::vector<uint8_t> is_free(v.max_keys, 0);
  for (int64_t i = 0; i < c.free_count; ++i) {
    const int64_t r = v.free_rows[i];
    if (r < 0 || r >= v.max_keys || is_free[r] || v.row_keys[r] != kEmptyKey) {
      return absl::InternalError(absl::StrCat("free stack entry ", i, " = row ", r, " is bad"));
    }
    is_free[r] = 1;
  }
  int64_t keys_in_slots = 0, tombstones = 0;
  for (int64_t s = 0; s < v.num_slots(); ++s) {
    const int64_t k = v.slot_keys[s];
    if (k == kDeletedKey) {
      ++tombstones;
    } else if (k != kEmptyKey) {
      ++keys_in_slots;
      const int64_t r = v.slot_rows[s];
      if (r < 0 || r >= v.max_keys || v.row_keys[r] != k) {
        return absl::InternalError(absl::StrCat("slot ", s, " holds key ", k, " -> bad row ", r));
      }
    }
  }
  if (keys_in_slots != c.size) {
    return absl::InternalError(absl::StrCat(keys_in_slots, " keys in slots, size says ", c.size));
  }
  if (tombstones != c.tombstones) {
    return absl::InternalError(
        absl::StrCat(tombstones, " tombstone slots, counter says ", c.tombstones));
  }
  return absl::OkStatus();
}

absl::Status DynamicTableStorage::Create(int64_t max_keys, int64_t min_slots, int64_t row_bytes,
                                         DynamicTableStorage* out) {
  if (max_keys <= 0 || row_bytes <= 0 || min_slots < 0) {
    return absl::InvalidArgumentError("max_keys and row_bytes must be > 0, min_slots >= 0");
  }
  if (min_slots == 0) min_slots = 2 * max_keys;
  if (min_slots < max_keys || min_slots > (int64_t{1} << 56)) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_slots ", min_slots, " must be in [max_keys, 2^56]"));
  }
  const int64_t slots = HashTable::SlotsFor(min_slots);
  out->slot_keys_.assign(slots, kEmptyKey);
  out->slot_rows_.assign(slots, kMissingRow);
  out->row_keys_.assign(max_keys, kEmptyKey);
  out->free_rows_.assign(max_keys, 0);
  out->scores_.assign(max_keys, 0);
  out->bytes_.assign(static_cast<size_t>(max_keys * row_bytes), 0);
  out->counters_ = DynamicTableCounters{};
  DynamicTableView& v = out->view_;
  v.slot_keys = out->slot_keys_.data();
  v.slot_rows = out->slot_rows_.data();
  v.num_buckets = slots / kBucketSlots;
  v.row_keys = out->row_keys_.data();
  v.scores = out->scores_.data();
  v.free_rows = out->free_rows_.data();
  v.counters = &out->counters_;
  v.max_keys = max_keys;
  v.rows = out->bytes_.data();
  v.row_bytes = row_bytes;
  return InitDynamicTable(v, {});
}

}  // namespace rankd::kernels
