#include "engine/model/model.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace rankd::engine {

kernels::PoolTable EmbeddingTable::pool_view(
    const kernels::HashTableView* hash_view, uint64_t score_now) const {
  kernels::PoolTable t;
  t.rows = rows.data;
  t.row_type = row_type;
  // A DYNAMIC table's keys may sit in any row up to max_keys (online
  // inserts); num_rows counts only the keys it loaded with.
  t.num_rows = capacity_rows();
  t.dim = dim;
  t.pooling = pooling;
  // A STATIC table must never be given a hash view: the kernel would treat
  // its ids as keys.
  t.hash = dynamic ? hash_view : nullptr;
  t.default_vector = default_vector.empty() ? nullptr : default_vector.data();
  if (dynamic && live != nullptr && score_now > 0) {
    t.scores = live->scores.data();
    t.score_policy = eviction_policy();
    t.score_now = score_now;
  }
  return t;
}

kernels::DynamicTableView EmbeddingTable::dynamic_view() const {
  kernels::DynamicTableView v;
  const kernels::HashTableView h = hash.view();
  v.slot_keys = const_cast<int64_t*>(h.keys);
  v.slot_rows = const_cast<int64_t*>(h.rows);
  v.num_buckets = h.num_buckets;
  v.row_keys = reinterpret_cast<int64_t*>(const_cast<uint8_t*>(keys.data));
  v.scores = live->scores.data();
  v.free_rows = live->free_rows.data();
  v.counters = &live->counters;
  v.max_keys = max_keys;
  v.rows = const_cast<uint8_t*>(rows.data);
  v.row_bytes = row_bytes();
  return v;
}

absl::Status AttachDynamicState(EmbeddingTable* t) {
  if (!t->dynamic || t->hash.num_slots() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("table ", t->name, ": not a DYNAMIC table with host hash slots"));
  }
  const int64_t max_keys = std::max(t->max_keys, t->num_rows);
  if (!t->keys.writable || !t->rows.writable || t->keys.size < max_keys * 8 ||
      t->rows.size < max_keys * t->row_bytes() || t->hash.num_slots() < max_keys) {
    return absl::InvalidArgumentError(absl::StrCat(
        "table ", t->name, ": keys, rows and hash slots must be writable and hold max_keys (",
        max_keys, ") entries"));
  }
  t->max_keys = max_keys;
  auto state = std::make_shared<DynamicState>();
  state->scores.assign(max_keys, 0);
  state->free_rows.resize(max_keys - t->num_rows);
  for (size_t i = 0; i < state->free_rows.size(); ++i) {
    state->free_rows[i] = max_keys - 1 - static_cast<int64_t>(i);
  }
  state->free_rows.resize(max_keys);  // room: erased rows are pushed here
  state->counters.size = t->num_rows;
  state->counters.free_count = max_keys - t->num_rows;
  state->counters.tombstones = 0;
  int64_t* row_keys = reinterpret_cast<int64_t*>(const_cast<uint8_t*>(t->keys.data));
  std::fill(row_keys + t->num_rows, row_keys + max_keys, kernels::kEmptyKey);
  t->live = std::move(state);
  return absl::OkStatus();
}

int64_t Model::table_bytes() const {
  int64_t bytes = 0;
  for (const EmbeddingTable& t : tables) {
    bytes += t.rows.size;
    if (t.dynamic) bytes += t.keys.size + t.hash.bytes();
  }
  return bytes;
}

const char* TableSourceName(TableSource source) {
  switch (source) {
    case TableSource::kFileRead:
      return "file (read)";
    case TableSource::kRandom:
      return "random";
  }
  return "?";
}

int64_t ModelLoadStats::RowBytes(TableSource source) const {
  int64_t bytes = 0;
  for (const TableLoadStats& t : tables) {
    if (t.source == source) bytes += t.row_bytes;
  }
  return bytes;
}

double ModelLoadStats::RowSeconds(TableSource source) const {
  double seconds = 0;
  for (const TableLoadStats& t : tables) {
    if (t.source == source) seconds += t.rows_seconds;
  }
  return seconds;
}

int64_t ModelLoadStats::HashKeys() const {
  int64_t keys = 0;
  for (const TableLoadStats& t : tables) keys += t.hash_keys;
  return keys;
}

double ModelLoadStats::HashSeconds() const {
  double seconds = 0;
  for (const TableLoadStats& t : tables) seconds += t.hash_seconds;
  return seconds;
}

}  // namespace rankd::engine
