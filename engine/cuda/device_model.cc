#include "engine/cuda/device_model.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <type_traits>

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/model/host_memory.h"
#include "kernels/cpu/split_bf16.h"
#include "kernels/cpu/split_tf32.h"
#include "kernels/cuda/dynamic_table.h"
#include "kernels/cuda/row_scatter.h"

namespace rankd::engine::cuda {
absl::Status DeviceModel::UploadCrossSplit(const CrossLayer& c, size_t i, CrossSplit split,
                                           DeviceCross* dc) {
  if (split == CrossSplit::kNone) return absl::OkStatus();
  // Uploads V and W in one split layout into `v_layer` and `w_layer`:
  // `width` is the layout's row length for an input width, `split_weights`
  // writes a Linear's weights in it as T (the layer's device weight type),
  // `label` names it in allocation errors.
  // V [rank, n] is a Linear n -> rank; W [n, rank] is a Linear rank -> n.
  auto upload_split = [&](auto width, auto split_weights, const char* label, auto* v_layer,
                          auto* w_layer) -> absl::Status {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(v_layer->weight)>>;
    const int v_width = width(c.n), w_width = width(c.rank);
    std::vector<T> vs(int64_t{c.rank} * v_width), ws(int64_t{c.n} * w_width);
    split_weights(c.v.data(), c.rank, c.n, vs.data());
    split_weights(c.w.data(), c.n, c.rank, ws.data());
    auto v = Upload(vs.data(), sizeof(T) * vs.size(),
                    absl::StrCat("cross[", i, "].V split (", label, ")"));
    if (!v.ok()) return v.status();
    auto w = Upload(ws.data(), sizeof(T) * ws.size(),
                    absl::StrCat("cross[", i, "].W split (", label, ")"));
    if (!w.ok()) return w.status();
    *v_layer = {static_cast<const T*>(*v), nullptr, v_width, c.rank};
    *w_layer = {static_cast<const T*>(*w), dc->w.bias, w_width, c.n};
    return absl::OkStatus();
  };
  if (split == CrossSplit::kTf32x3) {
    return upload_split(kernels::SplitTf32Width, kernels::SplitTf32Weights, "tf32x3", &dc->v3,
                        &dc->w3);
  }
  return upload_split(kernels::SplitBf16Width, kernels::SplitBf16Weights, "bf16x3", &dc->vb,
                      &dc->wb);
}

namespace {

int64_t LinearBytes(const Linear& l) { return 4 * (int64_t{l.in + 3} * l.out + l.out); }

int RoundUp4(int x) { return (x + 3) / 4 * 4; }

// The layer with its input width padded to `in` (zero weights for the pad).
Linear PadInput(const Linear& l, int in) {
  if (in == l.in) return l;
  Linear p;
  p.in = in;
  p.out = l.out;
  p.bias = l.bias;
  p.weight.assign(static_cast<size_t>(in) * l.out, 0.0f);
  for (int o = 0; o < l.out; ++o) {
    std::copy(l.weight.begin() + static_cast<size_t>(o) * l.in,
              l.weight.begin() + static_cast<size_t>(o + 1) * l.in,
              p.weight.begin() + static_cast<size_t>(o) * in);
  }
  return p;
}

}  // namespace

int64_t DeviceModel::RequiredBytes(const Model& m) {
  int64_t bytes = 0;
  for (const EmbeddingTable& t : m.tables) {
    bytes += t.rows.size + 4 * static_cast<int64_t>(t.default_vector.size());
    if (t.dynamic) bytes += t.hash.bytes();
  }
  for (const Linear& l : m.bottom) bytes += LinearBytes(l);
  for (const Linear& l : m.top) bytes += LinearBytes(l);
  for (const CrossLayer& c : m.cross) bytes += 4 * (2 * int64_t{c.n} * c.rank + c.n);
  return bytes;
}

absl::Status DeviceModel::CheckFits(const Model& model, const PlacementPlan& plan, int device,
                                     int64_t free_bytes, int64_t total_bytes,
                                     int64_t reserve_bytes) {
  const int64_t need = plan.device_bytes();
  if (need <= free_bytes - reserve_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "model \"%s\" version %d does not fit on one GPU: its placement needs %.2f GiB of GPU "
      "memory (%s in pinned host memory), but GPU %d has %.2f GiB free of %.2f GiB and %.2f GiB "
      "is kept for workers: lower --device_memory_budget so more tables move to host memory "
      "(placement AUTO or HOST), or free the GPU",
      model.name, model.version, need / 1073741824.0, HumanBytes(plan.host_bytes()), device,
      free_bytes / 1073741824.0, total_bytes / 1073741824.0, reserve_bytes / 1073741824.0));
}

DeviceModel::~DeviceModel() {
  if (maintenance_.joinable()) {
    stop_.Notify();
    maintenance_.join();
  }
  if (refresh_stream_ != nullptr) {
    cudaSetDevice(device_);
    cudaStreamDestroy(refresh_stream_);
  }
  if (updates_done_ != nullptr) cudaEventDestroy(updates_done_);
  if (update_sync_ != nullptr) cudaEventDestroy(update_sync_);
}

std::vector<DeviceModel::CacheInfo> DeviceModel::cache_info() const {
  std::vector<CacheInfo> out;
  for (size_t t = 0; t < cache_of_table_.size(); ++t) {
    const auto [cache, member] = cache_of_table_[t];
    if (cache < 0) continue;
    const EmbeddingCache& c = *caches_[cache];
    out.push_back({static_cast<int>(t), c.stats(), c.cached_rows(member), c.num_members()});
  }
  return out;
}

absl::Status DeviceModel::MakeCaches(std::vector<CachedTable> cached, const Options& options) {
  // Groups of tables that share one cache: by row size when shared, else one
  // table each.
  std::vector<std::vector<CachedTable>> groups;
  for (CachedTable& c : cached) {
    auto same = std::find_if(groups.begin(), groups.end(), [&](const auto& g) {
      return options.shared_cache && g.front().row_bytes == c.row_bytes;
    });
    if (same == groups.end()) {
      groups.emplace_back();
      same = groups.end() - 1;
    }
    same->push_back(std::move(c));
  }
  for (std::vector<CachedTable>& g : groups) {
    EmbeddingCache::Options co = options.cache;
    co.capacity_rows = 0;
    std::vector<EmbeddingCache::Member> members;
    for (const CachedTable& c : g) {
      co.capacity_rows += c.member.warm_rows;  // the plan's cache rows of each table
      members.push_back(c.member);
    }
    // As many changes per refresh as separate caches would have made.
    co.max_changes = options.cache.max_changes * static_cast<int64_t>(g.size());
    auto cache = EmbeddingCache::Create(std::move(members), g.front().row_bytes, co);
    if (!cache.ok()) return cache.status();
    const int index = static_cast<int>(caches_.size());
    for (size_t m = 0; m < g.size(); ++m) {
      (*cache)->Describe(static_cast<int>(m), &table_descriptors_[g[m].table]);
      cache_of_table_[g[m].table] = {index, static_cast<int>(m)};
    }
    caches_.push_back(std::move(*cache));
  }
  return absl::OkStatus();
}

absl::Status DeviceModel::maintenance_status() const {
  absl::MutexLock lock(&refresh_mu_);
  return maintenance_status_;
}

absl::Status DeviceModel::ReadStaticRows(int table, int64_t first, int64_t n, uint8_t* out) const {
  const kernels::cuda::DeviceTable& d = table_descriptors_[table];
  const int64_t row_bytes = model_->tables[table].row_bytes();
  absl::MutexLock lock(&refresh_mu_);
  RANKD_RETURN_IF_CUDA_ERROR(cudaSetDevice(device_), "cudaSetDevice");
  RANKD_RETURN_IF_CUDA_ERROR(
      cudaMemcpyAsync(out, static_cast<const uint8_t*>(d.rows) + first * row_bytes, n * row_bytes,
                      cudaMemcpyDefault, refresh_stream_),
      "read table rows");
  RANKD_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(refresh_stream_), "read table rows");
  return absl::OkStatus();
}

absl::StatusOr<void*> DeviceModel::Upload(const void* data, size_t bytes, const std::string& what) {
  DeviceBuffer buf;
  absl::Status s = buf.Allocate(bytes, what);
  if (!s.ok()) return s;
  if (bytes > 0 && data != nullptr) {
    s = ChunkedMemcpy(buf.get(), data, bytes, cudaMemcpyHostToDevice,
                      absl::StrCat("copy ", what, " to GPU ", device_));
    if (!s.ok()) return s;
  }
  void* p = buf.get();
  buffers_.push_back(std::move(buf));
  return p;
}

namespace {

// Copies a table's `n` loaded keys into `dst` (device). The keys are
// page-locked for the copy, which then runs at DMA speed instead of through
// the driver's pageable staging: in place when they are an allocation of
// their own (made at load); when they are a view into the read-only mapped
// weights file, the whole pages that hold them, read-only. Sets *pinned to
// whether that worked (a failed registration only costs speed).
absl::Status CopyKeysToDevice(const EmbeddingTable& t, int64_t n, void* dst, bool* pinned) {
  void* keys_host = const_cast<uint8_t*>(t.keys.data);
  size_t keys_span = static_cast<size_t>(8 * n);
  unsigned int flags = cudaHostRegisterDefault;
  if (!t.keys.pinnable) {
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t begin = reinterpret_cast<uintptr_t>(t.keys.data) / page * page;
    const uintptr_t end =
        (reinterpret_cast<uintptr_t>(t.keys.data) + keys_span + page - 1) / page * page;
    keys_host = reinterpret_cast<void*>(begin);
    keys_span = end - begin;
    flags = cudaHostRegisterReadOnly;
  }
  const bool registered = cudaHostRegister(keys_host, keys_span, flags) == cudaSuccess;
  if (!registered) cudaGetLastError();
  const cudaError_t copy = cudaMemcpy(dst, t.keys.data, 8 * n, cudaMemcpyHostToDevice);
  if (registered) cudaHostUnregister(keys_host);
  *pinned = registered;
  RANKD_RETURN_IF_CUDA_ERROR(copy, absl::StrCat("copy keys of ", t.name, " to the GPU"));
  return absl::OkStatus();
}

}  // namespace

absl::Status DeviceModel::BuildDynamicTable(int ti, void* rows, kernels::cuda::DeviceTable* d) {
  const EmbeddingTable& t = model_->tables[ti];
  // At least one row: the kernels need a table to exist (max_keys 0 = none).
  const int64_t max_keys = std::max<int64_t>(t.capacity_rows(), 1);
  if (rows == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DYNAMIC table ", t.name, " in HOST placement has no rows (max_keys 0)"));
  }
  const int64_t capacity =
      (static_cast<size_t>(model_->config.tables_size()) == model_->tables.size() &&
       model_->config.tables(ti).capacity() > 0)
          ? model_->config.tables(ti).capacity()
          : 2 * max_keys;
  const int64_t slots = kernels::HashTable::SlotsFor(std::max<int64_t>(capacity, max_keys));
  const auto start = std::chrono::steady_clock::now();
  kernels::DynamicTableView v;
  v.num_buckets = slots / kernels::kBucketSlots;
  v.max_keys = max_keys;
  v.rows = rows;
  v.row_bytes = t.row_bytes();
  struct Array {
    void** out;
    size_t bytes;
    const char* what;
  };
  const Array arrays[] = {
      {reinterpret_cast<void**>(&v.slot_keys), size_t(8) * slots, "hash keys"},
      {reinterpret_cast<void**>(&v.slot_rows), size_t(8) * slots, "hash rows"},
      {reinterpret_cast<void**>(&v.row_keys), size_t(8) * max_keys, "row keys"},
      {reinterpret_cast<void**>(&v.scores), size_t(8) * max_keys, "eviction scores"},
      {reinterpret_cast<void**>(&v.free_rows), size_t(8) * max_keys, "free rows"},
      {reinterpret_cast<void**>(&v.counters), sizeof(kernels::DynamicTableCounters), "counters"},
  };
  for (const Array& a : arrays) {
    auto p = Upload(nullptr, a.bytes, absl::StrCat(a.what, " of ", t.name));
    if (!p.ok()) return p.status();
    *a.out = *p;
  }
  DeviceBuffer input, stats;
  absl::Status s = input.Allocate(std::max<int64_t>(8, 8 * t.num_rows),
                                  absl::StrCat("keys of ", t.name, " (build input)"));
  if (s.ok()) s = stats.Allocate(sizeof(kernels::DynamicStats), "dynamic table build status");
  if (!s.ok()) return s;
  RANKD_RETURN_IF_CUDA_ERROR(cudaMemset(stats.get(), 0, sizeof(kernels::DynamicStats)),
                             "zero build status");
  if (t.num_rows > 0) {
    bool pinned = false;
    s = CopyKeysToDevice(t, t.num_rows, input.get(), &pinned);
    if (!s.ok()) return s;
    hash_keys_pinned_ = hash_keys_pinned_ && pinned;
  }
  const auto copied = std::chrono::steady_clock::now();
  RANKD_RETURN_IF_CUDA_ERROR(
      kernels::cuda::LaunchDynamicInit(v, input.as<int64_t>(), t.num_rows,
                                       stats.as<kernels::DynamicStats>(), nullptr),
      absl::StrCat("build the hash table of ", t.name));
  kernels::DynamicStats result;
  RANKD_RETURN_IF_CUDA_ERROR(
      cudaMemcpy(&result, stats.get(), sizeof(result), cudaMemcpyDeviceToHost),
      absl::StrCat("build the hash table of ", t.name));
  if (result.failed > 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "DYNAMIC table %s: %d keys of its keys tensor cannot be stored (duplicates of an "
        "earlier key, or a reserved key: INT64_MIN, INT64_MIN + 1)",
        t.name, result.failed));
  }
  const auto end = std::chrono::steady_clock::now();
  hash_build_keys_ += t.num_rows;
  hash_build_seconds_ += std::chrono::duration<double>(end - start).count();
  hash_insert_seconds_ += std::chrono::duration<double>(end - copied).count();
  d->num_rows = max_keys;
  d->hash = kernels::AsHashTableView(v);
  d->scores = reinterpret_cast<unsigned long long*>(v.scores);
  d->score_policy = static_cast<int32_t>(t.eviction_policy());
  dynamic_[ti] = v;
  any_scored_ = true;
  return absl::OkStatus();
}

absl::Status DeviceModel::EnsureUpdateStaging(size_t bytes) const {
  if (update_staging_.bytes() >= bytes) return absl::OkStatus();
  // Grow geometrically: a stream of messages of slowly rising size
  // reallocates a few times, not per message.
  return update_staging_.Allocate(std::max(bytes, 2 * update_staging_.bytes()),
                                  "embedding update staging");
}

absl::Status DeviceModel::ReadDynamicRows(int table, int64_t first, int64_t n, int64_t* keys,
                                          uint8_t* rows) const {
  const kernels::DynamicTableView& v = dynamic_[table];
  if (v.max_keys == 0 || first < 0 || n < 0 || first + n > v.max_keys) {
    return absl::InvalidArgumentError(absl::StrCat("ReadDynamicRows: rows [", first, ", ",
                                                   first + n, ") of table ", table));
  }
  absl::MutexLock lock(&refresh_mu_);
  RANKD_RETURN_IF_CUDA_ERROR(cudaSetDevice(device_), "cudaSetDevice");
  RANKD_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(keys, v.row_keys + first, 8 * n, cudaMemcpyDefault,
                                             refresh_stream_),
                             "read row keys");
  RANKD_RETURN_IF_CUDA_ERROR(
      cudaMemcpyAsync(rows, static_cast<const uint8_t*>(v.rows) + first * v.row_bytes,
                      n * v.row_bytes, cudaMemcpyDefault, refresh_stream_),
      "read table rows");
  RANKD_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(refresh_stream_), "read table rows");
  return absl::OkStatus();
}

absl::Status DeviceModel::RefreshCachesNow() const {
  absl::MutexLock lock(&refresh_mu_);
  RANKD_RETURN_IF_CUDA_ERROR(cudaSetDevice(device_), "cudaSetDevice");
  for (const auto& c : caches_) {
    absl::Status s = c->Refresh(refresh_stream_, gate_.get());
    if (!s.ok()) {
      maintenance_status_ = s;
      return s;
    }
  }
  return absl::OkStatus();
}

void DeviceModel::MaintenanceLoop(int interval_ms) {
  while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(interval_ms))) {
    (void)RefreshCachesNow();  // errors kept in maintenance_status_; the next try may work
  }
}

absl::StatusOr<std::shared_ptr<const PlacementPlan>> DeviceModel::ResolvePlan(
    const Model& model, const Options& options, int64_t free_bytes, int64_t total_bytes) {
  std::shared_ptr<const PlacementPlan> plan = options.plan;
  if (plan == nullptr) {
    const int64_t available = PlanAvailableBytes(free_bytes, options.reserve_bytes);
    auto p = PlanPlacement(PlanInputFromModel(model),
                           options.budget.Resolve(total_bytes, available));
    if (!p.ok()) {
      return absl::Status(p.status().code(),
                          absl::StrCat("GPU ", options.device, ": ", p.status().message()));
    }
    plan = std::make_shared<const PlacementPlan>(std::move(*p));
  }
  if (plan->tables.size() != model.tables.size()) {
    return absl::InvalidArgumentError("placement plan does not match the model's tables");
  }
  absl::Status fits =
      CheckFits(model, *plan, options.device, free_bytes, total_bytes, options.reserve_bytes);
  if (!fits.ok()) return fits;
  return plan;
}

absl::Status DeviceModel::UploadTables(const Options& options, std::vector<CachedTable>* cached) {
  for (size_t ti = 0; ti < model_->tables.size(); ++ti) {
    const EmbeddingTable& t = model_->tables[ti];
    const TablePlan& tp = plan_->tables[ti];
    kernels::cuda::DeviceTable d;
    if (tp.tier == Tier::kHost) {
      auto rows = pinned_tables_->DevicePointer(static_cast<int>(ti));
      if (!rows.ok()) return rows.status();
      d.rows = *rows;
      d.host = 1;
      d.host_offset = host_span_bytes_;  // HOST tables back to back, for the fetch order
      if (t.rows.size < t.capacity_rows() * t.row_bytes()) {
        return absl::InternalError(absl::StrCat("HOST table ", t.name, ": ", t.rows.size,
                                                " bytes of rows, fewer than its ",
                                                t.capacity_rows(), " rows"));
      }
      host_span_bytes_ += t.capacity_rows() * t.row_bytes();
      if (tp.cache_rows > 0) {
        // Caches are made after this loop (tables of one row size may share one).
        cached->push_back({static_cast<int>(ti), t.row_bytes(),
                          EmbeddingCache::Member{t.name, t.capacity_rows(), *rows, tp.cache_rows}});
      }
    } else {
      // A DYNAMIC table's rows have room for max_keys keys (capacity_rows).
      const int64_t bytes = std::max<int64_t>(
          t.rows.size, std::max<int64_t>(t.capacity_rows(), t.dynamic ? 1 : 0) * t.row_bytes());
      auto rows = Upload(nullptr, bytes, absl::StrCat("table ", t.name));
      if (!rows.ok()) return rows.status();
      absl::Status copied = ChunkedMemcpy(*rows, t.rows.data, t.rows.size, cudaMemcpyHostToDevice,
                                          absl::StrCat("copy table ", t.name, " to GPU ",
                                                       options.device));
      if (!copied.ok()) return copied;
      d.rows = *rows;
    }
    d.row_type = t.row_type;
    d.pooling = t.pooling;
    d.dim = t.dim;
    d.num_rows = t.capacity_rows();  // a DYNAMIC table's keys take any of max_keys rows
    if (!t.default_vector.empty()) {
      auto dv = Upload(t.default_vector.data(), 4 * t.default_vector.size(),
                           absl::StrCat("default vector of ", t.name));
      if (!dv.ok()) return dv.status();
      d.default_vector = static_cast<const float*>(*dv);
    }
    if (t.dynamic) {
      absl::Status built =
          BuildDynamicTable(static_cast<int>(ti), const_cast<void*>(d.rows), &d);
      if (!built.ok()) return built;
    }
    table_descriptors_.push_back(d);
  }
  return absl::OkStatus();
}

absl::Status DeviceModel::UploadTableDescriptors() {
  const size_t bytes = sizeof(kernels::cuda::DeviceTable) * table_descriptors_.size();
  absl::Status s = tables_.Allocate(bytes, "table descriptors");
  if (!s.ok()) return s;
  RANKD_RETURN_IF_CUDA_ERROR(
      cudaMemcpy(tables_.get(), table_descriptors_.data(), bytes, cudaMemcpyHostToDevice),
      "copy table descriptors to the GPU");
  return absl::OkStatus();
}

absl::Status DeviceModel::UploadDenseLayers(const Options& options) {
  auto linear = [&](const Linear& l, const std::string& what)
      -> absl::StatusOr<kernels::cuda::DeviceLinear> {
    auto w = Upload(l.weight.data(), 4 * l.weight.size(), what + ".weight");
    if (!w.ok()) return w.status();
    auto b = Upload(l.bias.data(), 4 * l.bias.size(), what + ".bias");
    if (!b.ok()) return b.status();
    return kernels::cuda::DeviceLinear{static_cast<const float*>(*w),
                                       static_cast<const float*>(*b), l.in, l.out};
  };
  const bool dcn = model_->interaction == rankd::v1::DCN_V2;
  dense_ld_ = options.pad_inputs ? RoundUp4(model_->num_dense) : model_->num_dense;
  top_in_ld_ = (options.pad_inputs && !dcn) ? RoundUp4(model_->interaction_width)
                                                : model_->interaction_width;
  for (size_t i = 0; i < model_->bottom.size(); ++i) {
    auto l = linear(i == 0 ? PadInput(model_->bottom[i], dense_ld_) : model_->bottom[i],
                    absl::StrCat("bottom[", i, "]"));
    if (!l.ok()) return l.status();
    bottom_.push_back(*l);
  }
  for (size_t i = 0; i < model_->top.size(); ++i) {
    auto l = linear(i == 0 ? PadInput(model_->top[i], top_in_ld_) : model_->top[i],
                    absl::StrCat("top[", i, "]"));
    if (!l.ok()) return l.status();
    top_.push_back(*l);
  }
  for (size_t i = 0; i < model_->cross.size(); ++i) {
    const CrossLayer& c = model_->cross[i];
    auto v = Upload(c.v.data(), 4 * c.v.size(), absl::StrCat("cross[", i, "].V"));
    auto w = Upload(c.w.data(), 4 * c.w.size(), absl::StrCat("cross[", i, "].W"));
    auto b = Upload(c.bias.data(), 4 * c.bias.size(), absl::StrCat("cross[", i, "].bias"));
    if (!v.ok()) return v.status();
    if (!w.ok()) return w.status();
    if (!b.ok()) return b.status();
    DeviceCross dc;
    // V [rank, n] is a Linear n -> rank; W [n, rank] is a Linear rank -> n.
    dc.v = {static_cast<const float*>(*v), nullptr, c.n, c.rank};
    dc.w = {static_cast<const float*>(*w), static_cast<const float*>(*b), c.rank, c.n};
    absl::Status split = UploadCrossSplit(c, i, options.cross_split, &dc);
    if (!split.ok()) return split;
    cross_.push_back(dc);
  }
  return absl::OkStatus();
}

absl::Status DeviceModel::StartMaintenance(const Options& options) {
  // Cache refreshes and online updates.
  RANKD_RETURN_IF_CUDA_ERROR(cudaStreamCreateWithFlags(&refresh_stream_, cudaStreamNonBlocking),
                             "cache refresh stream");
  RANKD_RETURN_IF_CUDA_ERROR(cudaEventCreateWithFlags(&updates_done_, cudaEventDisableTiming),
                             "updates event");
  RANKD_RETURN_IF_CUDA_ERROR(
      cudaEventCreateWithFlags(&update_sync_, cudaEventDisableTiming | cudaEventBlockingSync),
      "update wait event");
  if (!caches_.empty() && options.refresh_interval_ms > 0) {
    const int interval = options.refresh_interval_ms;
    const int device = options.device;
    maintenance_ = std::thread([this, interval, device] {
      cudaSetDevice(device);
      MaintenanceLoop(interval);
    });
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const DeviceModel>> DeviceModel::Create(
    std::shared_ptr<const Model> model, const Options& options) {
  RANKD_RETURN_IF_CUDA_ERROR(cudaSetDevice(options.device),
                             absl::StrCat("cudaSetDevice(", options.device, ")"));
  size_t free_bytes = 0, total_bytes = 0;
  RANKD_RETURN_IF_CUDA_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  auto plan = ResolvePlan(*model, options, static_cast<int64_t>(free_bytes),
                          static_cast<int64_t>(total_bytes));
  if (!plan.ok()) return plan.status();
  std::shared_ptr<HostTables> host_tables = options.host_tables;
  if ((*plan)->any_host() && host_tables == nullptr) {
    auto h = HostTables::Create(model, **plan);
    if (!h.ok()) return h.status();
    host_tables = std::move(*h);
  }
  std::shared_ptr<DeviceModel> dm(new DeviceModel());
  dm->model_ = model;
  dm->device_ = options.device;
  dm->plan_ = *std::move(plan);
  dm->pinned_tables_ = host_tables;
  dm->gate_ = std::make_unique<ReaderGate>();
  dm->cache_of_table_.assign(model->tables.size(), {-1, 0});
  dm->dynamic_.assign(model->tables.size(), kernels::DynamicTableView{});
  std::vector<CachedTable> cached;  // HOST tables with a cache, in table order
  absl::Status s = dm->UploadTables(options, &cached);
  if (s.ok()) s = dm->MakeCaches(std::move(cached), options);
  if (s.ok()) s = dm->UploadTableDescriptors();
  if (s.ok()) s = dm->UploadDenseLayers(options);
  if (s.ok()) s = dm->StartMaintenance(options);
  if (!s.ok()) return s;
  return std::shared_ptr<const DeviceModel>(std::move(dm));
}

}  // namespace rankd::engine::cuda
