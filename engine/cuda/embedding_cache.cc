#include "engine/cuda/embedding_cache.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cuda/embedding_cache.h"

namespace rankd::engine::cuda {
namespace kc = kernels::cuda;

EmbeddingCache::EmbeddingCache(int64_t total_rows, int64_t row_bytes, const Options& options)
    : row_bytes_(row_bytes),
      options_(options),
      hot_(total_rows, std::min(options.capacity_rows, total_rows), options.decay) {}

absl::StatusOr<std::unique_ptr<EmbeddingCache>> EmbeddingCache::Create(
    const std::string& table, int64_t num_rows, int64_t row_bytes, const void* host_rows,
    const Options& options) {
  Member m;
  m.table = table;
  m.num_rows = num_rows;
  m.host_rows = host_rows;
  m.warm_rows = std::min(num_rows, options.capacity_rows);
  return Create({std::move(m)}, row_bytes, options);
}

absl::StatusOr<std::unique_ptr<EmbeddingCache>> EmbeddingCache::Create(
    std::vector<Member> members, int64_t row_bytes, const Options& options) {
  std::vector<std::string> names;
  for (const Member& m : members) names.push_back(m.table);
  const std::string what = absl::StrCat(members.size() == 1 ? "cache of table " : "cache of tables ",
                                        absl::StrJoin(names, ", "));
  if (members.empty()) return absl::InvalidArgumentError("a cache needs at least one table");
  if (options.capacity_rows <= 0 || options.capacity_rows > INT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": capacity ", options.capacity_rows, " rows is outside [1, 2^31)"));
  }
  if (options.sample_shift < 0 || options.sample_shift > 30) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": sample_shift must be in [0, 30]"));
  }
  if (row_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": row_bytes must be > 0"));
  }
  int64_t total_rows = 0, warm_rows = 0;
  for (const Member& m : members) {
    if (m.num_rows <= 0 || m.num_rows > INT64_MAX / 2 - total_rows || m.host_rows == nullptr ||
        m.warm_rows < 0 || m.warm_rows > m.num_rows) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": table ", m.table, " has ", m.num_rows, " rows, ", m.warm_rows,
          " warm-start rows", m.host_rows == nullptr ? " and no host rows" : "",
          " (need rows > 0, 0 <= warm-start rows <= rows, and host rows)"));
    }
    const int64_t log = m.log_entries > 0 ? m.log_entries : options.log_entries;
    if (log <= 0 || log > (int64_t{1} << 30)) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": table ", m.table, ": access log of ", log, " entries is outside [1, 2^30]"));
    }
    total_rows += m.num_rows;
    warm_rows += m.warm_rows;
  }
  if (options.prefill && warm_rows > std::min(options.capacity_rows, total_rows)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": the warm-start rows (", warm_rows,
                                                   ") exceed the capacity (",
                                                   options.capacity_rows, ")"));
  }
  std::unique_ptr<EmbeddingCache> c(new EmbeddingCache(total_rows, row_bytes, options));
  int64_t first = 0;
  for (Member& m : members) {
    auto state = std::make_unique<MemberState>();
    state->table = std::move(m.table);
    state->num_rows = m.num_rows;
    state->host_rows = m.host_rows;
    state->warm_rows = m.warm_rows;
    state->log_entries = m.log_entries > 0 ? m.log_entries : options.log_entries;
    state->first = first;
    first += m.num_rows;
    c->members_.push_back(std::move(state));
  }
  absl::Status s = c->Init();
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
  return c;
}

absl::Status EmbeddingCache::Init() {
  options_.max_changes = std::max<int64_t>(1, options_.max_changes);
  const int64_t capacity = hot_.capacity();
  absl::Status s;
  if (!(s = cache_rows_.Allocate(capacity * row_bytes_, "cached rows")).ok()) return s;
  if (!(s = change_rows_.Allocate(8 * options_.max_changes, "changes")).ok()) return s;
  if (!(s = change_slots_.Allocate(4 * options_.max_changes, "changes")).ok()) return s;
  if (!(s = host_change_rows_.Allocate(8 * options_.max_changes, "changes")).ok()) return s;
  if (!(s = host_change_slots_.Allocate(4 * options_.max_changes, "changes")).ok()) return s;
  std::vector<int64_t> warm;  // HotSet rows in slot order
  for (auto& mp : members_) {
    MemberState& m = *mp;
    const std::string what = absl::StrCat("table ", m.table);
    int64_t log = 1;
    while (log < std::max<int64_t>(m.log_entries, 1)) log <<= 1;
    m.log_entries = log;
    if (!(s = m.slot_map.Allocate(4 * m.num_rows, what + " (slot map)")).ok()) return s;
    if (!(s = m.log.Allocate(8 * log, what + " (access log)")).ok()) return s;
    if (!(s = m.head.Allocate(8, what + " (log head)")).ok()) return s;
    if (!(s = m.host_head.Allocate(8, what)).ok()) return s;
    if (!(s = m.host_log.Allocate(8 * log, what)).ok()) return s;
    RANKD_RETURN_IF_CUDA_ERROR(cudaMemset(m.slot_map.get(), 0xff, m.slot_map.bytes()),
                               what + ": clear slot map");
    RANKD_RETURN_IF_CUDA_ERROR(cudaMemset(m.log.get(), 0, m.log.bytes()), what + ": clear log");
    RANKD_RETURN_IF_CUDA_ERROR(cudaMemset(m.head.get(), 0, 8), what + ": clear log head");
    if (!options_.prefill || m.warm_rows == 0) continue;
    // Rows [0, warm_rows) into the next warm_rows slots: one contiguous copy
    // and a slot map written in chunks.
    const int64_t base = static_cast<int64_t>(warm.size());
    if (s = ChunkedMemcpy(cache_rows_.as<char>() + base * row_bytes_, m.host_rows,
                          m.warm_rows * row_bytes_, cudaMemcpyDefault, what + ": warm start copy");
        !s.ok()) {
      return s;
    }
    constexpr int64_t kChunk = 1 << 20;
    std::vector<int32_t> slots(std::min(m.warm_rows, kChunk));
    for (int64_t begin = 0; begin < m.warm_rows; begin += kChunk) {
      const int64_t n = std::min(kChunk, m.warm_rows - begin);
      for (int64_t i = 0; i < n; ++i) slots[i] = static_cast<int32_t>(base + begin + i);
      RANKD_RETURN_IF_CUDA_ERROR(cudaMemcpy(m.slot_map.as<int32_t>() + begin, slots.data(), 4 * n,
                                            cudaMemcpyHostToDevice),
                                 what + ": warm start slot map");
    }
    for (int64_t r = 0; r < m.warm_rows; ++r) warm.push_back(m.first + r);
    m.cached = m.warm_rows;
  }
  if (!warm.empty()) {
    hot_.Prefill(warm);
    admitted_ = static_cast<int64_t>(warm.size());
  }
  occupied_ = hot_.occupied();
  return absl::OkStatus();
}

int EmbeddingCache::MemberOf(int64_t row) const {
  const auto it = std::upper_bound(members_.begin(), members_.end(), row,
                                   [](int64_t r, const auto& m) { return r < m->first; });
  return static_cast<int>(it - members_.begin()) - 1;
}

void EmbeddingCache::Describe(int member, kc::DeviceTable* t) const {
  const MemberState& m = *members_[member];
  t->host = 1;
  t->cache_slot = m.slot_map.as<const int32_t>();
  t->cache_rows = cache_rows_.get();
  t->access_log = m.log.as<int64_t>();
  t->access_head = m.head.as<unsigned long long>();
  t->access_log_mask = static_cast<uint32_t>(m.log_entries - 1);
  t->sample_shift = options_.sample_shift;
}

int64_t EmbeddingCache::device_bytes() const {
  int64_t bytes = static_cast<int64_t>(cache_rows_.bytes() + change_rows_.bytes() +
                                       change_slots_.bytes());
  for (const auto& m : members_) {
    bytes += static_cast<int64_t>(m->slot_map.bytes() + m->log.bytes() + m->head.bytes());
  }
  return bytes;
}

EmbeddingCache::Stats EmbeddingCache::stats() const {
  Stats s;
  s.capacity = hot_.capacity();
  s.occupied = occupied_.load(std::memory_order_relaxed);
  s.refreshes = refreshes_.load(std::memory_order_relaxed);
  s.admitted = admitted_.load(std::memory_order_relaxed);
  s.sampled = sampled_.load(std::memory_order_relaxed);
  return s;
}

const std::string& EmbeddingCache::table(int member) const { return members_[member]->table; }

int64_t EmbeddingCache::cached_rows(int member) const {
  return members_[member]->cached.load(std::memory_order_relaxed);
}

absl::Status EmbeddingCache::ReadLog(MemberState& m, cudaStream_t stream,
                                     std::vector<int64_t>* samples) {
  const std::string what = absl::StrCat("refresh of the cache of table ", m.table);
  // New log entries since the last refresh (older ones may be overwritten:
  // the log is a sample, so losing some is fine).
  RANKD_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(m.host_head.as<void>(), m.head.get(), 8,
                                             cudaMemcpyDeviceToHost, stream),
                             what);
  RANKD_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream), what);
  const uint64_t head = *m.host_head.as<uint64_t>();
  const uint64_t entries = static_cast<uint64_t>(m.log_entries);
  const uint64_t fresh = std::min<uint64_t>(head - m.last_head, entries);
  m.last_head = head;
  if (fresh == 0) return absl::OkStatus();
  // Only the fresh part of the ring: one copy, or two when it wraps.
  const uint64_t first = (head - fresh) & (entries - 1);
  const uint64_t n1 = std::min<uint64_t>(fresh, entries - first);
  RANKD_RETURN_IF_CUDA_ERROR(
      cudaMemcpyAsync(m.host_log.as<int64_t>() + first, m.log.as<int64_t>() + first, 8 * n1,
                      cudaMemcpyDeviceToHost, stream),
      what);
  if (fresh > n1) {
    RANKD_RETURN_IF_CUDA_ERROR(
        cudaMemcpyAsync(m.host_log.as<int64_t>(), m.log.as<int64_t>(), 8 * (fresh - n1),
                        cudaMemcpyDeviceToHost, stream),
        what);
  }
  RANKD_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream), what);
  const int64_t* log = m.host_log.as<int64_t>();
  for (uint64_t i = head - fresh; i < head; ++i) {
    const int64_t row = log[i & (entries - 1)];
    if (row >= 0 && row < m.num_rows) samples->push_back(m.first + row);
  }
  return absl::OkStatus();
}

template <typename Launch>
absl::Status EmbeddingCache::ForEachMember(const std::vector<int64_t>& rows,
                                           const std::vector<int32_t>& slots, cudaStream_t stream,
                                           const Launch& launch) {
  const size_t n = rows.size();
  // Group by member (stable), as the members' own row indices.
  std::vector<int> member(n);
  std::vector<int64_t> count(members_.size() + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    member[i] = MemberOf(rows[i]);
    ++count[member[i] + 1];
  }
  std::partial_sum(count.begin(), count.end(), count.begin());
  std::vector<int64_t> next(count.begin(), count.end() - 1);
  int64_t* out_rows = host_change_rows_.as<int64_t>();
  int32_t* out_slots = host_change_slots_.as<int32_t>();
  for (size_t i = 0; i < n; ++i) {
    const int64_t at = next[member[i]]++;
    out_rows[at] = rows[i] - members_[member[i]]->first;
    out_slots[at] = slots[i];
  }
  RANKD_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(change_rows_.get(), out_rows, 8 * n,
                                             cudaMemcpyHostToDevice, stream),
                             "cache change rows -> device");
  RANKD_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(change_slots_.get(), out_slots, 4 * n,
                                             cudaMemcpyHostToDevice, stream),
                             "cache change slots -> device");
  for (size_t m = 0; m < members_.size(); ++m) {
    const int64_t k = count[m + 1] - count[m];
    if (k == 0) continue;
    absl::Status s = launch(static_cast<int>(m), change_rows_.as<int64_t>() + count[m],
                            change_slots_.as<int32_t>() + count[m], k);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status EmbeddingCache::Refresh(cudaStream_t stream, ReaderGate* gate) {
  std::vector<int64_t> samples;
  for (auto& m : members_) {
    absl::Status s = ReadLog(*m, stream, &samples);
    if (!s.ok()) return s;
  }
  sampled_.fetch_add(static_cast<int64_t>(samples.size()), std::memory_order_relaxed);
  const HotSet::Change change = hot_.Plan(samples, options_.max_changes);
  refreshes_.fetch_add(1, std::memory_order_relaxed);
  if (change.empty()) return absl::OkStatus();

  const std::string what = members_.size() == 1
                               ? absl::StrCat("refresh of the cache of table ", members_[0]->table)
                               : "refresh of a shared cache";
  if (!change.evict_rows.empty()) {
    const std::vector<int32_t> none(change.evict_rows.size(), -1);
    absl::Status s = ForEachMember(
        change.evict_rows, none, stream,
        [&](int m, const int64_t* rows, const int32_t* slots, int64_t n) -> absl::Status {
          RANKD_RETURN_IF_CUDA_ERROR(
              kc::LaunchSetCacheSlots(members_[m]->slot_map.as<int32_t>(), members_[m]->num_rows,
                                      rows, slots, n, stream),
              absl::StrCat(what, ": evict from table ", members_[m]->table));
          return absl::OkStatus();
        });
    if (!s.ok()) return s;
    RANKD_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream), what);
    if (gate != nullptr) gate->WaitForReaders();
  }
  absl::Status s = ForEachMember(
      change.admit_rows, change.admit_slots, stream,
      [&](int m, const int64_t* rows, const int32_t* slots, int64_t n) -> absl::Status {
        const MemberState& ms = *members_[m];
        RANKD_RETURN_IF_CUDA_ERROR(
            kc::LaunchFillCacheRows(ms.host_rows, ms.num_rows, row_bytes_, rows, slots, n,
                                    cache_rows_.get(), hot_.capacity(), stream),
            absl::StrCat(what, ": fill for table ", ms.table));
        RANKD_RETURN_IF_CUDA_ERROR(
            kc::LaunchSetCacheSlots(ms.slot_map.as<int32_t>(), ms.num_rows, rows, slots, n,
                                    stream),
            absl::StrCat(what, ": publish for table ", ms.table));
        return absl::OkStatus();
      });
  if (!s.ok()) return s;
  RANKD_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream), what);
  hot_.Apply(change);
  for (int64_t row : change.evict_rows) members_[MemberOf(row)]->cached.fetch_sub(1);
  for (int64_t row : change.admit_rows) members_[MemberOf(row)]->cached.fetch_add(1);
  occupied_ = hot_.occupied();
  admitted_.fetch_add(static_cast<int64_t>(change.admit_rows.size()), std::memory_order_relaxed);
  return absl::OkStatus();
}

}  // namespace rankd::engine::cuda
