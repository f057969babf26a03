// A model's weights on one GPU: tables (rows, hash arrays, default vectors),
// MLP and cross weights, and the kernels' table descriptors. Built once per
// GPU and shared read-only by that GPU's workers.
//
// Placement (engine/model/placement_plan.h): each table is in HBM (DEVICE)
// or in pinned host memory (HOST, HostTables: one copy shared by every GPU)
// behind an HBM cache (EmbeddingCache) that a maintenance thread of this
// DeviceModel refreshes from sampled accesses; workers bracket each batch
// with gate()->Enter/Exit so refreshes never rewrite a slot a batch may read.
// A plan whose HBM part does not fit the GPU's free memory (minus
// `reserve_bytes` for the workers' buffers) is refused before anything is
// allocated, with the numbers.
#ifndef RANKD_ENGINE_CUDA_DEVICE_MODEL_H_
#define RANKD_ENGINE_CUDA_DEVICE_MODEL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "engine/cuda/cuda_util.h"
#include "engine/cuda/embedding_cache.h"
#include "engine/cuda/host_tables.h"
#include "engine/cuda/reader_gate.h"
#include "engine/model/model.h"
#include "engine/model/placement_plan.h"
#include "kernels/cpu/dynamic_table.h"
#include "kernels/cuda/cublaslt.h"
#include "kernels/cuda/embedding_lookup.h"

namespace rankd::engine::cuda {

// Device memory a placement plan may use on a GPU with `free_bytes` free,
// when `reserve_bytes` are set aside for the workers: what is free minus
// the reserve and a slack for what is allocated between planning and
// uploading (contexts, streams, host-memory mappings). The one rule both
// DeviceModel::Create and CreateCudaWorkers plan with.
inline int64_t PlanAvailableBytes(int64_t free_bytes, int64_t reserve_bytes) {
  constexpr int64_t kPlanSlackBytes = int64_t{256} << 20;
  return free_bytes - reserve_bytes - kPlanSlackBytes;
}

class DeviceModel {
 public:
  // Which split copy of the DCN cross weights to upload (Options::cross_split).
  enum class CrossSplit : uint8_t { kNone, kTf32x3, kBf16x3 };
  struct Options {
    int device = 0;
    // Device memory kept free for workers (activations, arenas, cuBLASLt
    // workspaces, CUDA graphs).
    int64_t reserve_bytes = int64_t{2} << 30;
    // Pad the K (input width) of the first bottom and first top layer to a
    // multiple of 4 with zero weights, so their inputs' rows are 16-byte
    // aligned: cuBLASLt picks far slower kernels for K = 13 or 367. Workers
    // then write inputs with dense_ld() / top_in_ld() and zero pad columns.
    bool pad_inputs = true;
    // Device-memory budget of this model on this GPU (unset: free memory
    // minus reserve_bytes). Ignored when `plan` is given.
    MemoryBudget budget;
    // The placement to use (shared by every GPU of the model); null: planned
    // here from `budget`.
    std::shared_ptr<const PlacementPlan> plan;
    // Pinned rows of the plan's HOST tables (shared by every GPU); null:
    // created here when the plan has HOST tables.
    std::shared_ptr<HostTables> host_tables;
    // Cache tuning (capacity comes from the plan; max_changes is per table).
    EmbeddingCache::Options cache;
    // HOST tables with the same row size share one cache of the plan's cache
    // rows of them all, whose slots go to the rows accessed most in any of
    // them (embedding_cache.h); false: each table keeps its plan's rows.
    bool shared_cache = true;
    // How often the maintenance thread refreshes the caches.
    int refresh_interval_ms = 100;
    // Also upload the DCN cross weights split for split-precision GEMMs on
    // tensor cores (CudaWorker::Options::cross_math), out of reserve_bytes:
    // kTf32x3 -> DeviceCross::v3, w3 (three times the fp32 weights);
    // kBf16x3 -> DeviceCross::vb, wb (one and a half times). kNone: neither.
    CrossSplit cross_split = CrossSplit::kNone;
  };

  static absl::StatusOr<std::shared_ptr<const DeviceModel>> Create(
      std::shared_ptr<const Model> model, const Options& options);
  ~DeviceModel();

  // Bytes the weights need on the device with every table in HBM.
  static int64_t RequiredBytes(const Model& model);

  // RESOURCE_EXHAUSTED, with the numbers, when the HBM part of `plan` does
  // not fit in `free_bytes` minus `reserve_bytes` of GPU `device`; OK
  // otherwise. Create calls it with cudaMemGetInfo's numbers before
  // allocating anything.
  static absl::Status CheckFits(const Model& model, const PlacementPlan& plan, int device,
                                int64_t free_bytes, int64_t total_bytes, int64_t reserve_bytes);

  const Model& model() const { return *model_; }
  int device() const { return device_; }
  const kernels::cuda::DeviceTable* device_tables() const {
    return tables_.as<kernels::cuda::DeviceTable>();
  }
  const std::vector<kernels::cuda::DeviceLinear>& bottom() const { return bottom_; }
  const std::vector<kernels::cuda::DeviceLinear>& top() const { return top_; }
  struct DeviceCross {
    kernels::cuda::DeviceLinear v;  // x [rows, n] -> [rows, rank], no bias
    kernels::cuda::DeviceLinear w;  // [rows, rank] -> [rows, n], bias b
    // With Options::cross_split == kTf32x3: the same layers over split
    // inputs (kernels/cpu/split_tf32.h): V [rank, 3n], W [n, 3 rank]; else null.
    kernels::cuda::DeviceLinear v3;
    kernels::cuda::DeviceLinear w3;
    // With kBf16x3: likewise in bf16 (kernels/cpu/split_bf16.h); else null.
    kernels::cuda::DeviceLinearBf16 vb;
    kernels::cuda::DeviceLinearBf16 wb;
  };
  const std::vector<DeviceCross>& cross() const { return cross_; }
  // Host copies of the descriptors (device pointers inside).
  const std::vector<kernels::cuda::DeviceTable>& table_descriptors() const {
    return table_descriptors_;
  }
  // Floats per dense input row, and per top-MLP input row (DOT output, or
  // the CAT interaction input); DCN_V2's top input is the cross output, n wide.
  int dense_ld() const { return dense_ld_; }
  int top_in_ld() const { return top_in_ld_; }

  const PlacementPlan& plan() const { return *plan_; }
  bool any_host() const { return plan_->any_host(); }
  // Bytes of all HOST tables' rows (their DeviceTable::host_offset span).
  int64_t host_span_bytes() const { return host_span_bytes_; }
  // Guards the caches against refreshes during workers' batches.
  ReaderGate* gate() const { return gate_.get(); }
  struct CacheInfo {
    int table = 0;
    EmbeddingCache::Stats stats;  // of the cache serving the table (maybe shared)
    int64_t table_rows = 0;       // rows of this table in it now
    int tables = 1;               // tables sharing that cache
  };
  std::vector<CacheInfo> cache_info() const;
  // Dynamic tables whose hash arrays were built on this GPU (the model came
  // without host hash tables): keys inserted, and seconds (copy + build).
  int64_t hash_build_keys() const { return hash_build_keys_; }
  double hash_build_seconds() const { return hash_build_seconds_; }
  // Of which the clear + insert kernels (the rest: allocating, copying keys).
  double hash_insert_seconds() const { return hash_insert_seconds_; }
  // Whether every keys copy of those builds ran from page-locked memory.
  bool hash_keys_pinned() const { return hash_keys_pinned_; }
  // The last refresh error (OK when none).
  absl::Status maintenance_status() const;
  // Runs one refresh of every cache now (benchmarks; the maintenance thread
  // does this every refresh_interval_ms).
  absl::Status RefreshCachesNow() const;

  // Online updates (engine/updates; TableStore::Update), ordered on this GPU
  // rather than by draining its workers:
  //   Stage*: takes this GPU's maintenance lock (held until the Update is
  //     destroyed: no cache refresh or other update meanwhile) and copies the
  //     inputs to device staging on the maintenance stream, and waits for the
  //     copies, so that what batches enqueued after the commit wait for is
  //     only the writes, not a copy still crossing PCIe.
  //   Commit, while the version's gate is held exclusively (no worker is
  //     enqueueing): the maintenance stream waits on every worker's last
  //     batch (AddBatchEvent), the writes are enqueued after it, and
  //     updates_done() is recorded after them.
  //   Wait: waits for the writes and reads the kernels' counts. Host waits
  //     sleep on a blocking-sync event (no core spins through a batch).
  // Workers, under the shared gate, make each batch's stream wait on
  // updates_done() before its first read and record their batch event after
  // its last. So a batch enqueued before a commit never sees its writes and
  // one enqueued after sees all of them.
  class Update {
   public:
    ~Update();  // waits for committed writes; releases the lock
    Update(const Update&) = delete;
    Update& operator=(const Update&) = delete;
    absl::Status Commit(uint64_t now);
    // DYNAMIC tables: the erase's and the upsert's counts (STATIC: zeros).
    absl::Status Wait(kernels::DynamicStats* erased, kernels::DynamicStats* upserted);

   private:
    friend class DeviceModel;
    explicit Update(const DeviceModel* dm);
    absl::Status WaitForBatches();
    absl::Status CommitStatic();
    absl::Status CommitDynamic(uint64_t now);
    const DeviceModel* const dm_;
    int table_ = 0;
    bool dynamic_ = false;
    int64_t n_ = 0;  // ids / keys to write
    int64_t m_ = 0;  // keys to delete
    // Offsets into the device staging buffer.
    size_t off_delete_ = 0, off_rows_ = 0, off_stats_ = 0, off_rowidx_ = 0, off_scratch_ = 0;
    int64_t scratch_bytes_ = 0;
    bool committed_ = false;
    bool waited_ = false;
  };
  // A STATIC table's `ids` (validated by the caller) get `rows` (ids.size()
  // rows of the table's row type), wherever the table lives (HBM; or pinned
  // host memory, written by the GPU) and in the HBM cache slots of those of
  // them that are cached.
  absl::StatusOr<std::unique_ptr<Update>> StageStaticRows(int table,
                                                          absl::Span<const int64_t> ids,
                                                          absl::Span<const uint8_t> rows) const;
  // A DYNAMIC table: erases `delete_keys`, then upserts `keys` -> `rows`
  // (validated by the caller: unique keys, no sentinel) at the Commit's
  // logical time, evicting the lowest-scored keys when the table is full;
  // rows of the upserted keys that are in the HBM cache are written through.
  absl::StatusOr<std::unique_ptr<Update>> StageDynamic(int table,
                                                       absl::Span<const int64_t> delete_keys,
                                                       absl::Span<const int64_t> keys,
                                                       absl::Span<const uint8_t> rows) const;
  // A worker's batch event (on this GPU, recorded after each batch it
  // enqueues): updates wait on it. Remove before destroying the event.
  void AddBatchEvent(cudaEvent_t event) const;
  void RemoveBatchEvent(cudaEvent_t event) const;
  // Recorded after each committed update's writes.
  cudaEvent_t updates_done() const { return updates_done_; }
  // How many of this model's workers on this GPU are inside Execute now
  // (each counts itself in and out): a worker packs a batch's dense rows
  // first only when no other batch of the model keeps the GPU busy.
  std::atomic<int>& busy_workers() const { return busy_workers_; }
  // Copies rows [first, first + n) of a STATIC table into host memory `out`.
  absl::Status ReadStaticRows(int table, int64_t first, int64_t n, uint8_t* out) const;

  // DYNAMIC tables live on the GPU as kernels/cuda/dynamic_table.h's
  // tables: hash slots sized by the config's capacity, rows / row keys /
  // eviction scores / free stack for max_keys keys (HBM, or rows in pinned
  // host memory behind the cache), built from the loaded keys at Create.
  // Lookups touch the scores (LRU / LFU) at the time the workers put in
  // PooledLookupArgs::score_now_ptr.
  bool any_scored() const { return any_scored_; }
  // Copies row slots [first, first + n) of a DYNAMIC table (of max_keys):
  // each row's key (kernels::kEmptyKey: a free row) into `keys` and its bytes
  // into `rows`.
  absl::Status ReadDynamicRows(int table, int64_t first, int64_t n, int64_t* keys,
                               uint8_t* rows) const;
  // The table's dynamic view (device pointers); max_keys == 0 for STATIC.
  const kernels::DynamicTableView& dynamic_view(int table) const { return dynamic_[table]; }

 private:
  DeviceModel() = default;
  void MaintenanceLoop(int interval_ms);
  struct CachedTable {
    int table = 0;
    int64_t row_bytes = 0;
    EmbeddingCache::Member member;  // warm_rows: the plan's cache rows
  };
  // Create's steps, in order. The plan: options.plan, or one made for the
  // GPU's memory; checked against the model and the free memory.
  static absl::StatusOr<std::shared_ptr<const PlacementPlan>> ResolvePlan(
      const Model& model, const Options& options, int64_t free_bytes, int64_t total_bytes);
  // Each table's rows in HBM (or its pinned host rows' device address),
  // default vector and, for DYNAMIC tables, the GPU hash and update state,
  // into table_descriptors_; HOST tables with a cache go to `cached`.
  absl::Status UploadTables(const Options& options, std::vector<CachedTable>* cached);
  // table_descriptors_ to the device array the kernels read.
  absl::Status UploadTableDescriptors();
  // Bottom / top MLP weights (first layers padded to the input strides) and
  // the cross layers, with their split copies.
  absl::Status UploadDenseLayers(const Options& options);
  // The maintenance stream and updates event; with caches, the refresh thread.
  absl::Status StartMaintenance(const Options& options);
  // Makes the caches of `cached` (see Options::shared_cache) and points the
  // tables' descriptors at them.
  absl::Status MakeCaches(std::vector<CachedTable> cached, const Options& options);
  // Allocates `bytes` of device memory kept for the model's life, copying
  // `data` into it unless it is null.
  absl::StatusOr<void*> Upload(const void* data, size_t bytes, const std::string& what);
  // Uploads cross layer `i`'s weights split as `split` asks into `dc`'s
  // v3/w3 (kTf32x3) or vb/wb (kBf16x3); kNone: nothing.
  absl::Status UploadCrossSplit(const CrossLayer& c, size_t i, CrossSplit split, DeviceCross* dc);
  // Builds DYNAMIC table `ti`'s update state and hash slots on the GPU from
  // its loaded keys (rows already at `rows`) and fills `d`'s hash / scores.
  absl::Status BuildDynamicTable(int ti, void* rows, kernels::cuda::DeviceTable* d);
  std::shared_ptr<const Model> model_;
  int device_ = 0;
  std::vector<DeviceBuffer> buffers_;  // everything allocated for this model
  DeviceBuffer tables_;                // DeviceTable[num_tables]
  std::vector<kernels::cuda::DeviceTable> table_descriptors_;
  std::vector<kernels::cuda::DeviceLinear> bottom_, top_;
  std::vector<DeviceCross> cross_;
  int dense_ld_ = 0;
  int top_in_ld_ = 0;
  int64_t hash_build_keys_ = 0;
  double hash_build_seconds_ = 0;
  double hash_insert_seconds_ = 0;
  bool hash_keys_pinned_ = true;
  std::vector<kernels::DynamicTableView> dynamic_;  // per table; max_keys 0: STATIC
  bool any_scored_ = false;

  std::shared_ptr<const PlacementPlan> plan_;
  int64_t host_span_bytes_ = 0;
  std::shared_ptr<HostTables> pinned_tables_;
  std::vector<std::unique_ptr<EmbeddingCache>> caches_;
  // Per table: (index into caches_, member in it), or (-1, 0) without a cache.
  std::vector<std::pair<int, int>> cache_of_table_;
  std::unique_ptr<ReaderGate> gate_;
  mutable absl::Mutex refresh_mu_;  // one refresh at a time (thread or RefreshCachesNow)
  mutable cudaStream_t refresh_stream_ = nullptr;
  mutable absl::Status maintenance_status_;  // guarded by refresh_mu_
  mutable DeviceBuffer update_staging_;       // one update's inputs; guarded by refresh_mu_
  mutable PinnedBuffer update_counts_;        // DynamicStats[2] read back; guarded by refresh_mu_
  // Grows update_staging_ to `bytes` (refresh_mu_ held).
  absl::Status EnsureUpdateStaging(size_t bytes) const;
  cudaEvent_t updates_done_ = nullptr;
  // Host waits on the maintenance stream for online updates: a blocking-sync
  // event, so the updating thread sleeps instead of spinning a core while the
  // stream waits for the workers' batches (refresh_mu_ held).
  cudaEvent_t update_sync_ = nullptr;
  // Waits (sleeping) for everything enqueued on refresh_stream_ so far.
  absl::Status SyncUpdateStream(const char* what) const;
  mutable absl::Mutex events_mu_;
  mutable std::vector<cudaEvent_t> batch_events_ ABSL_GUARDED_BY(events_mu_);
  mutable std::atomic<int> busy_workers_{0};
  absl::Notification stop_;
  std::thread maintenance_;
};

}  // namespace rankd::engine::cuda

#endif  // RANKD_ENGINE_CUDA_DEVICE_MODEL_H_
