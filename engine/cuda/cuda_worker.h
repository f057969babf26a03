// CudaWorker: one execution context on one GPU, implementing the engine's
// Worker interface (engine/serving/worker.h).
//
// Per worker: a CUDA stream, a pinned host staging arena the batch is packed
// into (batch_packer.h), the matching device arena (one host->device copy per
// batch slice), activation buffers sized for `max_rows`, a cuBLASLt runner
// (handle + workspace), and a CUDA graph per row bucket captured on first use
// and replayed after. Scores (and unresolved-id counters) come back in one
// device->host copy. Batches larger than `max_rows` run in slices. A batch
// of one mid-sized slice that finds no other batch of the model on the GPU
// goes in two parts (Options::dense_first_min_rows): its dense rows are
// copied and the bottom MLP's graph launched, then the rest is packed while
// the GPU computes, copied, and the rest of the forward's graph launched.
//
// Ownership and threading: shares the DeviceModel (read-only) with the other
// workers of its GPU; owns everything else. Execute is called by one thread
// at a time (the ModelInstance's worker thread); workers of the same GPU run
// concurrently on their own streams.
#ifndef RANKD_ENGINE_CUDA_CUDA_WORKER_H_
#define RANKD_ENGINE_CUDA_CUDA_WORKER_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/cuda/batch_packer.h"
#include "engine/cuda/cuda_util.h"
#include "engine/cuda/device_model.h"
#include "engine/cuda/pack_pool.h"
#include "engine/serving/worker.h"
#include "engine/updates/live_tables.h"
#include "kernels/cuda/cublaslt.h"
#include "kernels/cuda/tiny_dlrm.h"

namespace rankd::engine::cuda {

class CudaWorker final : public Worker {
 public:
  // How the DCN cross layers' GEMMs run (their K is the whole interaction
  // width, thousands of floats on mlperf, where a single TF32 pass loses the 1e-3 bound).
  enum class CrossMath {
    kAuto,    // kFp32 under MathMode::kFp32, kTf32x3 under kTf32
    kFp32,    // plain fp32 (no tensor cores)
    kTf32x3,  // split precision on TF32 tensor cores, nearly fp32
              // (kernels/cpu/split_tf32.h); needs the DeviceModel's split
              // weights (DeviceModel::Options::cross_split, CrossSplitFor)
    kTf32,    // single-pass TF32: fastest, least accurate
    kBf16x3,  // split precision on bf16 tensor cores, ~2^-17 per product
              // (kernels/cpu/split_bf16.h); needs the DeviceModel's split
              // weights like kTf32x3
  };
  struct Options {
    // Rows one slice computes (buffers are sized for it); larger batches run
    // in several slices.
    int max_rows = 4096;
    // fp32: exact products (matches the CPU engine within 1e-5); tf32: tensor
    // cores for the MLPs (within ~1e-3).
    kernels::cuda::MathMode math = kernels::cuda::MathMode::kFp32;
    // DCN cross layers (see CrossMath). kTf32x3 costs a [max_rows, 3n]
    // fp32 activation buffer per worker, kBf16x3 the same in bf16.
    CrossMath cross_math = CrossMath::kAuto;
    // Replay a CUDA graph per row bucket after the first batch of a bucket.
    bool use_graphs = true;
    // Use the single fused kernel for models small enough (mini and its sweep).
    bool allow_fused_tiny = true;
    // Batches (slices) of at most kernels::cuda::kSmallRowsMax padded rows
    // (one-candidate requests and other small ones) run their MLP layers on
    // the small-rows kernel (kernels/cuda/small_rows_linear.h: fp32, each
    // layer launched as a programmatic dependent of the one before) instead
    // of cuBLASLt, whose GEMMs at that size are mostly launch and prologue.
    // false: cuBLASLt at every size.
    bool small_rows_mlp = true;
    // Slices of at most this many padded rows run the pooled lookup on a
    // second stream beside the bottom MLP (two branches of the captured
    // graph; they write different columns of the interaction input). Worth
    // it where both are chains of latency that leave most SMs idle, as in
    // the small-rows bucket; at larger buckets the branches contend for the
    // SMs and gain little or lose (docs/benchmarks.md, "Small MLPs"). 0:
    // never. Not with HOST tables, whose staging passes stay on the
    // worker's stream.
    int64_t lookup_beside_mlp_max_rows = 16;
    // Batches of one slice of [dense_first_min_rows, dense_first_max_rows]
    // rows (with a bottom MLP not pooled beside it), started while no other
    // worker of the model on this GPU is inside Execute, are packed in two
    // steps: the dense rows first, copied to the GPU and the bottom MLP
    // started on them, then the bags and ids, packed while the GPU runs the
    // bottom MLP, copied, and the rest of the forward (batch_packer.h,
    // PackParts). That hides the bottom MLP behind the packing of a batch
    // alone on the GPU; with other batches in flight their work fills the
    // GPU anyway and the second copy and graph launch only add to each
    // batch. Below the range packing is short; above it the packing's two
    // passes over the pool cost more than the overlap saves. 0: never.
    int64_t dense_first_min_rows = 256;
    int64_t dense_first_max_rows = 4096;
    // Batches of one slice of at least this many rows (with a bottom MLP not
    // pooled beside it, and not dense rows first) are packed in one pass and
    // copied in two: the dense rows first on the worker's stream, where the
    // bottom MLP then starts on them, and the rest of the batch (bags, ids,
    // weights) meanwhile on a second stream, which the rest of the forward
    // waits for, so the bottom MLP hides the copy of the ids. Whether or not
    // other batches of the model are in flight: it shortens each batch, so
    // two workers keep the GPU busier too. Below the default the steady
    // state of several workers gained nothing (docs/benchmarks.md). 0: never.
    int64_t copy_beside_mlp_min_rows = 16384;
    // Row buckets of at least this many rows pack a feature whose every bag
    // in the slice holds one id as its ids only (batch_packer.h, unit bags);
    // such features of STATIC tables in HBM whose rows are whole 16-byte
    // chunks are pooled by the unit-bag kernel (kernels/cuda/
    // unit_bag_lookup.h) from their ids alone, and other unit features have
    // their bag entries written by a kernel on the device before the
    // lookup. A batch whose features are all unit copies no bag entries at
    // all: fewer bytes to pack and to copy. Smaller buckets keep explicit
    // entries: there the unit layout did not make a batch faster
    // (docs/benchmarks.md). 0: never.
    int64_t unit_bags_min_rows = 512;
    // Pool unit features of qualifying tables with the unit-bag kernel
    // (kernels/cuda/unit_bag_lookup.h); false: the general pooling kernel
    // takes them too (bag entries written on the device). Both give the same
    // results bit for bit; false is the peer in the benchmarks.
    bool unit_bag_kernel = true;
    // Batches whose features are all pooled by the unit-bag kernel
    // (UnitBagsOnly) run that lookup fused with a DOT interaction
    // (kernels/cuda/unit_bag_dot.h): one launch instead of two, the pooled
    // vectors never written to global memory, the same scores bit for bit.
    // Not in the buckets where the lookup runs beside the bottom MLP
    // (lookup_beside_mlp_max_rows). false: two launches (the peer in the
    // benchmarks).
    bool fused_lookup_dot = true;
    // Pack bag offsets as int32, and the ids of every feature whose table
    // is keyed by row index below 2^31 rows (batch_packer.h, the compact
    // layout; DYNAMIC tables' keys stay int64; not with the fused tiny
    // kernel): fewer bytes to pack and to copy to the GPU per batch. false:
    // always int64.
    bool compact_ids = true;
    // Device-memory budget per GPU for the model (CreateCudaWorkers; unset:
    // the GPU's free memory minus the workers' reserve). Tables that do not
    // fit go to pinned host memory behind an HBM cache.
    MemoryBudget budget;
    // HOST tables: HBM this worker sets aside for the rows a batch misses in
    // the cache, each distinct row copied from host memory once per batch
    // before pooling (kernels/cuda/embedding_lookup.h, HostStaging). Misses
    // beyond it are read from host memory directly. Part of the workers'
    // reserve (DeviceModel::Options::reserve_bytes), allocated only when the
    // model has HOST tables. 128 MiB = 262,144 rows of dim 128 fp32.
    int64_t host_staging_bytes = int64_t{128} << 20;
    // Stage a batch's misses only when the previous batch missed the cache
    // on at least this fraction of its HOST-table lookups; below it the
    // misses are read from host memory inside the pooling kernel, where they
    // overlap the HBM reads. 0.03 sits between the miss rates where
    // cache_bench finds direct reads and staging ahead with the shared cache
    // and the address-ordered gather (the crossover and its figures:
    // docs/benchmarks.md, host tables behind the HBM cache).
    double staging_min_miss_rate = 0.03;
    // HOST tables of one row size share one HBM cache (DeviceModel::Options::
    // shared_cache; CreateCudaWorkers).
    bool shared_host_cache = true;
    // Threads of the pool that splits the host packing of large batches
    // (pack_pool.h), shared by every worker CreateCudaWorkers makes. -1: the
    // default (PackPool::DefaultThreads: half the usable CPUs, at most 8);
    // 0: no pool, each worker packs alone.
    int pack_threads = -1;
    // Batches (slices) of fewer rows are packed on the worker's own thread:
    // below it, waking pool threads costs about what it saves.
    int parallel_pack_min_rows = 1024;
  };

  // `pack_pool` (may be null) is shared with other workers; when null and
  // options.pack_threads is not 0, the worker makes its own.
  static absl::StatusOr<std::unique_ptr<CudaWorker>> Create(
      std::shared_ptr<const DeviceModel> model, const Options& options, std::string name,
      std::shared_ptr<PackPool> pack_pool = nullptr);
  ~CudaWorker() override;

  absl::string_view name() const override { return name_; }
  absl::Status Execute(absl::Span<const Request* const> requests,
                       absl::Span<const absl::Span<float>> scores,
                       BatchStats* stats) override;
  // Executes the batch as if alone on the GPU, then as if another batch of
  // the model were in flight: a batch that finds the GPU busy skips the
  // dense-rows-first path (Options::dense_first_min_rows) for the one-pass
  // one, whose graph is another.
  absl::Status WarmUp(absl::Span<const Request* const> requests,
                      absl::Span<const absl::Span<float>> scores) override;
  // Holds `live`'s gate only while a batch is enqueued: the CUDA store
  // orders updates on the GPU (DeviceModel::Update).
  bool AttachLiveTables(LiveTables* live) override {
    live_ = live;
    return true;
  }

  // Where the host's time went in an Execute (wall time on the calling
  // thread, summed over its slices), so benchmarks and profiles can tell
  // packing from waiting for the GPU (read through CudaWorkerProbe).
  struct HostPathTimes {
    double offsets_us = 0;  // ComputeRequestOffsets, stats set-up, HOST tables' reader gate
    double pack_us = 0;     // arena sizing, id counting, layout, PackSlice
    int pack_tasks_parallel = 0;  // slices packed on the pool
    double enqueue_us = 0;  // copies in, forward (graph launch), copies out queued
    double wait_us = 0;     // cudaStreamSynchronize: the GPU's work not hidden
    double unpack_us = 0;   // scores to the requests, counters to the stats
    int slices = 0;
  };

 private:
  // Benchmarks' and profiles' view (cuda_worker_probe.h): replays and times
  // the last forward, reads host_path_.
  friend class CudaWorkerProbe;


  CudaWorker(std::shared_ptr<const DeviceModel> model, const Options& options, std::string name,
             std::shared_ptr<PackPool> pack_pool);
  // The pool's ParallelFor for a slice of `rows` rows, or none (pack alone).
  ParallelFor PackParallel(int64_t rows) const;
  // Creates the streams, runners and buffers (the steps below, in order).
  absl::Status Init();
  // The worker's stream and batch event; the side streams and their events
  // when Options turn them on.
  absl::Status CreateStreams();
  // cuBLASLt runners: the MLPs' (Options::math) and the cross layers'.
  absl::Status CreateLinearRunners();
  // Activation buffers for `rows` rows (zeroed: padding rows stay finite).
  absl::Status AllocateActivations(int64_t rows);
  // Counters and scores (device and host), the staging limit and the score clock.
  absl::Status AllocateOutputs(int64_t rows);
  // Sets fp32_tables_only_, unit_bag_chunks_, every_table_unit_pooled_ and
  // fused_dot_fits_ from the model's tables (and Options::unit_bag_kernel,
  // Options::fused_lookup_dot).
  void ChooseLookupKernels();
  // Host arenas for slices of up to `ids` ids: the first always, the second
  // when `slots` is 2 (batches of several slices). Growing drops the graphs.
  absl::Status EnsureArena(int64_t ids, int slots);
  // Which part of a slice's forward an enqueue, a graph or a direct run
  // covers: all of it, or the bottom MLP and then the rest (the lookup,
  // interaction and top MLP), for slices packed dense rows first.
  enum class ForwardPart { kWhole = 0, kBottom = 1, kRest = 2 };
  // Packs `parts` of rows [row_begin, row_end) into host arena `slot`
  // (layouts_[slot]).
  void PackInto(int slot, absl::Span<const Request* const> requests,
                const RequestOffsets& offsets, int64_t row_begin, int64_t row_end,
                PackParts parts = PackParts::kAll);
  // Enqueues `part` of the slice packed in `slot` (it becomes cur_). kWhole
  // and kRest hold `live`'s gate when not null, wait for committed updates
  // and record batch_done_; kBottom reads no table and does none of that.
  // copy_in false: the part's copies were already enqueued (and stream_
  // waits for them).
  absl::Status EnqueuePacked(int slot, LiveTables* live,
                             ForwardPart part = ForwardPart::kWhole, bool copy_in = true);
  // Whether a batch of `rows` rows in one slice packs its dense rows first
  // (Options::dense_first_min_rows; the caller checks that the GPU is
  // otherwise idle).
  bool DenseFirst(int64_t rows) const;
  // Whether a one-slice batch of `rows` rows can run as a bottom part and a
  // rest part (ForwardPart): it has a bottom MLP, not pooled beside its
  // lookup, and does not take the fused tiny kernel.
  bool CanSplitAtBottomMlp(int64_t rows) const;
  // Packs and enqueues a one-slice batch of `rows` rows dense rows first
  // (DenseFirst): the bottom MLP runs while the rest is packed.
  absl::Status PackAndEnqueueDenseFirst(absl::Span<const Request* const> requests,
                                        const RequestOffsets& offsets, int64_t rows);
  // Whether a batch of `rows` rows in one slice copies its bags and ids
  // beside the bottom MLP (Options::copy_beside_mlp_min_rows).
  bool CopyBeside(int64_t rows) const;
  // Packs a one-slice batch of `rows` rows and enqueues it with the copy of
  // everything but the dense rows on copy_stream_, beside the bottom MLP.
  absl::Status PackAndEnqueueCopyBeside(absl::Span<const Request* const> requests,
                                        const RequestOffsets& offsets, int64_t rows);
  // After the slice in cur_ (rows [begin, end)) finished: its scores to the
  // requests (*request: the request holding row `begin`, advanced), its
  // counters to `stats` (may be null), the HOST-table staging decision.
  void UnpackSlice(const RequestOffsets& offsets, int64_t begin, int64_t end,
                   absl::Span<const absl::Span<float>> scores, BatchStats* stats,
                   size_t* request);
  void StartStats(BatchStats* stats) const;
  // `part` of the packed slice cur_: its copies and kernels, on stream_ (no
  // sync); kBottom copies the dense rows only and copies nothing back.
  absl::Status EnqueueSlice(ForwardPart part, bool copy_in = true);
  // The host -> device copies of `part` of the slice in cur_, on `stream`.
  absl::Status CopyIn(ForwardPart part, cudaStream_t stream);
  // `part` of the forward: the graph of its bucket, captured after a first
  // direct run (Options::use_graphs), or a direct run.
  absl::Status LaunchForward(const PackedLayout& layout, ForwardPart part);
  // `part` of the forward, launched directly.
  absl::Status RunForward(const PackedLayout& layout, ForwardPart part);
  // The forward of the packed slice: its kernels only, on stream_, in four
  // stages (CudaWorkerProbe::ProfileLastForward times each).
  absl::Status Forward(const PackedLayout& layout);
  // The forward after the bottom MLP: lookup, interaction, top MLP.
  absl::Status ForwardAfterBottom(const PackedLayout& layout);
  // The interaction (or DCN cross layers) and the top MLP with its logit.
  absl::Status InteractionAndTop(const PackedLayout& layout);
  absl::Status BottomMlp(const PackedLayout& layout);
  absl::Status PooledLookup(const PackedLayout& layout, cudaStream_t stream);
  // The pooled lookup's arguments for this slice.
  kernels::cuda::PooledLookupArgs LookupArgs(const PackedLayout& layout) const;
  // FusedLookupDot slices: the lookup fused with the dot interaction, then
  // the top MLP (the probe's lookup stage is then empty).
  absl::Status FusedLookupDotAndTop(const PackedLayout& layout);
  // The bottom MLP on stream_ and the pooled lookup on side_stream_ at once.
  absl::Status BottomMlpBesideLookup(const PackedLayout& layout);
  // Sets the top MLP's input and its row stride.
  absl::Status Interaction(int64_t rows, const float** top_in, int64_t* top_ld);
  absl::Status TopMlp(int64_t rows, const float* in, int64_t in_ld);
  // Whether a slice of `rows` padded rows runs its MLP on the small-rows
  // kernel (Options::small_rows_mlp).
  bool SmallRows(int64_t rows) const;
  // Whether a slice of `rows` padded rows pools beside the bottom MLP
  // (Options::lookup_beside_mlp_max_rows).
  bool LookupBesideMlp(int64_t rows) const;
  // One ReLU layer of either MLP on the small-rows kernel or cuBLASLt;
  // chained: the previous work on the stream is a kernel (small_rows_linear.h).
  absl::Status RunLinear(const kernels::cuda::DeviceLinear& layer, const float* in, int64_t in_ld,
                         int64_t rows, float* out, int64_t out_ld, bool chained);
  void MarkStage();  // an event between stages, inside a probe's profile only
  // out = in . layer^T (+ bias) for a cross layer, in cross_math_: `tf32x3`
  // and `bf16x3` are the same layer's split weights for those modes.
  absl::Status CrossGemm(const kernels::cuda::DeviceLinear& layer,
                         const kernels::cuda::DeviceLinear& tf32x3,
                         const kernels::cuda::DeviceLinearBf16& bf16x3, const float* in,
                         int64_t rows, float* out);
  // The fused single-kernel forward, when the model is tiny and the slice has
  // no shared bags (the kernel takes per-candidate bags only).
  bool CanRunTiny(const PackedLayout& layout) const;
  absl::Status ForwardTiny(const PackedLayout& layout);
  absl::Status InitTiny();
  int64_t Bucket(int64_t rows) const;

  std::shared_ptr<const DeviceModel> dm_;
  const Options options_;
  const std::string name_;
  cudaStream_t stream_ = nullptr;
  // Slices of at most Options::lookup_beside_mlp_max_rows rows pool their
  // embeddings on side_stream_ while the bottom MLP runs on stream_: fork_
  // and join_ order the two branches (in the captured graph they become
  // parallel branches).
  cudaStream_t side_stream_ = nullptr;
  // Options::copy_beside_mlp_min_rows: the second copy's stream, and the
  // event stream_ waits on before the rest of the forward.
  cudaStream_t copy_stream_ = nullptr;
  cudaEvent_t copied_ = nullptr;
  cudaEvent_t fork_ = nullptr;
  cudaEvent_t join_ = nullptr;
  // kernels::cuda::PooledLookupArgs::fp32_tables_only for every lookup of
  // this worker (set by Init).
  bool fp32_tables_only_ = false;
  // kernels::cuda::PooledLookupArgs::unit_bag_chunks for batches packed with
  // unit bags (the most 16-byte chunks in a row of a table the unit-bag
  // kernel pools; 0: none qualifies), and whether every table qualifies
  // (then no unit feature's bag entries are ever read, and they are not
  // expanded). Set by Init.
  int32_t unit_bag_chunks_ = 0;
  bool every_table_unit_pooled_ = false;
  // Options::fused_lookup_dot holds and the model fits the fused kernel:
  // DOT interaction, every table pooled by the unit-bag kernel, one dim (a
  // multiple of 4) whose rows fit its shared memory. Set by Init.
  bool fused_dot_fits_ = false;
  // Recorded after each enqueued slice (DeviceModel::AddBatchEvent).
  cudaEvent_t batch_done_ = nullptr;
  LiveTables* live_ = nullptr;  // AttachLiveTables; null: the caller holds the gate
  std::unique_ptr<kernels::cuda::LinearRunner> linear_;
  // DCN cross layers' runner (fp32, or TF32 for the split and single-pass
  // modes) and the resolved mode.
  std::unique_ptr<kernels::cuda::LinearRunner> cross_linear_;
  CrossMath cross_math_ = CrossMath::kFp32;
  bool fused_tiny_ = false;

  // Interaction input layout: x at column 0, feature f at feat_col_[f].
  std::vector<int> feat_col_;
  int feat_width_ = 0;
  int max_width_ = 0;

  // Staging.
  std::shared_ptr<PackPool> pack_pool_;  // null: pack on the calling thread
  ParallelFor pack_parallel_;            // pack_pool_->AsParallelFor()
  RequestOffsets offsets_;               // of the current batch; storage reused
  int64_t ids_capacity_ = 0;
  bool compact_ = false;  // the arenas' layouts are compact (Options::compact_ids)
  // Two host arenas: a batch of several slices packs slice k + 1 into one
  // while the GPU copies and computes slice k from the other (the second is
  // allocated by the first such batch). One device arena: a slice's copy is
  // queued after the previous slice's kernels on the same stream.
  PinnedBuffer host_arenas_[2];
  PackedLayout layouts_[2];
  int cur_ = 0;  // the arena of the slice enqueued last
  DeviceBuffer device_arena_;

  // Activations, sized for max_rows.
  DeviceBuffer feats_, ping_, pong_, top_in_, cross_a_, cross_b_, cross_t_, cross_r_;
  // kTf32x3 / kBf16x3: [max_rows, 3 max(n, rank)] split inputs (fp32 / bf16)
  DeviceBuffer cross_split_;
  // Where each counter sits among out_'s u64 counters. The counters only
  // ever grow (zeroed once at start, never reset, so no memset on the
  // latency path); a batch's counts are the difference from the previous
  // readout (last_counts_).
  struct CounterLayout {
    size_t unresolved_per_table = 0;    // [tables]: the general path
    size_t unresolved_per_feature = 0;  // [features]: the fused path
    size_t host_reads = 0;              // [tables]: HBM-cache misses
    size_t host_rows_read = 0;          // [tables]: rows copied from host memory
    size_t total = 0;
    CounterLayout() = default;
    CounterLayout(size_t tables, size_t features)
        : unresolved_per_feature(tables),
          host_reads(tables + features),
          host_rows_read(2 * tables + features),
          total(3 * tables + features) {}
  };
  // The counters, then (16-byte aligned, at scores_offset_ bytes) the
  // scores [max_rows]: a slice's counters and scores come back in one copy
  // of its first scores_offset_ + 4 * rows bytes.
  DeviceBuffer out_;
  PinnedBuffer host_out_;
  size_t scores_offset_ = 0;
  CounterLayout counters_;
  std::vector<unsigned long long> last_counts_;
  unsigned long long* device_counters() const {
    return reinterpret_cast<unsigned long long*>(out_.as<uint8_t>());
  }
  float* device_scores() const {
    return reinterpret_cast<float*>(out_.as<uint8_t>() + scores_offset_);
  }

  // HOST tables: this worker's slot in the DeviceModel's ReaderGate (-1: none).
  int reader_ = -1;
  // HOST tables: the staging passes' scratch, laid out for ids_capacity_ ids.
  DeviceBuffer host_staging_block_;
  kernels::cuda::HostStaging host_staging_;
  // The staging limit the next slice uploads (HostStaging::limit): its
  // device value and pinned source; staging_on_ from the last slice's misses.
  DeviceBuffer staging_limit_;
  PinnedBuffer staging_limit_host_;
  // DYNAMIC tables' LRU time of this batch (Model::score_clock), copied in
  // before each batch so CUDA graph replays read the current value.
  DeviceBuffer score_now_;
  PinnedBuffer score_now_host_;
  bool staging_on_ = true;

  // Fused tiny path.
  kernels::cuda::TinyDlrmShape tiny_shape_;
  DeviceBuffer tiny_weights_;
  bool last_was_tiny_ = false;
  // Set only inside CudaWorkerProbe::ProfileLastForward: events recorded
  // between stages.
  std::vector<cudaEvent_t>* stage_events_ = nullptr;
  HostPathTimes host_path_;  // of the last Execute
  // WarmUp's second pass: Execute takes the paths of a busy GPU.
  bool assume_busy_ = false;

  // One graph per padded row count, valid for the current arena.
  // Keyed by GraphKey(padded rows, part, unit only): `unit_only` batches
  // (UnitBagsOnly) pool in the unit-bag kernel alone, so their lookup is a
  // graph of its own.
  std::map<int64_t, cudaGraphExec_t> graphs_;
  static int64_t GraphKey(int64_t padded_rows, ForwardPart part, bool unit_only) {
    return (padded_rows * 4 + static_cast<int64_t>(part)) * 2 + (unit_only ? 1 : 0);
  }
  // Whether every feature of `layout` is pooled by the unit-bag kernel (unit
  // bags, every table qualifying): no bag entries, no general kernel.
  bool UnitBagsOnly(const PackedLayout& layout) const {
    return layout.all_unit && every_table_unit_pooled_;
  }
  // Whether this slice's lookup runs fused with the interaction
  // (Options::fused_lookup_dot; graphs of such slices are keyed unit-only).
  bool FusedLookupDot(const PackedLayout& layout) const {
    return fused_dot_fits_ && UnitBagsOnly(layout);
  }
  void DropGraphs();
};

// The cross-layer mode `options` resolves to (never kAuto).
CudaWorker::CrossMath ResolveCrossMath(const CudaWorker::Options& options);
// The split weights a DeviceModel needs for workers of `options`.
DeviceModel::CrossSplit CrossSplitFor(const CudaWorker::Options& options);
// Whether the next slice stages its HOST-table misses (Options::
// staging_min_miss_rate), from this slice's cache misses among its HOST-table
// lookups; `staging` (the current decision) stands when there were none.
bool StageNextSlice(int64_t misses, int64_t host_lookups, double min_miss_rate, bool staging);

// Whether batches of `model` whose features are all unit bags can run the
// lookup fused with the interaction (Options::fused_lookup_dot): a DOT model,
// no HOST tables, every table pooled by the unit-bag kernel
// (`every_table_unit_pooled`) with the interaction's dim, and a row that
// fits the fused kernel's shared memory (kernels/cuda/unit_bag_dot.h).
// `tables`: the model's device table descriptors.
bool FusedLookupDotFits(const Model& model, absl::Span<const kernels::cuda::DeviceTable> tables,
                        bool every_table_unit_pooled, bool any_host);

// "auto" | "fp32" | "tf32x3" | "bf16x3" | "tf32" -> the mode; false for
// anything else.
bool ParseCrossMath(absl::string_view text, CudaWorker::CrossMath* out);

// Workers per GPU when neither the flag nor the model's config names a count.
// Each worker packs a batch on the host, then waits for the GPU, so two leave
// the GPU idle while both pack and three keep it busier under back-to-back
// batches; but through gRPC a third served no more requests, and fewer where
// the server had few cores of its own (docs/benchmarks.md, "GPU workers per
// GPU"), so the default stays at two.
inline constexpr int kDefaultWorkersPerGpu = 2;

// Workers for every visible GPU (or `devices` when not empty): one
// DeviceModel per GPU shared by `workers_per_device` workers (0 =
// kDefaultWorkersPerGpu).
// What CreateCudaWorkers set up, for the server's log.
struct CudaSetupReport {
  std::shared_ptr<const PlacementPlan> plan;  // the placement every GPU uses
  // Dynamic tables built on the GPUs from their keys (summed over GPUs).
  int64_t hash_build_keys = 0;
  double hash_build_seconds = 0;
  double hash_insert_seconds = 0;  // of which the insert kernels
  // Every keys copy ran from page-locked memory (else some went through the
  // driver's pageable staging, ~2x slower).
  bool hash_keys_pinned = true;
  // One per GPU: the tables the workers read (online updates write them).
  std::vector<std::shared_ptr<const DeviceModel>> device_models;
};
// `report` (when given) is filled on success.
absl::StatusOr<std::vector<std::unique_ptr<Worker>>> CreateCudaWorkers(
    std::shared_ptr<const Model> model, const CudaWorker::Options& options,
    int workers_per_device, std::vector<int> devices = {},
    CudaSetupReport* report = nullptr);

// Whether the fused single-kernel forward handles `model` on GPU `device`
// (its shared memory per block, read from the device), and its shape; `why`
// (when given) says which limit ruled it out.
bool TinyShapeFor(const Model& model, int device, kernels::cuda::TinyDlrmShape* shape,
                  std::string* why = nullptr);

// Number of CUDA devices this process can use (0 without GPU or driver, or
// where this binary has no kernel image for them), and why there are none.
int UsableCudaDevices(std::string* why_none = nullptr);

// Total memory of the smallest usable GPU of this machine (what a placement
// plan is made for); 0 without one.
int64_t SmallestGpuMemoryBytes();

// The virtual architectures of this binary's device code ("900", or
// "800,900,1000" for --config=portable).
std::string BuiltCudaArchs();

}  // namespace rankd::engine::cuda

#endif  // RANKD_ENGINE_CUDA_CUDA_WORKER_H_
