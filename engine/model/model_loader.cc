// LoadModel: one version directory -> Model. The config is validated first,
// then every tensor the config implies is checked against the file (and the
// file against the config) before anything is built, so a bad export fails
// with the full list of what is wrong.
#include "engine/model/model_loader.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "engine/model/error_list.h"
#include "engine/model/error_text.h"
#include "engine/model/finite_check.h"
#include "engine/model/host_memory.h"
#include "engine/model/model_shapes.h"
#include "engine/model/safetensors.h"
#include "engine/model/table_init.h"
#include "engine/model/tensor_layout.h"
#include "kernels/cpu/embedding_pool.h"
#include "kernels/cpu/parallel.h"

namespace rankd::engine {
namespace {

using rankd::v1::ModelConfig;

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

std::string ExpectedShapes(const TensorSpec& spec) {
  std::string s = ShapeString(spec.shape);
  if (spec.allow_trailing_one) {
    std::vector<int64_t> alt = spec.shape;
    alt.push_back(1);
    absl::StrAppend(&s, " or ", ShapeString(alt));
  }
  return s;
}

bool ShapeMatches(const TensorSpec& spec, const std::vector<int64_t>& shape) {
  if (shape == spec.shape) return true;
  if (!spec.allow_trailing_one || shape.size() != spec.shape.size() + 1) {
    return false;
  }
  return shape.back() == 1 &&
         std::equal(spec.shape.begin(), spec.shape.end(), shape.begin());
}

// A file exported for the other naming convention (or with a wrapper's
// prefix) is the likeliest cause of a wholesale mismatch: say so first, ahead
// of the list of names it produces.
std::string ConventionHint(const ModelConfig& config,
                           const std::vector<std::string>& unused) {
  const bool dcn = config.interaction().kind() == rankd::v1::DCN_V2;
  const std::string kind =
      rankd::v1::InteractionKind_Name(config.interaction().kind());
  for (const std::string& name : unused) {
    if (!dcn && (absl::StartsWith(name, "sparse_arch.") ||
                 absl::StartsWith(name, "dense_arch.") ||
                 absl::StartsWith(name, "over_arch."))) {
      return absl::StrCat(
          "the file looks like a TorchRec DLRM_DCN state_dict, but "
          "model.pbtxt says interaction ",
          kind, ": DOT and CAT models use DLRM_Net names "
          "(emb_l.*, bot_l.*, top_l.*; docs/model-format.md)");
    }
    if (dcn && (absl::StartsWith(name, "emb_l.") ||
                absl::StartsWith(name, "bot_l.") ||
                absl::StartsWith(name, "top_l."))) {
      return "the file looks like a DLRM_Net state_dict, but model.pbtxt says "
             "interaction DCN_V2: DCN_V2 models use TorchRec DLRM_DCN names "
             "(dense_arch.*, sparse_arch.*, inter_arch.*, over_arch.*; "
             "docs/model-format.md)";
    }
    if (absl::StartsWith(name, "model.")) {
      return "names start with 'model.' (a TorchRec DLRMTrain state_dict?): "
             "strip that prefix from every name before saving";
    }
  }
  return "";
}

// Why a dtype is expected, for the error message.
std::string DtypeReason(const ModelConfig& config,
                        const ModelTensorLayout& layout,
                        const TensorSpec& spec) {
  for (size_t k = 0; k < layout.tables.size(); ++k) {
    const rankd::v1::TableConfig& t = config.tables(static_cast<int>(k));
    if (&layout.tables[k].weight == &spec) {
      return absl::StrCat("table '", t.name(), "' has dtype ",
                          rankd::v1::DataType_Name(t.dtype()),
                          " in model.pbtxt; rows are never converted");
    }
    if (layout.tables[k].keys && &*layout.tables[k].keys == &spec) {
      return "keys are int64";
    }
  }
  return "MLP and cross-layer weights are F32";
}

// Checks the file holds exactly the layout's tensors with their dtypes and
// shapes; one error line per problem.
void CheckTensors(const ModelConfig& config, const SafetensorsFile& file,
                  const ModelTensorLayout& layout, ErrorList* errors) {
  std::set<std::string> expected;
  for (const TensorSpec* spec : layout.All()) expected.insert(spec->name);
  // A RANDOM table whose tensors are in the file too is ambiguous (which
  // rows serve?): an error naming both, never a silent choice.
  std::set<std::string> random_in_file;
  for (size_t k = 0; k < layout.tables.size(); ++k) {
    const TableTensors& tt = layout.tables[k];
    if (tt.in_file) continue;
    for (const TensorSpec* spec :
         {&tt.weight, tt.keys ? &*tt.keys : nullptr}) {
      if (spec == nullptr || file.Find(spec->name) == nullptr) continue;
      random_in_file.insert(spec->name);
      errors->Addf("tensor '", spec->name, "': table '",
                   config.tables(static_cast<int>(k)).name(), "' (tables[", k,
                   "]) has init RANDOM in model.pbtxt, so the file must not "
                   "hold its ",
                   spec == &tt.weight ? "rows" : "keys",
                   " (remove the tensor, or set tables[", k,
                   "].init.kind: FILE)");
    }
  }
  std::vector<std::string> unused;
  for (const auto& [name, info] : file.tensors()) {
    if (expected.count(name) == 0 && random_in_file.count(name) == 0) {
      unused.push_back(name);
    }
  }
  if (std::string hint = ConventionHint(config, unused); !hint.empty()) {
    errors->Add(std::move(hint));
  }

  for (const TensorSpec* spec : layout.All()) {
    const TensorInfo* t = file.Find(spec->name);
    if (t == nullptr) {
      errors->Addf("tensor '", spec->name, "' is missing (expected ",
                   TensorDtypeName(spec->dtype), " ", ExpectedShapes(*spec),
                   ")");
      continue;
    }
    if (t->dtype != spec->dtype) {
      // Never converted: a silent fp32 -> fp16 cast would change scores, and
      // a cast the other way would double the memory the config planned for.
      errors->Addf("tensor '", spec->name, "': expected dtype ",
                   TensorDtypeName(spec->dtype), ", got ",
                   TensorDtypeName(t->dtype), " (",
                   DtypeReason(config, layout, *spec), ")");
    }
    if (!ShapeMatches(*spec, t->shape)) {
      errors->Addf("tensor '", spec->name, "': expected shape ",
                   ExpectedShapes(*spec), ", got ", ShapeString(t->shape));
    }
  }

  if (!unused.empty()) {
    constexpr size_t kMaxNames = 10;
    const size_t shown = std::min(unused.size(), kMaxNames);
    // Names come from the file: each is quoted to kMaxQuotedBytes.
    std::string names = absl::StrCat(
        "'",
        absl::StrJoin(unused.begin(), unused.begin() + shown, "', '",
                      [](std::string* out, const std::string& name) {
                        out->append(TruncateForError(name));
                      }),
        "'");
    if (unused.size() > shown) {
      absl::StrAppend(&names, " and ", unused.size() - shown, " more");
    }
    // Never ignored: an unused tensor is a misspelt name or a layer the
    // config forgot, and serving without it would give wrong scores quietly.
    errors->Addf(unused.size() > 1 ? "tensors " : "tensor ", names,
                 " not used by this ",
                 rankd::v1::InteractionKind_Name(config.interaction().kind()),
                 " model (misspelt, or missing from model.pbtxt?)");
  }
}

// Reads an F32 tensor (MLP or cross-layer weights, small) and rejects
// NaN/Inf, which would turn every score into NaN.
absl::Status ReadFloats(const SafetensorsFile& file, const TensorSpec& spec,
                        std::vector<float>* out) {
  const TensorInfo* t = file.Find(spec.name);
  out->resize(static_cast<size_t>(t->size_bytes / sizeof(float)));
  if (absl::Status s = file.ReadTensor(*t, 0, t->size_bytes, out->data());
      !s.ok()) {
    return s;
  }
  for (size_t i = 0; i < out->size(); ++i) {
    if (!std::isfinite((*out)[i])) {
      // Weights are [out, in]: name the output row and input column too.
      const size_t cols = spec.shape.size() >= 2 ? static_cast<size_t>(spec.shape[1]) : 0;
      return absl::InvalidArgumentError(absl::StrCat(
          file.path(), ": tensor '", spec.name, "': non-finite value ", (*out)[i],
          " at element ", i,
          cols > 0 ? absl::StrCat(" (row ", i / cols, ", column ", i % cols, ")") : "",
          ": dense weights must be finite"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Linear> LoadLinear(const SafetensorsFile& file,
                                  const LinearTensors& spec) {
  Linear layer;
  layer.out = static_cast<int>(spec.weight.shape[0]);
  layer.in = static_cast<int>(spec.weight.shape[1]);
  if (absl::Status s = ReadFloats(file, spec.weight, &layer.weight); !s.ok()) {
    return s;
  }
  if (absl::Status s = ReadFloats(file, spec.bias, &layer.bias); !s.ok()) {
    return s;
  }
  return layer;
}

kernels::RowType RowTypeOf(rankd::v1::DataType d) {
  switch (d) {
    case rankd::v1::FP16:
      return kernels::RowType::kFp16;
    case rankd::v1::BF16:
      return kernels::RowType::kBf16;
    default:
      return kernels::RowType::kFp32;
  }
}

kernels::Pooling PoolingOf(rankd::v1::PoolingMode p) {
  switch (p) {
    case rankd::v1::MEAN:
      return kernels::Pooling::kMean;
    case rankd::v1::MAX:
      return kernels::Pooling::kMax;
    default:
      return kernels::Pooling::kSum;
  }
}

// State shared by one LoadModel call.
struct LoadContext {
  std::string directory;
  std::string model;
  int64_t version = 0;
  const LoadOptions* options = nullptr;
  const Clock* clock = nullptr;
  int threads = 1;
  // Caps the host bytes of each allocation; -1 = /proc/meminfo, read anew.
  int64_t mem_available = -1;
  bool build_hash_tables = true;
  absl::Mutex log_mu;

  // LoadOptions::cancel was set: the load stops at its next check.
  bool cancelled() const {
    return options->cancel != nullptr &&
           options->cancel->load(std::memory_order_relaxed);
  }
  absl::Status Cancelled() const {
    return absl::CancelledError(absl::StrCat("loading model '", model, "' v",
                                             version, " from ", directory,
                                             ": cancelled"));
  }

  void Log(const std::string& line) {
    if (!options->log) return;
    absl::MutexLock lock(&log_mu);  // one line at a time, from any thread
    options->log(line);
  }
};

// Progress of one phase of one table (filling rows, reading rows, building
// a hash table): rate-limited lines for big phases, and the phase's time.
// Thread-safe.
class PhaseProgress {
 public:
  // `bytes` decides whether lines are printed at all (progress_min_bytes);
  // `total` is in `unit`s.
  PhaseProgress(LoadContext* ctx, std::string table, std::string phase,
                const char* unit, int64_t total, int64_t bytes)
      : ctx_(ctx),
        table_(std::move(table)),
        phase_(std::move(phase)),
        unit_(unit),
        total_(total),
        report_(ctx->options->log && bytes >= ctx->options->progress_min_bytes),
        start_(ctx->clock->Now()),
        last_line_(start_) {}

  // `amount` more units done.
  void Add(int64_t amount) {
    absl::MutexLock lock(&mu_);
    ReportLocked(done_ + amount);
  }
  // `done` units done in all (reports may arrive out of order).
  void Reached(int64_t done) {
    absl::MutexLock lock(&mu_);
    ReportLocked(std::max(done_, done));
  }
  // Prints the end line (big phases only); returns the phase's seconds.
  double Finish() {
    const absl::Duration elapsed = ctx_->clock->Now() - start_;
    if (report_) {
      ctx_->Log(FormatLoadProgress(ctx_->model, ctx_->version, table_, phase_,
                                   unit_, total_, total_, elapsed));
    }
    return absl::ToDoubleSeconds(elapsed);
  }

 private:
  void ReportLocked(int64_t done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    done_ = done;
    // The end line says 100%; no progress line just before it.
    if (!report_ || done_ >= total_) return;
    const absl::Time now = ctx_->clock->Now();
    if (now - last_line_ < ctx_->options->progress_interval) return;
    last_line_ = now;
    ctx_->Log(FormatLoadProgress(ctx_->model, ctx_->version, table_, phase_,
                                 unit_, done_, total_, now - start_));
  }

  LoadContext* const ctx_;
  const std::string table_;
  const std::string phase_;
  const char* const unit_;
  const int64_t total_;
  const bool report_;
  const absl::Time start_;
  absl::Mutex mu_;
  int64_t done_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_line_ ABSL_GUARDED_BY(mu_);
};

// Work items of a fill (whole rows, about this many bytes) or a file read
// (this many bytes), so threads balance and progress moves in small steps.
constexpr int64_t kChunkBytes = int64_t{8} << 20;

int64_t RowsPerChunk(int64_t row_bytes) {
  return std::max<int64_t>(1, kChunkBytes / std::max<int64_t>(1, row_bytes));
}

// A buffer owning a fresh host mapping of `bytes`.
absl::StatusOr<ByteBuffer> NewHostBuffer(LoadContext* ctx, int64_t bytes,
                                         const std::string& what) {
  absl::StatusOr<HostAllocation> a =
      AllocateHostBytes(bytes, what, ctx->mem_available);
  if (!a.ok()) {
    return absl::Status(a.status().code(), absl::StrCat(ctx->directory, ": ",
                                                        a.status().message()));
  }
  auto owner = std::make_shared<HostAllocation>(*std::move(a));
  ByteBuffer buf;
  buf.data = owner->data();
  buf.size = bytes;
  buf.owner = std::move(owner);
  buf.pinnable = true;  // its own page-aligned, writable mapping
  buf.writable = true;
  return buf;
}

// INVALID_ARGUMENT naming the file, tensor, table, row and element if bytes
// [begin, end) of table rows `t` (read into `rows`) hold a NaN or Inf: such
// a row turns every score that pools it into NaN, so the model is refused
// at load. Chunk offsets are multiples of the element size (kChunkBytes is).
absl::Status NonFiniteRow(const SafetensorsFile& file, const TensorInfo& t,
                          const EmbeddingTable& table, const uint8_t* rows,
                          int64_t begin, int64_t end) {
  const int64_t elem = static_cast<int64_t>(kernels::RowTypeBytes(table.row_type));
  const int64_t bad = FindNonFinite(table.row_type, rows + begin, (end - begin) / elem);
  if (bad < 0) return absl::OkStatus();
  const int64_t index = begin / elem + bad;
  const float value = kernels::RowElementToFloat(rows, table.row_type, index);
  return absl::InvalidArgumentError(absl::StrCat(
      file.path(), ": tensor '", t.name, "' (table '", table.name, "'): row ",
      index / table.dim, " element ", index % table.dim, " is ", value,
      ": embedding rows must be finite (a NaN or Inf row makes every score "
      "that pools it NaN)"));
}

// A FILE table's rows or keys (`what`), read into an allocation of their
// own: a loaded version never depends on its files again (overwriting,
// truncating or deleting them changes nothing it serves), and the memory is
// writable and pinnable (the CUDA backend registers HOST tables in place).
// Every loader thread reads kChunkBytes pieces with pread. A read error
// (e.g. the file truncated meanwhile) fails the load; the one at the lowest
// offset is reported.
// `alloc_bytes` (>= the tensor's size) is the buffer's size: a dynamic
// table's rows and keys get room for max_keys (the rest is zeros).
// `rows_of` (rows only; null for keys): each chunk is checked for NaN / Inf
// right after it is read, while it is in cache (NonFiniteRow).
// Cancellation (LoadOptions::cancel) is checked before each chunk.
absl::StatusOr<ByteBuffer> ReadFileTensor(LoadContext* ctx,
                                          const SafetensorsFile& file,
                                          const TensorInfo& t,
                                          const std::string& table,
                                          const std::string& what,
                                          int64_t alloc_bytes,
                                          const EmbeddingTable* rows_of) {
  absl::StatusOr<ByteBuffer> buf = NewHostBuffer(
      ctx, std::max(alloc_bytes, t.size_bytes), absl::StrCat("table '", table, "' ", what));
  if (!buf.ok()) return buf.status();
  uint8_t* dst = const_cast<uint8_t*>(buf->data);
  PhaseProgress progress(ctx, table, absl::StrCat("reading ", what), "B",
                         t.size_bytes, t.size_bytes);
  std::atomic<bool> failed{false};
  absl::Mutex mu;
  absl::Status error;      // guarded by mu
  int64_t error_at = -1;   // guarded by mu
  kernels::ParallelChunks(
      t.size_bytes, kChunkBytes, ctx->threads,
      [&](int64_t begin, int64_t end) {
        // Give up soon after a failure or a cancellation.
        if (failed.load(std::memory_order_relaxed) || ctx->cancelled()) return;
        absl::Status s = file.ReadTensor(t, begin, end - begin, dst + begin);
        if (s.ok() && rows_of != nullptr) {
          s = NonFiniteRow(file, t, *rows_of, dst, begin, end);
        }
        if (s.ok()) {
          progress.Add(end - begin);
          return;
        }
        failed.store(true, std::memory_order_relaxed);
        absl::MutexLock lock(&mu);
        if (error_at < 0 || begin < error_at) {
          error = std::move(s);
          error_at = begin;
        }
      });
  if (!error.ok()) return error;
  if (ctx->cancelled()) return ctx->Cancelled();
  progress.Finish();
  return buf;
}

// Rows of an `init { kind: RANDOM }` table (table_init.h), filled by every
// loader thread: each chunk's values depend only on its rows, so the bytes
// do not depend on the thread count. Each thread's first write faults in its
// own pages.
absl::StatusOr<ByteBuffer> RandomRows(LoadContext* ctx,
                                      const rankd::v1::TableConfig& config,
                                      const EmbeddingTable& table) {
  const int64_t bytes = table.num_rows * table.row_bytes();
  absl::StatusOr<ByteBuffer> buf = NewHostBuffer(
      ctx, table.capacity_rows() * table.row_bytes(),
      absl::StrCat("table '", table.name, "' rows"));
  if (!buf.ok()) return buf.status();
  uint8_t* dst = const_cast<uint8_t*>(buf->data);
  const uint64_t stream = RandomTableStream(config.init().seed(), table.name);
  const float scale = config.init().scale() > 0
                          ? config.init().scale()
                          : DefaultRandomInitScale(table.num_rows);
  const int64_t row_bytes = table.row_bytes();
  PhaseProgress progress(ctx, table.name, "random rows", "B", bytes, bytes);
  kernels::ParallelChunks(
      table.num_rows, RowsPerChunk(row_bytes), ctx->threads,
      [&](int64_t begin, int64_t end) {
        if (ctx->cancelled()) return;  // the rest of the chunks are no-ops
        FillRandomRows(stream, scale, table.dim, table.row_type, begin, end,
                       dst + begin * row_bytes);
        progress.Add((end - begin) * row_bytes);
      });
  if (ctx->cancelled()) return ctx->Cancelled();
  progress.Finish();
  return buf;
}

absl::StatusOr<ByteBuffer> RandomKeys(LoadContext* ctx,
                                      const rankd::v1::TableConfig& config,
                                      const EmbeddingTable& table) {
  absl::StatusOr<ByteBuffer> buf =
      NewHostBuffer(ctx, table.capacity_rows() * 8,
                    absl::StrCat("table '", table.name, "' keys"));
  if (!buf.ok()) return buf.status();
  int64_t* dst = reinterpret_cast<int64_t*>(const_cast<uint8_t*>(buf->data));
  const uint64_t stream = RandomTableStream(config.init().seed(), table.name);
  kernels::ParallelChunks(table.num_rows, RowsPerChunk(8), ctx->threads,
                          [&](int64_t begin, int64_t end) {
                            if (ctx->cancelled()) return;
                            FillRandomKeys(stream, begin, end, dst + begin);
                          });
  if (ctx->cancelled()) return ctx->Cancelled();
  return buf;
}

absl::Status LoadTable(LoadContext* ctx, const SafetensorsFile& file,
                       const rankd::v1::TableConfig& config,
                       const TableTensors& spec, EmbeddingTable* table,
                       TableLoadStats* stats) {
  table->name = config.name();
  table->dynamic = config.kind() == rankd::v1::DYNAMIC;
  table->num_rows = config.num_rows();
  table->dim = config.dim();
  table->row_type = RowTypeOf(config.dtype());
  table->pooling = PoolingOf(config.pooling());
  table->placement = config.placement();
  table->id_policy = config.id_policy();
  table->default_vector.assign(config.default_vector().begin(),
                               config.default_vector().end());
  if (table->dynamic) {
    table->max_keys = std::max(config.max_keys(), config.num_rows());
    table->eviction = config.eviction();
  }
  const bool random = config.init().kind() == rankd::v1::RANDOM;
  stats->table = table->name;
  stats->row_bytes = table->num_rows * table->row_bytes();

  const absl::Time rows_start = ctx->clock->Now();
  absl::StatusOr<ByteBuffer> rows;
  if (random) {
    stats->source = TableSource::kRandom;
    rows = RandomRows(ctx, config, *table);
  } else {
    stats->source = TableSource::kFileRead;
    rows = ReadFileTensor(ctx, file, *file.Find(spec.weight.name),
                          table->name, "rows",
                          table->capacity_rows() * table->row_bytes(), table);
  }
  if (!rows.ok()) return rows.status();
  table->rows = *std::move(rows);
  stats->rows_seconds = absl::ToDoubleSeconds(ctx->clock->Now() - rows_start);
  if (!table->dynamic) return absl::OkStatus();

  // Kept (like the rows): request generators and warmup need real keys, and
  // GPU backends may rebuild their own tables from them.
  const absl::Time hash_start = ctx->clock->Now();
  absl::StatusOr<ByteBuffer> keys;
  if (random) {
    keys = RandomKeys(ctx, config, *table);
  } else {
    keys = ReadFileTensor(ctx, file, *file.Find(spec.keys->name),
                          table->name, "keys", table->capacity_rows() * 8,
                          /*rows_of=*/nullptr);
  }
  if (!keys.ok()) return keys.status();
  table->keys = *std::move(keys);
  absl::Span<const int64_t> key_span(
      reinterpret_cast<const int64_t*>(table->keys.data),
      static_cast<size_t>(table->num_rows));
  // Built on the GPU instead, unless request validation needs it (id_policy
  // ERROR rejects requests with keys that are not stored).
  if (!ctx->build_hash_tables && table->id_policy != rankd::v1::ERROR) return absl::OkStatus();
  const int64_t hash_bytes = kernels::HashTable::SlotsFor(config.capacity()) * 16;
  PhaseProgress progress(ctx, table->name, "hash build", "keys",
                         table->num_rows, hash_bytes);
  kernels::HashBuildOptions build;
  build.num_threads = ctx->threads;
  build.progress = [&progress](int64_t done) { progress.Reached(done); };
  absl::Status s = kernels::HashTable::BuildParallel(
      key_span, config.capacity(), build, &table->hash);
  // The build itself cannot stop halfway; a cancellation is seen after it.
  if (ctx->cancelled()) return ctx->Cancelled();
  if (!s.ok()) {
    // RANDOM keys are distinct by construction: only a file can get here.
    return absl::Status(s.code(), absl::StrCat(file.path(), ": tensor '",
                                               spec.keys->name, "': ",
                                               s.message()));
  }
  progress.Finish();
  if (ctx->build_hash_tables) {
    // The CPU backend inserts, erases and evicts keys of this table on the
    // host (online updates); its state starts here.
    if (absl::Status a = AttachDynamicState(table); !a.ok()) return a;
  }
  stats->hash_keys = table->num_rows;
  stats->hash_seconds = absl::ToDoubleSeconds(ctx->clock->Now() - hash_start);
  return absl::OkStatus();
}

absl::Status BuildModel(LoadContext* ctx, const SafetensorsFile& file,
                        const ModelTensorLayout& layout, Model* model) {
  const ModelConfig& c = model->config;
  model->num_dense = c.num_dense();
  model->tables.resize(c.tables_size());
  model->load_stats.tables.resize(c.tables_size());
  for (int k = 0; k < c.tables_size(); ++k) {
    if (ctx->cancelled()) return ctx->Cancelled();
    if (absl::Status s =
            LoadTable(ctx, file, c.tables(k), layout.tables[k],
                      &model->tables[k], &model->load_stats.tables[k]);
        !s.ok()) {
      return s;
    }
  }
  for (const rankd::v1::SparseFeatureConfig& f : c.sparse_features()) {
    SparseFeature feature;
    feature.name = f.name();
    for (int k = 0; k < c.tables_size(); ++k) {
      if (c.tables(k).name() == f.table()) feature.table = k;
    }
    feature.request_level = f.request_level();
    feature.max_ids_per_bag = f.max_ids_per_bag();
    model->features.push_back(std::move(feature));
  }
  if (ctx->cancelled()) return ctx->Cancelled();
  for (const LinearTensors& spec : layout.bottom) {
    absl::StatusOr<Linear> layer = LoadLinear(file, spec);
    if (!layer.ok()) return layer.status();
    model->bottom.push_back(*std::move(layer));
  }
  model->interaction = c.interaction().kind();
  model->self_interaction = c.interaction().self_interaction();
  model->interaction_width = static_cast<int>(InteractionWidth(c));
  for (const CrossTensors& spec : layout.cross) {
    CrossLayer layer;
    layer.rank = static_cast<int>(spec.v.shape[0]);
    layer.n = static_cast<int>(spec.v.shape[1]);
    for (auto [t, out] : {std::make_pair(&spec.v, &layer.v),
                          std::make_pair(&spec.w, &layer.w),
                          std::make_pair(&spec.bias, &layer.bias)}) {
      if (absl::Status s = ReadFloats(file, *t, out); !s.ok()) return s;
    }
    model->cross.push_back(std::move(layer));
  }
  for (const LinearTensors& spec : layout.top) {
    absl::StatusOr<Linear> layer = LoadLinear(file, spec);
    if (!layer.ok()) return layer.status();
    model->top.push_back(*std::move(layer));
  }
  return absl::OkStatus();
}

int64_t SpecBytes(const TensorSpec& spec) {
  int64_t n = TensorDtypeBytes(spec.dtype);
  for (int64_t d : spec.shape) n *= d;
  return n;
}

// Host memory the load will allocate: every table's rows and keys (generated
// or read from the file: a loaded model holds its own copy), hash tables and
// dense weights, checked against the memory this process can still use
// (MemAvailable, or the cgroup's room) before anything is allocated:
// a model that cannot fit fails at once, naming what it needs, instead of
// after minutes of filling or being OOM-killed. Page cache the file reads
// leave behind is not counted (MemAvailable counts it as reclaimable).
absl::Status CheckModelHostMemory(const LoadContext& ctx,
                                  const ModelConfig& c,
                                  const ModelTensorLayout& layout) {
  int64_t random_rows = 0, random_keys = 0, file_rows = 0, file_keys = 0;
  int64_t hash = 0, dense = 0;
  for (int k = 0; k < c.tables_size(); ++k) {
    const rankd::v1::TableConfig& t = c.tables(k);
    const TableTensors& spec = layout.tables[k];
    const bool dynamic = t.kind() == rankd::v1::DYNAMIC;
    // A dynamic table's rows and keys are allocated for max_keys, its
    // scores and free list too (24 bytes a key).
    const int64_t grow = dynamic ? std::max<int64_t>(0, t.max_keys() - t.num_rows()) : 0;
    (spec.in_file ? file_rows : random_rows) +=
        SpecBytes(spec.weight) +
        grow * int64_t{t.dim()} * static_cast<int64_t>(kernels::RowTypeBytes(RowTypeOf(t.dtype())));
    if (dynamic) {
      (spec.in_file ? file_keys : random_keys) += std::max(t.num_rows(), t.max_keys()) * 24;
    }
    if (dynamic && (ctx.build_hash_tables || t.id_policy() == rankd::v1::ERROR)) {
      hash += kernels::HashTable::SlotsFor(t.capacity()) * 16;
    }
  }
  for (const auto* group : {&layout.bottom, &layout.top}) {
    for (const LinearTensors& l : *group) {
      dense += SpecBytes(l.weight) + SpecBytes(l.bias);
    }
  }
  for (const CrossTensors& x : layout.cross) {
    dense += SpecBytes(x.v) + SpecBytes(x.w) + SpecBytes(x.bias);
  }
  const int64_t total =
      random_rows + random_keys + file_rows + file_keys + hash + dense;
  int64_t available = ctx.mem_available;
  std::string source = "MemAvailable in /proc/meminfo";
  if (available < 0) {
    absl::StatusOr<AvailableHostMemory> read = ReadAvailableHostMemory();
    if (!read.ok()) return absl::OkStatus();  // not Linux: no early check
    available = read->bytes;
    source = read->source;
  }
  std::vector<std::string> parts;
  auto part = [&parts](const char* name, int64_t bytes) {
    if (bytes > 0) {
      parts.push_back(
          absl::StrCat(name, " ", HumanBytes(static_cast<double>(bytes))));
    }
  };
  part("random rows", random_rows);
  part("random keys", random_keys);
  part("file rows", file_rows);
  part("file keys", file_keys);
  part("hash tables", hash);
  part("dense weights", dense);
  return CheckHostMemory(total, available,
                         absl::StrCat("loading model '", ctx.model, "' v",
                                      ctx.version, " (",
                                      absl::StrJoin(parts, " + "), ")"),
                         source);
}

std::string Gb(int64_t bytes) {
  return absl::StrFormat("%.2f GB", static_cast<double>(bytes) / 1e9);
}

std::string PerSecond(double amount, double seconds, const char* unit) {
  if (seconds <= 0) return absl::StrCat("- ", unit, "/s");
  return absl::StrFormat("%.2f %s/s", amount / seconds, unit);
}

// "loaded mlperf v1 in 12.3 s (16 threads): random rows 52.30 GB in 10.1 s
// (5.18 GB/s); file rows 7.40 GB in 2.1 s (3.52 GB/s); hash tables 160.0 M
// keys in 2.0 s (80.00 M keys/s)". Seconds are summed over tables, which
// load one after the other.
std::string SummaryLine(const Model& m) {
  const ModelLoadStats& st = m.load_stats;
  std::vector<std::string> parts;
  for (TableSource source : {TableSource::kRandom, TableSource::kFileRead}) {
    const int64_t bytes = st.RowBytes(source);
    const double secs = st.RowSeconds(source);
    if (bytes == 0) continue;
    parts.push_back(absl::StrFormat(
        "%s rows %s in %.2f s (%s)",
        source == TableSource::kRandom ? "random" : "file", Gb(bytes), secs,
        PerSecond(static_cast<double>(bytes) / 1e9, secs, "GB")));
  }
  if (const int64_t keys = st.HashKeys(); keys > 0) {
    parts.push_back(absl::StrFormat(
        "hash tables %.1f M keys in %.2f s (%s)", keys / 1e6, st.HashSeconds(),
        PerSecond(keys / 1e6, st.HashSeconds(), "M keys")));
  }
  return absl::StrFormat("loaded %s v%d in %.2f s (%d thread%s): %s", m.name,
                         m.version, st.seconds, st.threads,
                         st.threads == 1 ? "" : "s", absl::StrJoin(parts, "; "));
}

}  // namespace

std::string FormatLoadProgress(const std::string& model, int64_t version,
                               const std::string& table,
                               const std::string& phase, const char* unit,
                               int64_t done, int64_t total,
                               absl::Duration elapsed) {
  const bool keys = std::string(unit) == "keys";
  const double scale = keys ? 1e6 : 1e9;  // M keys, GB
  const char* shown = keys ? "M keys" : "GB";
  const double secs = absl::ToDoubleSeconds(elapsed);
  const std::string head =
      absl::StrFormat("loading %s v%d table %s (%s): ", model, version, table,
                      phase);
  // Rates: M keys/s, GB/s.
  const double rate = secs > 0 ? done / secs / scale : 0;
  const std::string rate_text =
      keys ? absl::StrFormat("%.1f M keys/s", rate)
           : absl::StrFormat("%.2f GB/s", rate);
  if (done >= total) {
    return absl::StrCat(
        head,
        absl::StrFormat("100%% (%.2f %s) in %.2f s", total / scale, shown,
                        secs),
        secs > 0 ? absl::StrCat(", ", rate_text) : "");
  }
  const int percent =
      total > 0 ? static_cast<int>(100.0 * static_cast<double>(done) / total)
                : 0;
  std::string line = absl::StrCat(
      head, absl::StrFormat("%d%% (%.2f / %.2f %s)", percent, done / scale,
                            total / scale, shown));
  if (secs > 0 && done > 0) {
    absl::StrAppend(&line, " ", rate_text,
                    absl::StrFormat(" ETA %.1f s", (total - done) / (done / secs)));
  }
  return line;
}

absl::StatusOr<std::shared_ptr<const Model>> LoadModel(
    const std::string& directory, int64_t version,
    const std::string& expected_name) {
  return LoadModel(directory, version, expected_name, LoadOptions());
}

absl::StatusOr<std::shared_ptr<const Model>> LoadModel(
    const std::string& directory, int64_t version,
    const std::string& expected_name, const LoadOptions& options) {
  LoadContext ctx;
  ctx.options = &options;
  ctx.clock = options.clock != nullptr ? options.clock : RealClock::Get();
  ctx.threads = kernels::ResolveThreads(options.num_threads);
  ctx.mem_available = options.mem_available_bytes;
  ctx.build_hash_tables = options.build_hash_tables;
  ctx.version = version;
  ctx.directory = directory;
  const absl::Time start = ctx.clock->Now();

  const std::string config_path = absl::StrCat(directory, "/model.pbtxt");
  absl::StatusOr<ModelConfig> config = ReadModelConfig(config_path);
  if (!config.ok()) return config.status();
  if (!expected_name.empty() && config->name() != expected_name) {
    return absl::InvalidArgumentError(
        absl::StrCat(config_path, ": name: '", config->name(),
                     "' must equal the model's directory name '",
                     expected_name, "'"));
  }
  ctx.model = config->name();

  if (ctx.cancelled()) return ctx.Cancelled();
  const std::string weights_path =
      absl::StrCat(directory, "/weights.safetensors");
  absl::StatusOr<std::shared_ptr<const SafetensorsFile>> file =
      SafetensorsFile::Open(weights_path);
  if (!file.ok()) return file.status();

  const ModelTensorLayout layout = ExpectedTensorLayout(*config);
  ErrorList errors(weights_path);
  CheckTensors(*config, **file, layout, &errors);
  if (!errors.empty()) return errors.ToStatus();
  if (absl::Status s = CheckModelHostMemory(ctx, *config, layout);
      !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(directory, ": ", s.message()));
  }

  auto model = std::make_shared<Model>();
  model->name = config->name();
  model->version = version;
  model->directory = directory;
  model->config = *std::move(config);
  model->load_stats.threads = ctx.threads;
  if (absl::Status s = BuildModel(&ctx, **file, layout, model.get()); !s.ok()) {
    return s;
  }
  model->load_stats.seconds = absl::ToDoubleSeconds(ctx.clock->Now() - start);
  // Small models stay quiet, like their tables' phases.
  if (model->table_bytes() >= options.progress_min_bytes) {
    ctx.Log(SummaryLine(*model));
  }
  return std::shared_ptr<const Model>(std::move(model));
}

}  // namespace rankd::engine
