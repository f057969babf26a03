#include "engine/cuda/cuda_worker.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/split_bf16.h"
#include "kernels/cpu/split_tf32.h"
#include "kernels/cpu/types.h"
#include "kernels/cuda/dense_layers.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/interaction.h"
#include "kernels/cuda/small_rows_linear.h"
#include "kernels/cuda/split_activations.h"
#include "kernels/cuda/unit_bag_dot.h"

namespace rankd::engine::cuda {
namespace {

using kernels::Activation;
namespace kc = kernels::cuda;

absl::Status LaunchStatus(cudaError_t err, const char* what) { return CudaStatus(err, what); }

// Microseconds since the previous Lap (or construction): splits a call's
// wall time into the phases of CudaWorker::HostPathTimes.
class HostPathClock {
 public:
  double Lap() {
    const auto now = std::chrono::steady_clock::now();
    const double us = std::chrono::duration<double, std::micro>(now - last_).count();
    last_ = now;
    return us;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

}  // namespace

CudaWorker::CudaWorker(std::shared_ptr<const DeviceModel> model, const Options& options,
                       std::string name, std::shared_ptr<PackPool> pack_pool)
    : dm_(std::move(model)),
      options_(options),
      name_(std::move(name)),
      pack_pool_(std::move(pack_pool)) {
  if (pack_pool_ == nullptr && options_.pack_threads != 0) {
    const int threads =
        options_.pack_threads < 0 ? PackPool::DefaultThreads() : options_.pack_threads;
    if (threads > 0) pack_pool_ = std::make_shared<PackPool>(threads);
  }
  if (pack_pool_ != nullptr) pack_parallel_ = pack_pool_->AsParallelFor();
}

ParallelFor CudaWorker::PackParallel(int64_t rows) const {
  if (pack_pool_ == nullptr || rows < options_.parallel_pack_min_rows) return nullptr;
  return pack_parallel_;
}

CudaWorker::~CudaWorker() {
  cudaSetDevice(dm_->device());
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  DropGraphs();
  if (batch_done_ != nullptr) {
    dm_->RemoveBatchEvent(batch_done_);
    cudaEventDestroy(batch_done_);
  }
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  if (side_stream_ != nullptr) {
    cudaStreamSynchronize(side_stream_);
    cudaStreamDestroy(side_stream_);
  }
  if (fork_ != nullptr) cudaEventDestroy(fork_);
  if (join_ != nullptr) cudaEventDestroy(join_);
  if (copy_stream_ != nullptr) {
    cudaStreamSynchronize(copy_stream_);
    cudaStreamDestroy(copy_stream_);
  }
  if (copied_ != nullptr) cudaEventDestroy(copied_);
}

void CudaWorker::DropGraphs() {
  for (auto& [rows, exec] : graphs_) cudaGraphExecDestroy(exec);
  graphs_.clear();
}

absl::StatusOr<std::unique_ptr<CudaWorker>> CudaWorker::Create(
    std::shared_ptr<const DeviceModel> model, const Options& options, std::string name,
    std::shared_ptr<PackPool> pack_pool) {
  if (options.max_rows <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaWorker: max_rows must be > 0, got ", options.max_rows));
  }
  if (options.pack_threads < -1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CudaWorker: pack_threads must be >= -1 (-1 = default, 0 = none), got ",
        options.pack_threads));
  }
  // Row thresholds: 0 turns their path off.
  const std::pair<const char*, int64_t> thresholds[] = {
      {"dense_first_min_rows", options.dense_first_min_rows},
      {"copy_beside_mlp_min_rows", options.copy_beside_mlp_min_rows},
      {"unit_bags_min_rows", options.unit_bags_min_rows},
      {"lookup_beside_mlp_max_rows", options.lookup_beside_mlp_max_rows},
  };
  for (const auto& [field, value] : thresholds) {
    if (value < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("CudaWorker: ", field, " must be >= 0 (0 = never), got ", value));
    }
  }
  if (options.dense_first_max_rows < options.dense_first_min_rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CudaWorker: dense_first_max_rows must be >= dense_first_min_rows (",
        options.dense_first_min_rows, "), got ", options.dense_first_max_rows));
  }
  std::unique_ptr<CudaWorker> w(
      new CudaWorker(std::move(model), options, std::move(name), std::move(pack_pool)));
  absl::Status s = w->Init();
  if (!s.ok()) return s;
  return w;
}

int64_t CudaWorker::Bucket(int64_t rows) const {
  int64_t b = kernels::kRowQuantum;
  while (b < rows) b *= 2;
  return std::min<int64_t>(b, kernels::RoundUpRows(options_.max_rows));
}

void CudaWorker::ChooseLookupKernels() {
  // The table descriptors never change after the DeviceModel is made.
  const std::vector<kc::DeviceTable>& tables = dm_->table_descriptors();
  fp32_tables_only_ =
      !dm_->any_host() && kc::TablesFitFp32Kernel(tables.data(), static_cast<int>(tables.size()));
  const bool use_unit_kernel = options_.unit_bag_kernel;
  unit_bag_chunks_ = 0;
  every_table_unit_pooled_ = use_unit_kernel;
  fused_dot_fits_ = false;
  if (!use_unit_kernel) return;
  for (const kc::DeviceTable& t : tables) {
    const int32_t chunks = kc::UnitBagRowChunks(t);
    unit_bag_chunks_ = std::max(unit_bag_chunks_, chunks);
    every_table_unit_pooled_ = every_table_unit_pooled_ && chunks > 0;
  }
  fused_dot_fits_ = options_.fused_lookup_dot &&
                    FusedLookupDotFits(dm_->model(), tables, every_table_unit_pooled_,
                                       dm_->any_host());
}

bool FusedLookupDotFits(const Model& model, absl::Span<const kc::DeviceTable> tables,
                        bool every_table_unit_pooled, bool any_host) {
  const int dim = model.dense_out_width();
  if (!every_table_unit_pooled || any_host || model.interaction != rankd::v1::DOT ||
      !kc::UnitBagDotFits(static_cast<int>(model.features.size()), dim)) {
    return false;
  }
  for (const kc::DeviceTable& t : tables) {
    if (t.dim != dim || kc::UnitBagRowChunks(t) == 0) return false;
  }
  return true;
}

absl::Status CudaWorker::Init() {
  RANKD_RETURN_IF_CUDA_ERROR(cudaSetDevice(dm_->device()), "cudaSetDevice");
  if (absl::Status s = CreateStreams(); !s.ok()) return s;
  ChooseLookupKernels();
  if (absl::Status s = CreateLinearRunners(); !s.ok()) return s;
  const Model& m = dm_->model();
  int col = m.dense_out_width();
  for (const SparseFeature& f : m.features) {
    feat_col_.push_back(col);
    col += m.tables[f.table].dim;
  }
  // CAT feeds feats straight to the top MLP, whose K may be padded.
  feat_width_ = m.interaction == rankd::v1::CAT ? dm_->top_in_ld() : col;
  max_width_ = std::max({dm_->dense_ld(), dm_->top_in_ld(), feat_width_});
  for (const Linear& l : m.bottom) max_width_ = std::max(max_width_, l.out);
  for (const Linear& l : m.top) max_width_ = std::max(max_width_, l.out);

  const int64_t rows = kernels::RoundUpRows(options_.max_rows);
  if (absl::Status s = AllocateActivations(rows); !s.ok()) return s;
  if (absl::Status s = AllocateOutputs(rows); !s.ok()) return s;
  // The fused kernel reads rows straight from HBM (not for HOST tables) and
  // does not touch eviction scores (not for DYNAMIC tables that keep them).
  if (options_.allow_fused_tiny && !dm_->any_host() && !dm_->any_scored()) {
    if (absl::Status s = InitTiny(); !s.ok()) return s;
  }
  // Typical bags are small: start with 4 ids per row and feature; grows on demand.
  return EnsureArena(rows * static_cast<int64_t>(m.features.size()) * 4, 1);
}

absl::Status CudaWorker::CreateStreams() {
  RANKD_RETURN_IF_CUDA_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                             "cudaStreamCreate");
  RANKD_RETURN_IF_CUDA_ERROR(cudaEventCreateWithFlags(&batch_done_, cudaEventDisableTiming),
                             "batch event");
  dm_->AddBatchEvent(batch_done_);
  if (options_.lookup_beside_mlp_max_rows > 0) {
    RANKD_RETURN_IF_CUDA_ERROR(cudaStreamCreateWithFlags(&side_stream_, cudaStreamNonBlocking),
                               "cudaStreamCreate (lookup beside the bottom MLP)");
    RANKD_RETURN_IF_CUDA_ERROR(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming),
                               "fork event");
    RANKD_RETURN_IF_CUDA_ERROR(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming),
                               "join event");
  }
  if (options_.copy_beside_mlp_min_rows > 0) {
    RANKD_RETURN_IF_CUDA_ERROR(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking),
                               "cudaStreamCreate (copies beside the bottom MLP)");
    RANKD_RETURN_IF_CUDA_ERROR(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming),
                               "copy event");
  }
  return absl::OkStatus();
}

absl::Status CudaWorker::CreateLinearRunners() {
  auto linear = kc::LinearRunner::Create(options_.math);
  if (!linear.ok()) return linear.status();
  linear_ = std::move(*linear);
  if (dm_->model().cross.empty()) return absl::OkStatus();
  cross_math_ = ResolveCrossMath(options_);
  if ((cross_math_ == CrossMath::kTf32x3 && dm_->cross()[0].v3.weight == nullptr) ||
      (cross_math_ == CrossMath::kBf16x3 && dm_->cross()[0].vb.weight == nullptr)) {
    return absl::FailedPreconditionError(
        "CudaWorker: split-precision cross layers need a DeviceModel made with the matching "
        "cross_split (CrossSplitFor)");
  }
  auto cross = kc::LinearRunner::Create(cross_math_ == CrossMath::kFp32 ? kc::MathMode::kFp32
                                                                        : kc::MathMode::kTf32);
  if (!cross.ok()) return cross.status();
  cross_linear_ = std::move(*cross);
  return absl::OkStatus();
}

absl::Status CudaWorker::AllocateActivations(int64_t rows) {
  const Model& m = dm_->model();
  auto alloc = [&](DeviceBuffer& b, int64_t floats, const char* what) -> absl::Status {
    absl::Status s = b.Allocate(sizeof(float) * std::max<int64_t>(floats, 1), what);
    if (!s.ok()) return s;
    // Padding rows are computed too: keep them finite from the start.
    return CudaStatus(cudaMemset(b.get(), 0, b.bytes()), what);
  };
  absl::Status s;
  if (!(s = alloc(feats_, rows * feat_width_, "interaction input")).ok()) return s;
  if (!(s = alloc(ping_, rows * max_width_, "activations")).ok()) return s;
  if (!(s = alloc(pong_, rows * max_width_, "activations")).ok()) return s;
  if (m.interaction == rankd::v1::DOT) {
    if (!(s = alloc(top_in_, rows * dm_->top_in_ld(), "dot interaction output")).ok()) return s;
  }
  if (m.cross.empty()) return absl::OkStatus();
  const int64_t n = m.cross[0].n;
  if (!(s = alloc(cross_a_, rows * n, "cross x")).ok()) return s;
  if (!(s = alloc(cross_b_, rows * n, "cross x")).ok()) return s;
  if (!(s = alloc(cross_t_, rows * n, "cross t")).ok()) return s;
  if (!(s = alloc(cross_r_, rows * m.cross[0].rank, "cross low-rank")).ok()) return s;
  const int k = static_cast<int>(std::max(n, int64_t{m.cross[0].rank}));
  if (cross_math_ == CrossMath::kTf32x3) {
    const int64_t width = kernels::SplitTf32Width(k);
    if (!(s = alloc(cross_split_, rows * width, "cross split inputs")).ok()) return s;
  } else if (cross_math_ == CrossMath::kBf16x3) {
    const int64_t bf16_per_row = kernels::SplitBf16Width(k);  // two per float
    if (!(s = alloc(cross_split_, (rows * bf16_per_row + 1) / 2, "cross split inputs")).ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status CudaWorker::AllocateOutputs(int64_t rows) {
  const Model& m = dm_->model();
  counters_ = CounterLayout(m.tables.size(), m.features.size());
  last_counts_.assign(counters_.total, 0);
  scores_offset_ = (8 * counters_.total + 15) & ~size_t{15};
  const size_t out_bytes = scores_offset_ + sizeof(float) * rows;
  absl::Status s;
  if (!(s = out_.Allocate(out_bytes, "scores")).ok()) return s;
  RANKD_RETURN_IF_CUDA_ERROR(cudaMemset(out_.get(), 0, out_bytes), "zero counters");
  if (!(s = host_out_.Allocate(out_bytes, "scores (host)")).ok()) return s;
  if (dm_->any_host()) {
    if (!(s = staging_limit_.Allocate(sizeof(unsigned int), "staging limit")).ok()) return s;
    if (!(s = staging_limit_host_.Allocate(sizeof(unsigned int), "staging limit (host)")).ok()) {
      return s;
    }
    reader_ = dm_->gate()->AddReader();
    if (reader_ < 0) {
      return absl::ResourceExhaustedError(
          absl::StrCat("worker ", name_, ": too many workers on GPU ", dm_->device()));
    }
  }
  if (dm_->any_scored()) {
    if (!(s = score_now_.Allocate(8, "score clock")).ok()) return s;
    if (!(s = score_now_host_.Allocate(8, "score clock (host)")).ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status CudaWorker::EnsureArena(int64_t ids, int slots) {
  if (ids > ids_capacity_ || host_arenas_[0].bytes() == 0) {
    const int64_t capacity = std::max(ids, 2 * ids_capacity_);
    compact_ = options_.compact_ids && !fused_tiny_ && CompactIdsFit(capacity);
    const PackedLayout biggest = MakeLayout(dm_->model(), kernels::RoundUpRows(options_.max_rows),
                                            capacity, dm_->dense_ld(), compact_);
    RANKD_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    DropGraphs();  // they point into the old arena
    absl::Status s = host_arenas_[0].Allocate(biggest.bytes, "staging arena");
    if (!s.ok()) return s;
    if (host_arenas_[1].bytes() > 0) host_arenas_[1].Reset();  // remade below when needed
    s = device_arena_.Allocate(biggest.bytes, "device arena");
    if (!s.ok()) return s;
    RANKD_RETURN_IF_CUDA_ERROR(cudaMemset(device_arena_.get(), 0, biggest.bytes), "arena memset");
    if (dm_->any_host()) {
      // Staging rows: what host_staging_bytes holds, never more than ids.
      int64_t max_row_bytes = 16;
      for (const TablePlan& t : dm_->plan().tables) {
        if (t.tier == Tier::kHost) max_row_bytes = std::max(max_row_bytes, t.row_bytes);
      }
      const int64_t stride = (max_row_bytes + 15) / 16 * 16;
      const int64_t rows =
          std::min(capacity, std::max<int64_t>(options_.host_staging_bytes, 0) / stride);
      const int64_t bytes = kc::HostStagingBytes(capacity, rows, max_row_bytes);
      s = host_staging_block_.Allocate(bytes, "HOST-table staging");
      if (!s.ok()) return s;
      host_staging_ = kc::CarveHostStaging(host_staging_block_.get(), capacity, rows,
                                           max_row_bytes, dm_->host_span_bytes());
      host_staging_.limit = staging_limit_.as<unsigned int>();
    }
    ids_capacity_ = capacity;
  }
  if (slots > 1 && host_arenas_[1].bytes() < host_arenas_[0].bytes()) {
    // Only batches of several slices pack one slice while the GPU runs another.
    return host_arenas_[1].Allocate(host_arenas_[0].bytes(), "second staging arena");
  }
  return absl::OkStatus();
}

absl::Status CudaWorker::Forward(const PackedLayout& l) {
  absl::Status s;
  // Small slices are latency-bound: the lookup overlaps the bottom MLP's
  // chain of layers (not while a probe times the stages one by one).
  if (LookupBesideMlp(l.padded_rows) && stage_events_ == nullptr) {
    s = BottomMlpBesideLookup(l);
    if (!s.ok()) return s;
  } else {
    s = BottomMlp(l);
    if (!s.ok()) return s;
    MarkStage();
    if (FusedLookupDot(l)) {
      MarkStage();
      return FusedLookupDotAndTop(l);
    }
    s = PooledLookup(l, stream_);
    if (!s.ok()) return s;
  }
  MarkStage();
  return InteractionAndTop(l);
}

absl::Status CudaWorker::ForwardAfterBottom(const PackedLayout& l) {
  if (FusedLookupDot(l)) return FusedLookupDotAndTop(l);
  absl::Status s = PooledLookup(l, stream_);
  if (!s.ok()) return s;
  return InteractionAndTop(l);
}

absl::Status CudaWorker::FusedLookupDotAndTop(const PackedLayout& l) {
  const Model& m = dm_->model();
  absl::Status s = LaunchStatus(
      kc::LaunchUnitBagDotInteraction(LookupArgs(l), feats_.as<float>(), feat_width_,
                                      l.padded_rows, m.dense_out_width(), m.self_interaction,
                                      top_in_.as<float>(), dm_->top_in_ld(), stream_),
      "unit-bag lookup and dot interaction");
  if (!s.ok()) return s;
  MarkStage();
  return TopMlp(l.padded_rows, top_in_.as<float>(), dm_->top_in_ld());
}

absl::Status CudaWorker::InteractionAndTop(const PackedLayout& l) {
  absl::Status s;
  const float* top_in = nullptr;
  int64_t top_ld = 0;
  s = Interaction(l.padded_rows, &top_in, &top_ld);
  if (!s.ok()) return s;
  MarkStage();
  return TopMlp(l.padded_rows, top_in, top_ld);
}

void CudaWorker::MarkStage() {
  if (stage_events_ == nullptr) return;
  cudaEvent_t e;
  cudaEventCreate(&e);
  cudaEventRecord(e, stream_);
  stage_events_->push_back(e);
}

absl::Status CudaWorker::BottomMlp(const PackedLayout& l) {
  // The last layer writes x into columns [0, xw) of the interaction input.
  const Model& m = dm_->model();
  const int64_t rows = l.padded_rows;
  const int fw = feat_width_;
  const float* dense = reinterpret_cast<const float*>(device_arena_.as<uint8_t>() + l.dense_offset);
  float* feats = feats_.as<float>();
  if (dm_->bottom().empty()) {
    RANKD_RETURN_IF_CUDA_ERROR(
        cudaMemcpy2DAsync(feats, sizeof(float) * fw, dense, sizeof(float) * l.dense_ld,
                          sizeof(float) * m.num_dense, rows, cudaMemcpyDeviceToDevice, stream_),
        "dense -> interaction input");
    return absl::OkStatus();
  }
  const float* in = dense;
  int64_t in_ld = l.dense_ld;
  for (size_t i = 0; i < dm_->bottom().size(); ++i) {
    const bool last = i + 1 == dm_->bottom().size();
    float* out = last ? feats : (in == ping_.as<float>() ? pong_.as<float>() : ping_.as<float>());
    const int64_t out_ld = last ? fw : dm_->bottom()[i].out;
    // The first layer follows the batch's copy, not a kernel: not chained.
    absl::Status s = RunLinear(dm_->bottom()[i], in, in_ld, rows, out, out_ld, /*chained=*/i > 0);
    if (!s.ok()) return s;
    in = out;
    in_ld = out_ld;
  }
  return absl::OkStatus();
}

absl::Status CudaWorker::BottomMlpBesideLookup(const PackedLayout& l) {
  RANKD_RETURN_IF_CUDA_ERROR(cudaEventRecord(fork_, stream_), "fork the lookup");
  RANKD_RETURN_IF_CUDA_ERROR(cudaStreamWaitEvent(side_stream_, fork_, 0), "fork the lookup");
  absl::Status s = PooledLookup(l, side_stream_);
  if (!s.ok()) return s;
  RANKD_RETURN_IF_CUDA_ERROR(cudaEventRecord(join_, side_stream_), "join the lookup");
  s = BottomMlp(l);
  if (!s.ok()) return s;
  RANKD_RETURN_IF_CUDA_ERROR(cudaStreamWaitEvent(stream_, join_, 0), "join the lookup");
  return absl::OkStatus();
}

kc::PooledLookupArgs CudaWorker::LookupArgs(const PackedLayout& l) const {
  const Model& m = dm_->model();
  uint8_t* arena = device_arena_.as<uint8_t>();
  unsigned long long* counters = device_counters();
  kc::PooledLookupArgs args;
  args.tables = dm_->device_tables();
  args.fp32_tables_only = fp32_tables_only_;
  args.features = reinterpret_cast<const kc::DeviceFeature*>(arena + l.features_offset);
  args.num_features = static_cast<int32_t>(m.features.size());
  if (l.compact) {
    args.ids32 = reinterpret_cast<const int32_t*>(arena + l.ids_offset);
    args.ids = reinterpret_cast<const int64_t*>(arena + l.wide_ids_offset);  // wide features'
    args.bag_ids32 = reinterpret_cast<const int32_t*>(arena + l.bag_ids_offset);
  } else {
    args.ids = reinterpret_cast<const int64_t*>(arena + l.ids_offset);
    args.bag_ids = reinterpret_cast<const int64_t*>(arena + l.bag_ids_offset);
  }
  args.weights = reinterpret_cast<const float*>(arena + l.weights_offset);
  args.bag_rows = reinterpret_cast<const int32_t*>(arena + l.bag_rows_offset);
  args.total_bags = l.max_bags;  // upper bound: the same launch for every batch of the bucket
  // A feature has at most one bag a row: warps laid out per feature, so the
  // few bags of a small batch are pooled in parallel.
  args.max_bags_per_feature = l.padded_rows;
  args.out = feats_.as<float>();
  args.out_stride = feat_width_;
  args.unresolved = counters + counters_.unresolved_per_table;
  args.any_host = dm_->any_host();
  args.host_reads = counters + counters_.host_reads;
  args.host_rows_read = counters + counters_.host_rows_read;
  args.staging = host_staging_;
  args.score_now_ptr = score_now_.as<unsigned long long>();  // null without scored tables
  // Unit features of qualifying tables are pooled by the unit-bag kernel,
  // which reads their ids without bag entries.
  if (l.unit_bags) args.unit_bag_chunks = unit_bag_chunks_;
  args.unit_bags_only = UnitBagsOnly(l);
  return args;
}

absl::Status CudaWorker::PooledLookup(const PackedLayout& l, cudaStream_t stream) {
  // All features' pooled embeddings, one launch, into their columns.
  uint8_t* arena = device_arena_.as<uint8_t>();
  const kc::PooledLookupArgs args = LookupArgs(l);
  if (l.unit_bags && !every_table_unit_pooled_) {
    // The unit features' bag entries were not packed nor copied: written
    // here, before anything reads them (in the graph: read at run time).
    // Not needed when every table qualifies for the unit-bag kernel: then
    // every unit feature is pooled there.
    absl::Status s = LaunchStatus(
        kc::LaunchExpandUnitBags(
            args.features, args.num_features, l.padded_rows,
            l.compact ? nullptr : reinterpret_cast<int64_t*>(arena + l.bag_ids_offset),
            l.compact ? reinterpret_cast<int32_t*>(arena + l.bag_ids_offset) : nullptr,
            reinterpret_cast<int32_t*>(arena + l.bag_rows_offset), stream),
        "unit bags");
    if (!s.ok()) return s;
  }
  return LaunchStatus(
      kc::LaunchPooledLookup(args, reinterpret_cast<const int64_t*>(arena + l.bag_prefix_offset),
                             stream),
      "pooled embedding lookup");
}

absl::Status CudaWorker::Interaction(int64_t rows, const float** top_in, int64_t* top_ld) {
  // DOT: pairs into top_in_; DCN_V2: the cross layers; CAT: feats as they are.
  const Model& m = dm_->model();
  const float* feats = feats_.as<float>();
  *top_in = feats;
  *top_ld = feat_width_;
  if (m.interaction == rankd::v1::DOT) {
    absl::Status s = LaunchStatus(
        kc::LaunchDotInteraction(feats, feat_width_, rows, 1 + static_cast<int>(m.features.size()),
                                 m.dense_out_width(), m.self_interaction, top_in_.as<float>(),
                                 dm_->top_in_ld(), stream_),
        "dot interaction");
    if (!s.ok()) return s;
    *top_in = top_in_.as<float>();
    *top_ld = dm_->top_in_ld();
  } else if (m.interaction == rankd::v1::DCN_V2) {
    const float* x = feats;
    for (size_t i = 0; i < dm_->cross().size(); ++i) {
      const auto& c = dm_->cross()[i];
      const int n = c.v.in;
      absl::Status s = CrossGemm(c.v, c.v3, c.vb, x, rows, cross_r_.as<float>());  // r = V x
      if (!s.ok()) return s;
      s = CrossGemm(c.w, c.w3, c.wb, cross_r_.as<float>(), rows,
                    cross_t_.as<float>());  // t = W r + b
      if (!s.ok()) return s;
      float* next = (i % 2 == 0) ? cross_a_.as<float>() : cross_b_.as<float>();
      s = LaunchStatus(
          kc::LaunchCrossCombine(feats, x, cross_t_.as<float>(), rows, n, next, stream_),
          "cross combine");
      if (!s.ok()) return s;
      x = next;
    }
    *top_in = x;
  }
  return absl::OkStatus();
}

absl::Status CudaWorker::TopMlp(int64_t rows, const float* in, int64_t in_ld) {
  // The last (1-wide) layer fused with the sigmoid.
  // Every layer here follows a kernel (interaction, cross combine, lookup or
  // the layer before), so each may be chained after it. The logit kernel is,
  // at every size: its blocks launch while the layer before (a cuBLASLt GEMM
  // above the small-rows bucket) drains, and wait for that grid before they
  // read its output.
  const auto& top = dm_->top();
  for (size_t i = 0; i + 1 < top.size(); ++i) {
    float* out = (in == ping_.as<float>()) ? pong_.as<float>() : ping_.as<float>();
    absl::Status s = RunLinear(top[i], in, in_ld, rows, out, top[i].out, /*chained=*/true);
    if (!s.ok()) return s;
    in = out;
    in_ld = top[i].out;
  }
  return LaunchStatus(kc::LaunchFinalLogitSigmoid(in, in_ld, rows, top.back().weight,
                                                  top.back().bias, top.back().in,
                                                  device_scores(), stream_, /*chained=*/true),
                      "final layer + sigmoid");
}

bool CudaWorker::SmallRows(int64_t rows) const {
  return options_.small_rows_mlp && rows <= kc::kSmallRowsMax;
}

bool CudaWorker::LookupBesideMlp(int64_t rows) const {
  // HOST tables' staging passes stay on the worker's stream.
  return rows <= options_.lookup_beside_mlp_max_rows && side_stream_ != nullptr &&
         !dm_->bottom().empty() && !dm_->any_host();
}

absl::Status CudaWorker::RunLinear(const kc::DeviceLinear& layer, const float* in, int64_t in_ld,
                                   int64_t rows, float* out, int64_t out_ld, bool chained) {
  if (!SmallRows(rows)) {
    return linear_->Run(layer, in, in_ld, rows, Activation::kRelu, out, out_ld, stream_);
  }
  kc::SmallRowsLinearArgs a;
  a.weight = layer.weight;
  a.bias = layer.bias;
  a.in = layer.in;
  a.out = layer.out;
  a.x = in;
  a.x_ld = in_ld;
  a.rows = static_cast<int>(rows);
  a.act = Activation::kRelu;
  a.y = out;
  a.y_ld = out_ld;
  return LaunchStatus(kc::LaunchSmallRowsLinear(a, chained, stream_), "small-rows linear layer");
}

absl::Status CudaWorker::CrossGemm(const kc::DeviceLinear& layer, const kc::DeviceLinear& tf32x3,
                                   const kc::DeviceLinearBf16& bf16x3, const float* in,
                                   int64_t rows, float* out) {
  // Split modes: [big | small | big] of the input times [big | big | small]
  // of the weights, one tensor-core GEMM over 3x the K.
  if (cross_math_ == CrossMath::kTf32x3) {
    float* in3 = cross_split_.as<float>();
    absl::Status s = LaunchStatus(
        kc::LaunchSplitTf32Activations(in, layer.in, rows, layer.in, in3, stream_),
        "split cross input for 3xTF32");
    if (!s.ok()) return s;
    return cross_linear_->Run(tf32x3, in3, tf32x3.in, rows, Activation::kNone, out, layer.out,
                              stream_);
  }
  if (cross_math_ == CrossMath::kBf16x3) {
    auto* in3 = static_cast<uint16_t*>(cross_split_.get());
    absl::Status s = LaunchStatus(
        kc::LaunchSplitBf16Activations(in, layer.in, rows, layer.in, in3, stream_),
        "split cross input for bf16x3");
    if (!s.ok()) return s;
    return cross_linear_->RunBf16(bf16x3, in3, bf16x3.in, rows, Activation::kNone, out, layer.out,
                                  stream_);
  }
  return cross_linear_->Run(layer, in, layer.in, rows, Activation::kNone, out, layer.out, stream_);
}

CudaWorker::CrossMath ResolveCrossMath(const CudaWorker::Options& options) {
  if (options.cross_math != CudaWorker::CrossMath::kAuto) return options.cross_math;
  return options.math == kc::MathMode::kTf32 ? CudaWorker::CrossMath::kTf32x3
                                             : CudaWorker::CrossMath::kFp32;
}

DeviceModel::CrossSplit CrossSplitFor(const CudaWorker::Options& options) {
  switch (ResolveCrossMath(options)) {
    case CudaWorker::CrossMath::kTf32x3:
      return DeviceModel::CrossSplit::kTf32x3;
    case CudaWorker::CrossMath::kBf16x3:
      return DeviceModel::CrossSplit::kBf16x3;
    default:
      return DeviceModel::CrossSplit::kNone;
  }
}

bool StageNextSlice(int64_t misses, int64_t host_lookups, double min_miss_rate, bool staging) {
  if (host_lookups <= 0) return staging;  // nothing learned: keep the last decision
  return static_cast<double>(misses) >= min_miss_rate * static_cast<double>(host_lookups);
}

bool ParseCrossMath(absl::string_view text, CudaWorker::CrossMath* out) {
  using CM = CudaWorker::CrossMath;
  if (text == "auto") *out = CM::kAuto;
  else if (text == "fp32") *out = CM::kFp32;
  else if (text == "tf32x3") *out = CM::kTf32x3;
  else if (text == "bf16x3") *out = CM::kBf16x3;
  else if (text == "tf32") *out = CM::kTf32;
  else return false;
  return true;
}

bool TinyShapeFor(const Model& m, int device, kc::TinyDlrmShape* shape, std::string* why) {
  auto no = [why](std::string reason) {
    if (why != nullptr) *why = std::move(reason);
    return false;
  };
  if (m.interaction != rankd::v1::DOT) return no("only DOT interaction models");
  if (m.bottom.size() > kc::kTinyDlrmMaxLayers || m.top.size() > kc::kTinyDlrmMaxLayers) {
    return no("more than 4 layers in an MLP");
  }
  if (m.features.size() > static_cast<size_t>(kc::kTinyDlrmMaxFeatures)) {
    return no("more than 26 sparse features");
  }
  for (const SparseFeature& f : m.features) {
    if (m.tables[f.table].dim != m.dense_out_width()) {
      return no(absl::StrCat("table ", m.tables[f.table].name, " has dim ", m.tables[f.table].dim,
                             ", x has ", m.dense_out_width()));
    }
  }
  kc::TinyDlrmShape& s = *shape;
  s.num_dense = m.num_dense;
  s.num_bottom = static_cast<int>(m.bottom.size());
  for (int i = 0; i < s.num_bottom; ++i) s.bottom[i] = m.bottom[i].out;
  s.dim = m.dense_out_width();
  s.num_features = static_cast<int>(m.features.size());
  s.num_top = static_cast<int>(m.top.size());
  for (int i = 0; i < s.num_top; ++i) s.top[i] = m.top[i].out;
  s.self_interaction = m.self_interaction;
  if (!kc::TinyDlrmSupported(s, kc::MaxSharedBytesPerBlock(device), why)) return false;
  if (s.interaction_width() != m.interaction_width) return no("interaction width mismatch");
  return true;
}

absl::Status CudaWorker::InitTiny() {
  const Model& m = dm_->model();
  kc::TinyDlrmShape& s = tiny_shape_;
  // The fused kernel reads dense rows num_dense apart: only with unpadded inputs.
  if (dm_->dense_ld() != m.num_dense || !TinyShapeFor(m, dm_->device(), &s)) {
    return absl::OkStatus();
  }
  std::vector<kernels::LinearView> bottom, top;
  for (const Linear& l : m.bottom) bottom.push_back(l.view());
  for (const Linear& l : m.top) top.push_back(l.view());
  const std::vector<float> packed = kc::PackTinyDlrmWeights(
      s, bottom.data(), static_cast<int>(bottom.size()), top.data(), static_cast<int>(top.size()));
  if (packed.empty()) return absl::OkStatus();
  absl::Status st = tiny_weights_.Allocate(4 * packed.size(), "fused-kernel weights");
  if (!st.ok()) return st;
  RANKD_RETURN_IF_CUDA_ERROR(cudaMemcpy(tiny_weights_.get(), packed.data(), 4 * packed.size(),
                                        cudaMemcpyHostToDevice),
                             "copy fused-kernel weights");
  fused_tiny_ = true;
  return absl::OkStatus();
}

bool CudaWorker::CanRunTiny(const PackedLayout& l) const {
  // The fused kernel reads 64-bit ids and offsets (compact_ is off with it).
  return fused_tiny_ && !l.compact &&
         l.total_bags == l.rows * static_cast<int64_t>(dm_->model().features.size());
}

absl::Status CudaWorker::ForwardTiny(const PackedLayout& l) {
  const Model& m = dm_->model();
  uint8_t* arena = device_arena_.as<uint8_t>();
  const auto* host_features = reinterpret_cast<const kc::DeviceFeature*>(
      host_arenas_[cur_].as<uint8_t>() + l.features_offset);
  kc::TinyDlrmArgs args;
  args.dense = reinterpret_cast<const float*>(arena + l.dense_offset);
  args.weights = tiny_weights_.as<float>();
  args.rows = l.rows;
  args.scores = device_scores();
  args.unresolved = device_counters() + counters_.unresolved_per_feature;
  const auto* bag_ids = reinterpret_cast<const int64_t*>(arena + l.bag_ids_offset);
  for (size_t f = 0; f < m.features.size(); ++f) {
    kc::TinyDlrmFeature& tf = args.features[f];
    tf.table = dm_->table_descriptors()[m.features[f].table];
    tf.ids = reinterpret_cast<const int64_t*>(arena + l.ids_offset);
    // Per-candidate bags: the feature's bag entries are its [rows + 1] offsets.
    tf.offsets = bag_ids + host_features[f].bag_begin;
    tf.weights = host_features[f].weighted ? reinterpret_cast<const float*>(arena + l.weights_offset)
                                           : nullptr;
  }
  return CudaStatus(kc::LaunchTinyDlrm(tiny_shape_, args, stream_), "fused tiny-model forward");
}

void CudaWorker::PackInto(int slot, absl::Span<const Request* const> requests,
                          const RequestOffsets& offsets, int64_t row_begin, int64_t row_end,
                          PackParts parts) {
  const Model& m = dm_->model();
  PackedLayout& layout = layouts_[slot];
  // The second part keeps the first part's layout (and its rows).
  if (parts != PackParts::kSparse) {
    const int64_t bucket = Bucket(row_end - row_begin);
    layout = MakeLayout(m, bucket, ids_capacity_, dm_->dense_ld(), compact_,
                        /*unit_bags=*/options_.unit_bags_min_rows > 0 &&
                            bucket >= options_.unit_bags_min_rows && !fused_tiny_);
  }
  const ParallelFor parallel = PackParallel(row_end - row_begin);
  if (parallel) ++host_path_.pack_tasks_parallel;
  PackSlice(m, requests, offsets, row_begin, row_end, feat_col_, &layout,
            host_arenas_[slot].as<uint8_t>(), parallel, parts);
}

absl::Status CudaWorker::EnqueuePacked(int slot, LiveTables* live, ForwardPart part,
                                       bool copy_in) {
  cur_ = slot;
  if (part == ForwardPart::kBottom) return EnqueueSlice(part, copy_in);
  // Updates (DeviceModel::Update): the slice's GPU work is enqueued under
  // the version's gate, after the last committed update's writes; the
  // batch event lets later updates wait for it.
  LiveTables::BatchScope tables(live);
  RANKD_RETURN_IF_CUDA_ERROR(cudaStreamWaitEvent(stream_, dm_->updates_done(), 0),
                             "wait for embedding updates");
  absl::Status s = EnqueueSlice(part, copy_in);
  const cudaError_t recorded = cudaEventRecord(batch_done_, stream_);
  if (!s.ok()) return s;
  RANKD_RETURN_IF_CUDA_ERROR(recorded, "record the batch's event");
  return absl::OkStatus();
}

bool CudaWorker::CanSplitAtBottomMlp(int64_t rows) const {
  return !fused_tiny_ && !dm_->bottom().empty() && !LookupBesideMlp(Bucket(rows));
}

bool CudaWorker::DenseFirst(int64_t rows) const {
  return options_.dense_first_min_rows > 0 && rows >= options_.dense_first_min_rows &&
         rows <= options_.dense_first_max_rows && CanSplitAtBottomMlp(rows);
}

absl::Status CudaWorker::PackAndEnqueueDenseFirst(absl::Span<const Request* const> requests,
                                                  const RequestOffsets& offsets, int64_t rows) {
  HostPathClock clock;
  PackInto(0, requests, offsets, 0, rows, PackParts::kDense);
  host_path_.pack_us += clock.Lap();
  absl::Status s = EnqueuePacked(0, nullptr, ForwardPart::kBottom);
  if (!s.ok()) return s;
  host_path_.enqueue_us += clock.Lap();
  // The GPU runs the bottom MLP meanwhile.
  PackInto(0, requests, offsets, 0, rows, PackParts::kSparse);
  host_path_.pack_us += clock.Lap();
  s = EnqueuePacked(0, live_, ForwardPart::kRest);
  host_path_.enqueue_us += clock.Lap();
  return s;
}

bool CudaWorker::CopyBeside(int64_t rows) const {
  return options_.copy_beside_mlp_min_rows > 0 && rows >= options_.copy_beside_mlp_min_rows &&
         CanSplitAtBottomMlp(rows);
}

absl::Status CudaWorker::PackAndEnqueueCopyBeside(absl::Span<const Request* const> requests,
                                                  const RequestOffsets& offsets, int64_t rows) {
  HostPathClock clock;
  PackInto(0, requests, offsets, 0, rows);
  host_path_.pack_us += clock.Lap();
  // The dense rows and the bottom MLP on stream_ ...
  absl::Status s = EnqueuePacked(0, nullptr, ForwardPart::kBottom);
  if (!s.ok()) return s;
  // ... and the rest of the batch on copy_stream_ meanwhile. The device
  // arena is free: the previous batch was waited for before this one began.
  s = CopyIn(ForwardPart::kRest, copy_stream_);
  if (!s.ok()) return s;
  RANKD_RETURN_IF_CUDA_ERROR(cudaEventRecord(copied_, copy_stream_), "record the copy");
  RANKD_RETURN_IF_CUDA_ERROR(cudaStreamWaitEvent(stream_, copied_, 0), "wait for the copy");
  s = EnqueuePacked(0, live_, ForwardPart::kRest, /*copy_in=*/false);
  host_path_.enqueue_us += clock.Lap();
  return s;
}

absl::Status CudaWorker::CopyIn(ForwardPart part, cudaStream_t stream) {
  const PackedLayout& layout = layouts_[cur_];
  uint8_t* host = host_arenas_[cur_].as<uint8_t>();
  uint8_t* dev = device_arena_.as<uint8_t>();
  // The dense rows start the arena (batch_packer.h).
  const size_t begin = part == ForwardPart::kRest ? layout.dense_end() : 0;
  const size_t end = part == ForwardPart::kBottom ? layout.dense_end() : layout.ids_end();
  if (part != ForwardPart::kBottom && layout.all_unit) {
    // No bag entries to copy: the device writes them (PooledLookup).
    const size_t gap_begin = std::max(begin, layout.bag_entries_begin());
    if (gap_begin > begin) {
      RANKD_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(dev + begin, host + begin, gap_begin - begin,
                                                 cudaMemcpyHostToDevice, stream),
                                 "dense rows host -> device");
    }
    const size_t after = layout.bag_entries_end();
    RANKD_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(dev + after, host + after, end - after,
                                               cudaMemcpyHostToDevice, stream),
                               "batch host -> device");
  } else {
    RANKD_RETURN_IF_CUDA_ERROR(
        cudaMemcpyAsync(dev + begin, host + begin, end - begin, cudaMemcpyHostToDevice, stream),
        "batch host -> device");
  }
  if (part == ForwardPart::kBottom) return absl::OkStatus();
  if (layout.wide_ids_end() > layout.wide_ids_begin()) {
    RANKD_RETURN_IF_CUDA_ERROR(
        cudaMemcpyAsync(dev + layout.wide_ids_begin(), host + layout.wide_ids_begin(),
                        layout.wide_ids_end() - layout.wide_ids_begin(), cudaMemcpyHostToDevice,
                        stream),
        "wide ids host -> device");
  }
  if (layout.any_weighted) {
    RANKD_RETURN_IF_CUDA_ERROR(
        cudaMemcpyAsync(dev + layout.weights_offset, host + layout.weights_offset,
                        4 * layout.total_ids, cudaMemcpyHostToDevice, stream),
        "weights host -> device");
  }
  if (dm_->any_host()) {
    // Outside the graph: replays read the value at run time.
    *staging_limit_host_.as<unsigned int>() =
        staging_on_ ? static_cast<unsigned int>(host_staging_.capacity) : 0u;
    RANKD_RETURN_IF_CUDA_ERROR(
        cudaMemcpyAsync(staging_limit_.get(), staging_limit_host_.as<unsigned int>(), sizeof(unsigned int),
                        cudaMemcpyHostToDevice, stream),
        "staging limit host -> device");
  }
  if (dm_->any_scored()) {
    // Outside the graph, like the staging limit.
    *score_now_host_.as<uint64_t>() =
        dm_->model().score_clock->fetch_add(1, std::memory_order_relaxed) + 1;
    RANKD_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(score_now_.get(), score_now_host_.as<void>(), 8,
                                               cudaMemcpyHostToDevice, stream),
                               "score clock host -> device");
  }
  return absl::OkStatus();
}

absl::Status CudaWorker::EnqueueSlice(ForwardPart part, bool copy_in) {
  const PackedLayout& layout = layouts_[cur_];
  absl::Status s = copy_in ? CopyIn(part, stream_) : absl::OkStatus();
  if (!s.ok()) return s;
  if (part == ForwardPart::kBottom) return LaunchForward(layout, part);
  last_was_tiny_ = part == ForwardPart::kWhole && CanRunTiny(layout);
  if (last_was_tiny_) {
    // One kernel: a graph would save nothing, and its pointers vary per batch.
    s = ForwardTiny(layout);
  } else {
    s = LaunchForward(layout, part);
  }
  if (!s.ok()) return s;
  RANKD_RETURN_IF_CUDA_ERROR(
      cudaMemcpyAsync(host_out_.as<void>(), out_.get(), scores_offset_ + sizeof(float) * layout.rows,
                      cudaMemcpyDeviceToHost, stream_),
      "counters and scores device -> host");
  return absl::OkStatus();
}

absl::Status CudaWorker::RunForward(const PackedLayout& layout, ForwardPart part) {
  switch (part) {
    case ForwardPart::kBottom: return BottomMlp(layout);
    case ForwardPart::kRest: return ForwardAfterBottom(layout);
    case ForwardPart::kWhole: break;
  }
  return Forward(layout);
}

absl::Status CudaWorker::LaunchForward(const PackedLayout& layout, ForwardPart part) {
  if (!options_.use_graphs) return RunForward(layout, part);
  const int64_t key =
      GraphKey(layout.padded_rows, part, part != ForwardPart::kBottom && UnitBagsOnly(layout));
  auto it = graphs_.find(key);
  if (it != graphs_.end()) {
    return CudaStatus(cudaGraphLaunch(it->second, stream_), "cudaGraphLaunch");
  }
  // First batch of this bucket: run directly (cuBLASLt plans are made
  // here, outside any capture), then capture the same work for replays.
  absl::Status s = RunForward(layout, part);
  if (!s.ok()) return s;
  cudaGraph_t graph = nullptr;
  RANKD_RETURN_IF_CUDA_ERROR(
      cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "begin capture");
  absl::Status captured = RunForward(layout, part);
  const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
  if (!captured.ok()) return captured;
  RANKD_RETURN_IF_CUDA_ERROR(end, "end capture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  RANKD_RETURN_IF_CUDA_ERROR(inst, "cudaGraphInstantiate");
  graphs_[key] = exec;
  return absl::OkStatus();
}

absl::Status CudaWorker::Execute(absl::Span<const Request* const> requests,
                                 absl::Span<const absl::Span<float>> scores, BatchStats* stats) {
  const Model& m = dm_->model();
  host_path_ = HostPathTimes();
  HostPathClock clock;
  // Whether another batch of this model keeps the GPU busy (DenseFirst).
  struct BusyScope {
    std::atomic<int>& busy;
    const int others;
    explicit BusyScope(std::atomic<int>& b) : busy(b), others(b.fetch_add(1)) {}
    ~BusyScope() { busy.fetch_sub(1); }
  } busy_scope(dm_->busy_workers());
  RANKD_RETURN_IF_CUDA_ERROR(cudaSetDevice(dm_->device()), "cudaSetDevice");
  int64_t total = 0;
  for (const Request* q : requests) total += q->num_candidates;
  const int64_t step = options_.max_rows;
  const bool one_slice = total <= step;
  // Bag offsets only for slices that cut through requests.
  ComputeRequestOffsets(m, requests, &offsets_, PackParallel(total), /*bag_offsets=*/!one_slice);
  const RequestOffsets& offsets = offsets_;
  if (stats != nullptr) StartStats(stats);
  // HOST tables: the batch is inside the cache's reader gate from its first
  // launch to its completion (each slice is waited for), so no refresh
  // rewrites a slot it may read.
  struct GateScope {
    ReaderGate* gate;
    int reader;
    GateScope(ReaderGate* g, int r) : gate(r >= 0 ? g : nullptr), reader(r) {
      if (gate != nullptr) gate->Enter(reader);
    }
    ~GateScope() {
      if (gate != nullptr) gate->Exit(reader);
    }
  } gate_scope(dm_->gate(), reader_);
  // Updates: a batch of several slices holds the gate from its first slice
  // to its last (an update between them would split the batch); a batch of
  // one slice holds it while the slice is enqueued.
  std::optional<LiveTables::BatchScope> whole_batch;
  if (!one_slice) whole_batch.emplace(live_);
  host_path_.offsets_us = clock.Lap();

  // The arenas fit the largest slice before any slice is in flight.
  int64_t max_ids = 0;
  for (int64_t begin = 0; begin < total; begin += step) {
    max_ids = std::max(max_ids, CountSliceIds(m, requests, offsets, begin,
                                              std::min(total, begin + step)));
  }
  absl::Status s = EnsureArena(max_ids, one_slice ? 1 : 2);
  if (!s.ok()) return s;
  const bool alone = busy_scope.others == 0 && !assume_busy_;
  if (one_slice && alone && DenseFirst(total)) {
    // Times its own phases.
    s = PackAndEnqueueDenseFirst(requests, offsets, total);
    clock.Lap();
  } else if (one_slice && CopyBeside(total)) {
    s = PackAndEnqueueCopyBeside(requests, offsets, total);  // likewise
    clock.Lap();
  } else {
    // Slice k + 1 is packed into the other arena while the GPU runs slice k.
    PackInto(0, requests, offsets, 0, std::min(total, step));
    host_path_.pack_us += clock.Lap();
    s = EnqueuePacked(0, one_slice ? live_ : nullptr);
    host_path_.enqueue_us += clock.Lap();
  }
  if (!s.ok()) return s;
  size_t r = 0;
  for (int64_t begin = 0; begin < total; begin += step) {
    const int64_t end = std::min<int64_t>(total, begin + step);
    const int next = cur_ ^ 1;
    if (end < total) {
      PackInto(next, requests, offsets, end, std::min(total, end + step));
      host_path_.pack_us += clock.Lap();
    }
    s = CudaStatus(cudaStreamSynchronize(stream_), "batch on GPU");
    host_path_.wait_us += clock.Lap();
    ++host_path_.slices;
    if (!s.ok()) return s;
    UnpackSlice(offsets, begin, end, scores, stats, &r);
    host_path_.unpack_us += clock.Lap();
    if (end < total) {
      s = EnqueuePacked(next, nullptr);
      if (!s.ok()) return s;
      host_path_.enqueue_us += clock.Lap();
    }
  }
  return absl::OkStatus();
}

absl::Status CudaWorker::WarmUp(absl::Span<const Request* const> requests,
                                absl::Span<const absl::Span<float>> scores) {
  absl::Status s = Execute(requests, scores, nullptr);
  if (!s.ok()) return s;
  assume_busy_ = true;
  s = Execute(requests, scores, nullptr);
  assume_busy_ = false;
  return s;
}

void CudaWorker::StartStats(BatchStats* stats) const {
  const Model& m = dm_->model();
  stats->unresolved_ids_per_table.assign(m.tables.size(), 0);
  stats->host_tables.clear();
  if (!dm_->any_host()) return;
  stats->host_tables.resize(m.tables.size());
  const PlacementPlan& plan = dm_->plan();
  for (size_t t = 0; t < m.tables.size(); ++t) {
    if (plan.tables[t].tier == Tier::kHost) stats->host_tables[t].emplace();
  }
  for (const DeviceModel::CacheInfo& c : dm_->cache_info()) {
    if (!stats->host_tables[c.table]) continue;
    stats->host_tables[c.table]->cache_occupancy =
        c.stats.capacity > 0 ? static_cast<double>(c.stats.occupied) / c.stats.capacity : 0.0;
  }
}

void CudaWorker::UnpackSlice(const RequestOffsets& offsets, int64_t begin, int64_t end,
                             absl::Span<const absl::Span<float>> scores, BatchStats* stats,
                             size_t* request) {
  const Model& m = dm_->model();
  const PackedLayout& layout = layouts_[cur_];
  const auto* counts =
      reinterpret_cast<const unsigned long long*>(host_out_.as<uint8_t>());
  // This slice's count of counter i.
  auto delta = [&](size_t i) -> int64_t { return counts[i] - last_counts_[i]; };
  if (dm_->any_host()) {
    // Ids of each feature in this slice, from the packed arena; the slice's
    // cache misses decide whether the next slice stages them.
    const uint8_t* arena = host_arenas_[cur_].as<uint8_t>();
    const PlacementPlan& plan = dm_->plan();
    int64_t host_lookups = 0;
    for (size_t f = 0; f < m.features.size(); ++f) {
      const int64_t ids = FeatureIds(layout, arena, f);
      if (stats != nullptr && stats->host_tables[m.features[f].table]) {
        stats->host_tables[m.features[f].table]->lookups += ids;
      }
      if (plan.tables[m.features[f].table].tier == Tier::kHost) host_lookups += ids;
    }
    int64_t misses = 0;
    for (size_t t = 0; t < m.tables.size(); ++t) {
      misses += delta(counters_.host_reads + t);
    }
    staging_on_ = StageNextSlice(misses, host_lookups, options_.staging_min_miss_rate, staging_on_);
  }
  const float* host_scores = reinterpret_cast<const float*>(host_out_.as<uint8_t>() + scores_offset_);
  size_t& r = *request;
  for (int64_t row = begin; row < end;) {
    while (offsets.row_start[r + 1] <= row) ++r;
    const int64_t c = row - offsets.row_start[r];
    const int64_t take = std::min(end, offsets.row_start[r + 1]) - row;
    std::memcpy(scores[r].data() + c, host_scores + (row - begin), sizeof(float) * take);
    row += take;
  }
  if (stats != nullptr) {
    for (size_t t = 0; t < m.tables.size(); ++t) {
      stats->unresolved_ids_per_table[t] += delta(counters_.unresolved_per_table + t);
    }
    for (size_t f = 0; f < m.features.size(); ++f) {  // the fused path counts per feature
      stats->unresolved_ids_per_table[m.features[f].table] +=
          delta(counters_.unresolved_per_feature + f);
    }
    for (size_t t = 0; t < stats->host_tables.size(); ++t) {
      if (!stats->host_tables[t]) continue;
      stats->host_tables[t]->host_reads += delta(counters_.host_reads + t);
      stats->host_tables[t]->host_rows_read += delta(counters_.host_rows_read + t);
    }
  }
  last_counts_.assign(counts, counts + last_counts_.size());
}

absl::StatusOr<std::vector<std::unique_ptr<Worker>>> CreateCudaWorkers(
    std::shared_ptr<const Model> model, const CudaWorker::Options& options,
    int workers_per_device, std::vector<int> devices,
    CudaSetupReport* report) {
  if (workers_per_device < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("workers per GPU must be >= 0 (0 = ", kDefaultWorkersPerGpu,
                     "), got ", workers_per_device));
  }
  if (workers_per_device == 0) workers_per_device = kDefaultWorkersPerGpu;
  if (devices.empty()) {
    std::string why;
    const int n = UsableCudaDevices(&why);
    if (n == 0) return absl::FailedPreconditionError(absl::StrCat("no usable GPU: ", why));
    for (int d = 0; d < n; ++d) devices.push_back(d);
  }
  // One placement for every GPU (planned for the one with the least free
  // memory), so one pinned copy of the HOST tables serves them all.
  DeviceModel::Options base;
  std::shared_ptr<const PlacementPlan> plan;
  std::shared_ptr<HostTables> host_tables;
  {
    int64_t least_available = INT64_MAX, least_total = INT64_MAX;
    for (int d : devices) {
      RANKD_RETURN_IF_CUDA_ERROR(cudaSetDevice(d), absl::StrCat("cudaSetDevice(", d, ")"));
      size_t free_bytes = 0, total_bytes = 0;
      RANKD_RETURN_IF_CUDA_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
      least_available = std::min(
          least_available, PlanAvailableBytes(static_cast<int64_t>(free_bytes), base.reserve_bytes));
      least_total = std::min(least_total, static_cast<int64_t>(total_bytes));
    }
    auto p = PlanPlacement(PlanInputFromModel(*model),
                           options.budget.Resolve(least_total, least_available));
    if (!p.ok()) return p.status();
    plan = std::make_shared<const PlacementPlan>(std::move(*p));
    if (report != nullptr) report->plan = plan;
    if (plan->any_host()) {
      auto h = HostTables::Create(model, *plan);
      if (!h.ok()) return h.status();
      host_tables = std::move(*h);
    }
  }
  // One packing pool for this model's workers on every GPU.
  std::shared_ptr<PackPool> pack_pool;
  {
    const int threads =
        options.pack_threads < 0 ? PackPool::DefaultThreads() : options.pack_threads;
    if (threads > 0) pack_pool = std::make_shared<PackPool>(threads);
  }
  std::vector<std::unique_ptr<Worker>> workers;
  for (int d : devices) {
    DeviceModel::Options dmo;
    dmo.device = d;
    dmo.plan = plan;
    dmo.host_tables = host_tables;
    dmo.shared_cache = options.shared_host_cache;
    dmo.cross_split = CrossSplitFor(options);
    kc::TinyDlrmShape tiny;
    dmo.pad_inputs = !(options.allow_fused_tiny && TinyShapeFor(*model, d, &tiny));
    auto dm = DeviceModel::Create(model, dmo);
    if (!dm.ok()) return dm.status();
    if (report != nullptr) {
      report->hash_build_keys += (*dm)->hash_build_keys();
      report->hash_build_seconds += (*dm)->hash_build_seconds();
      report->hash_insert_seconds += (*dm)->hash_insert_seconds();
      report->hash_keys_pinned = report->hash_keys_pinned && (*dm)->hash_keys_pinned();
      report->device_models.push_back(*dm);
    }
    for (int i = 0; i < workers_per_device; ++i) {
      auto w = CudaWorker::Create(*dm, options, absl::StrCat("cuda:", d, ":", i), pack_pool);
      if (!w.ok()) return w.status();
      workers.push_back(std::move(*w));
    }
  }
  return workers;
}

std::string BuiltCudaArchs() { return kc::BuiltCudaArchs(); }

int64_t SmallestGpuMemoryBytes() {
  int64_t smallest = 0;
  for (const kc::DeviceInfo& d : kc::QueryDevices().devices) {
    if (smallest == 0 || d.total_memory_bytes < smallest) smallest = d.total_memory_bytes;
  }
  return smallest;
}

int UsableCudaDevices(std::string* why_none) {
  const kc::DeviceQuery q = kc::QueryDevices();
  if (q.devices.empty() && why_none != nullptr) *why_none = q.note;
  return static_cast<int>(q.devices.size());
}

}  // namespace rankd::engine::cuda
