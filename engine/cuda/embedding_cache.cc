#include "engine/cuda/embedding_cache.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/embedding_cache.h"

namespace rankd::engine::cuda {
namespace kc = kernels::cuda;

EmbeddingCache::EmbeddingCache(std::string table, int64_t num_rows, int64_t row_bytes,
                               const void* host_rows, const Options& options)
    : table_(std::move(table)),
      num_rows_(num_rows),
      row_bytes_(row_bytes),
      host_rows_(host_rows),
      options_(options),
      hot_(num_rows, std::min(options.capacity_rows, num_rows), options.decay) {}

absl::StatusOr<std::unique_ptr<EmbeddingCache>> EmbeddingCache::Create(
    const std::string& table, int64_t num_rows, int64_t row_bytes, const void* host_rows,
    const Options& options) {
  if (options.capacity_rows <= 0 || options.capacity_rows > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("cache of table ", table, ": capacity ",
                                                   options.capacity_rows,
                                                   " rows is outside [1, 2^31)"));
  }
  if (options.sample_shift < 0 || options.sample_shift > 30) {
    return absl::InvalidArgumentError(
        absl::StrCat("cache of table ", table, ": sample_shift must be in [0, 30]"));
  }
  std::unique_ptr<EmbeddingCache> c(
      new EmbeddingCache(table, num_rows, row_bytes, host_rows, options));
  absl::Status s = c->Init();
  if (!s.ok()) return s;
  return c;
}

absl::Status EmbeddingCache::Init() {
  int64_t log = 1;
  while (log < std::max<int64_t>(options_.log_entries, 1)) log <<= 1;
  options_.log_entries = log;
  options_.max_changes = std::max<int64_t>(1, options_.max_changes);
  const int64_t capacity = hot_.capacity();
  const std::string what = absl::StrCat("cache of table ", table_);
  absl::Status s;
  if (!(s = slot_map_.Allocate(4 * num_rows_, what + " (slot map)")).ok()) return s;
  if (!(s = cache_rows_.Allocate(capacity * row_bytes_, what + " (rows)")).ok()) return s;
  if (!(s = log_.Allocate(8 * log, what + " (access log)")).ok()) return s;
  if (!(s = head_.Allocate(8, what + " (log head)")).ok()) return s;
  if (!(s = change_rows_.Allocate(8 * options_.max_changes, what)).ok()) return s;
  if (!(s = change_slots_.Allocate(4 * options_.max_changes, what)).ok()) return s;
  if (!(s = host_head_.Allocate(8, what)).ok()) return s;
  if (!(s = host_log_.Allocate(8 * log, what)).ok()) return s;
  if (!(s = host_change_rows_.Allocate(8 * options_.max_changes, what)).ok()) return s;
  if (!(s = host_change_slots_.Allocate(4 * options_.max_changes, what)).ok()) return s;
  RANKD_RETURN_IF_CUDA_ERROR(cudaMemset(slot_map_.get(), 0xff, slot_map_.bytes()),
                             what + ": clear slot map");
  RANKD_RETURN_IF_CUDA_ERROR(cudaMemset(log_.get(), 0, log_.bytes()), what + ": clear log");
  RANKD_RETURN_IF_CUDA_ERROR(cudaMemset(head_.get(), 0, 8), what + ": clear log head");
  if (options_.prefill && capacity > 0) {
    // Rows [0, capacity) into slots [0, capacity): one contiguous copy and an
    // identity slot map, written in chunks.
    RANKD_RETURN_IF_CUDA_ERROR(cudaMemcpy(cache_rows_.get(), host_rows_, capacity * row_bytes_,
                                          cudaMemcpyDefault),
                               what + ": warm start copy");
    constexpr int64_t kChunk = 1 << 20;
    std::vector<int32_t> ids(std::min(capacity, kChunk));
    for (int64_t begin = 0; begin < capacity; begin += kChunk) {
      const int64_t n = std::min(kChunk, capacity - begin);
      for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>(begin + i);
      RANKD_RETURN_IF_CUDA_ERROR(cudaMemcpy(slot_map_.as<int32_t>() + begin, ids.data(), 4 * n,
                                            cudaMemcpyHostToDevice),
                                 what + ": warm start slot map");
    }
    hot_.Prefill();
    admitted_ = capacity;
  }
  occupied_ = hot_.occupied();
  return absl::OkStatus();
}

void EmbeddingCache::Describe(kc::DeviceTable* t) const {
  t->host = 1;
  t->cache_slot = slot_map_.as<const int32_t>();
  t->cache_rows = cache_rows_.get();
  t->access_log = log_.as<int64_t>();
  t->access_head = head_.as<unsigned long long>();
  t->access_log_mask = static_cast<uint32_t>(options_.log_entries - 1);
  t->sample_shift = options_.sample_shift;
}

int64_t EmbeddingCache::device_bytes() const {
  return static_cast<int64_t>(slot_map_.bytes() + cache_rows_.bytes() + log_.bytes() +
                              head_.bytes() + change_rows_.bytes() + change_slots_.bytes());
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

absl::Status EmbeddingCache::Upload(const std::vector<int64_t>& rows,
                                    const std::vector<int32_t>& slots, cudaStream_t stream) {
  const size_t n = rows.size();
  std::memcpy(host_change_rows_.as<int64_t>(), rows.data(), 8 * n);
  std::memcpy(host_change_slots_.as<int32_t>(), slots.data(), 4 * n);
  RANKD_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(change_rows_.get(), host_change_rows_.as<void>(),
                                             8 * n, cudaMemcpyHostToDevice, stream),
                             "cache change rows -> device");
  RANKD_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(change_slots_.get(), host_change_slots_.as<void>(),
                                             4 * n, cudaMemcpyHostToDevice, stream),
                             "cache change slots -> device");
  return absl::OkStatus();
}

absl::Status EmbeddingCache::Refresh(cudaStream_t stream, ReaderGate* gate) {
  const std::string what = absl::StrCat("refresh of the cache of table ", table_);
  // New log entries since the last refresh (older ones may be overwritten:
  // the log is a sample, so losing some is fine).
  RANKD_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(host_head_.as<void>(), head_.get(), 8,
                                             cudaMemcpyDeviceToHost, stream),
                             what);
  RANKD_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream), what);
  const uint64_t head = *host_head_.as<uint64_t>();
  const uint64_t entries = static_cast<uint64_t>(options_.log_entries);
  const uint64_t fresh = std::min<uint64_t>(head - last_head_, entries);
  std::vector<int64_t> samples;
  if (fresh > 0) {
    // Only the fresh part of the ring: one copy, or two when it wraps.
    const uint64_t first = (head - fresh) & (entries - 1);
    const uint64_t n1 = std::min<uint64_t>(fresh, entries - first);
    RANKD_RETURN_IF_CUDA_ERROR(
        cudaMemcpyAsync(host_log_.as<int64_t>() + first, log_.as<int64_t>() + first, 8 * n1,
                        cudaMemcpyDeviceToHost, stream),
        what);
    if (fresh > n1) {
      RANKD_RETURN_IF_CUDA_ERROR(
          cudaMemcpyAsync(host_log_.as<int64_t>(), log_.as<int64_t>(), 8 * (fresh - n1),
                          cudaMemcpyDeviceToHost, stream),
          what);
    }
    RANKD_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream), what);
    const int64_t* log = host_log_.as<int64_t>();
    samples.reserve(fresh);
    for (uint64_t i = head - fresh; i < head; ++i) samples.push_back(log[i & (entries - 1)]);
  }
  last_head_ = head;
  sampled_.fetch_add(static_cast<int64_t>(samples.size()), std::memory_order_relaxed);
  const HotSet::Change change = hot_.Plan(samples, options_.max_changes);
  refreshes_.fetch_add(1, std::memory_order_relaxed);
  if (change.empty()) return absl::OkStatus();

  if (!change.evict_rows.empty()) {
    const std::vector<int32_t> none(change.evict_rows.size(), -1);
    absl::Status s = Upload(change.evict_rows, none, stream);
    if (!s.ok()) return s;
    RANKD_RETURN_IF_CUDA_ERROR(
        kc::LaunchSetCacheSlots(slot_map_.as<int32_t>(), num_rows_, change_rows_.as<int64_t>(),
                                change_slots_.as<int32_t>(),
                                static_cast<int64_t>(change.evict_rows.size()), stream),
        what + ": evict");
    RANKD_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream), what);
    if (gate != nullptr) gate->WaitForReaders();
  }
  absl::Status s = Upload(change.admit_rows, change.admit_slots, stream);
  if (!s.ok()) return s;
  const int64_t n = static_cast<int64_t>(change.admit_rows.size());
  RANKD_RETURN_IF_CUDA_ERROR(
      kc::LaunchFillCacheRows(host_rows_, num_rows_, row_bytes_, change_rows_.as<int64_t>(),
                              change_slots_.as<int32_t>(), n, cache_rows_.get(), hot_.capacity(),
                              stream),
      what + ": fill");
  RANKD_RETURN_IF_CUDA_ERROR(
      kc::LaunchSetCacheSlots(slot_map_.as<int32_t>(), num_rows_, change_rows_.as<int64_t>(),
                              change_slots_.as<int32_t>(), n, stream),
      what + ": publish");
  RANKD_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream), what);
  hot_.Apply(change);
  occupied_ = hot_.occupied();
  admitted_.fetch_add(n, std::memory_order_relaxed);
  return absl::OkStatus();
}

}  // namespace rankd::engine::cuda
