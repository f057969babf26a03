#include "engine/cpu/cpu_engine.h"

#define EIGEN_USE_THREADS
#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"
#include "engine/batch_rows.h"
#include "engine/request_validation.h"
#include "kernels/cpu/dense.h"
#include "kernels/cpu/embedding_pool.h"
#include "kernels/cpu/host_resources.h"
#include "kernels/cpu/thread_priority.h"
#include "kernels/cpu/thread_start.h"
#include "kernels/cpu/types.h"
#include "unsupported/Eigen/CXX11/ThreadPool"

namespace rankd::engine {

using kernels::Activation;
using kernels::RoundUpRows;

namespace {

// Eigen's thread environment, with each pool thread named and set to the
// engine's nice increment before it takes work. A thread the process cannot
// start (std::system_error) is counted in `start_failures` and left out
// (null): the pool is then cancelled and destroyed (CpuEngine::Create), which
// its started threads leave at once, instead of the exception ending rankd.
struct PoolThreadEnvironment : Eigen::StlThreadEnvironment {
  int nice = 0;
  std::atomic<int>* start_failures = nullptr;
  std::string* first_failure = nullptr;  // written before the count rises
  EnvThread* CreateThread(std::function<void()> f) {
    try {
      return new EnvThread([f = std::move(f), nice = nice] {
        pthread_setname_np(pthread_self(), "rankd-compute");
        // A failure leaves the thread at the default priority: slower refusals
        // under overload, never wrong scores, so it is not an error.
        kernels::LowerThisThreadPriority(nice);
        f();
      });
    } catch (const std::system_error& e) {
      // Eigen creates its threads one after another on the constructing
      // thread, so these writes do not race.
      if (start_failures->load() == 0) *first_failure = e.what();
      start_failures->fetch_add(1);
      return nullptr;
    }
  }
};

}  // namespace

struct CpuEngine::Pool {
  Pool(int threads, int nice)
      : pool(threads, /*allow_spinning=*/true,
             PoolThreadEnvironment{{}, nice, &start_failures, &first_failure}) {}
  // Declared before `pool`, which writes them while it is constructed.
  std::atomic<int> start_failures{0};
  std::string first_failure;
  Eigen::ThreadPoolTempl<PoolThreadEnvironment> pool;
};

// Per-thread buffers, grown on demand and reused across batches.
struct CpuEngine::Scratch {
  std::vector<float> ping, pong;   // MLP activations
  std::vector<float> feats;        // [rows, feat_width]: x then e_0..e_{F-1}
  std::vector<float> top_in;       // DOT output / DCN output
  std::vector<float> cross_tmp;    // DCN: rows x rank
};

// Everything a batch's tasks share, computed once per batch.
struct CpuEngine::BatchPlan {
  absl::Span<const Request* const> requests;
  absl::Span<const absl::Span<float>> scores;
  std::vector<int64_t> row_start;  // [R + 1]: first batch row of request r
  // offsets[r][f]: bag offsets of request r, feature f (lengths + 1 entries).
  std::vector<std::vector<std::vector<int64_t>>> offsets;
  // shared[r][f]: pooled vector of a shared (single) bag, else empty.
  std::vector<std::vector<std::vector<float>>> shared;
  std::vector<kernels::HashTableView> hash_views;  // per table
  uint64_t score_now = 0;  // logical time stamped on dynamic keys' LRU scores
  std::vector<int> feat_col;  // column of feature f in `feats`
  int feat_width = 0;
};

namespace {

void ZeroRows(float* data, int64_t stride, int64_t from, int64_t to) {
  if (to > from) std::fill(data + from * stride, data + to * stride, 0.0f);
}

}  // namespace

CpuEngine::CpuEngine(std::shared_ptr<const Model> model, const Options& options)
    : model_(std::move(model)), options_(options) {}

CpuEngine::~CpuEngine() = default;  // pool_'s destructor joins its threads

absl::StatusOr<std::unique_ptr<CpuEngine>> CpuEngine::Create(
    std::shared_ptr<const Model> model, const Options& options) {
  if (model == nullptr) return absl::InvalidArgumentError("CpuEngine: no model");
  if (options.num_threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CpuEngine: num_threads must be >= 0 (0 = all cores), got ",
        options.num_threads));
  }
  if (options.thread_nice < 0 || options.thread_nice > kernels::kMaxNice) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CpuEngine: thread_nice must be in [0, ", kernels::kMaxNice, "], got ",
        options.thread_nice));
  }
  if (options.max_rows_per_task <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CpuEngine: max_rows_per_task must be > 0, got ",
        options.max_rows_per_task));
  }
  std::unique_ptr<CpuEngine> engine(new CpuEngine(std::move(model), options));
  int threads = options.num_threads;
  if (threads == 0) threads = kernels::UsableCpus();
  engine->num_threads_ = threads;
  // One thread: every task runs on the calling thread (ScoreBatch), so no
  // pool thread is started (nor handed work, nor left spinning).
  if (threads > 1) {
    engine->pool_ = std::make_unique<Pool>(threads, options.thread_nice);
    if (const int failed = engine->pool_->start_failures.load(); failed > 0) {
      const std::string why = engine->pool_->first_failure;
      engine->pool_->pool.Cancel();  // the started threads leave; reset joins them
      engine->pool_.reset();
      return kernels::ThreadStartError(
          absl::StrCat(failed, " of the CPU engine's ", threads, " compute threads"), why);
    }
  }
  for (int i = 0; i < threads; ++i) {
    engine->scratch_.push_back(std::make_unique<Scratch>());
  }
  return engine;
}

absl::StatusOr<std::vector<float>> CpuEngine::Score(const Request& request) {
  absl::Status valid = ValidateRequest(*model_, request);
  if (!valid.ok()) return valid;
  std::vector<float> out(request.num_candidates);
  const Request* reqs[] = {&request};
  absl::Span<float> outs[] = {absl::MakeSpan(out)};
  absl::Status s = ScoreBatch(reqs, outs, nullptr);
  if (!s.ok()) return s;
  return out;
}

absl::Status CpuEngine::ScoreBatch(absl::Span<const Request* const> requests,
                                   absl::Span<const absl::Span<float>> scores, BatchStats* stats) {
  if (requests.size() != scores.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ScoreBatch: ", requests.size(), " requests but ", scores.size(),
        " score outputs"));
  }
  BatchPlan plan;
  std::vector<int64_t> unresolved_shared(model_->tables.size(), 0);
  if (absl::Status s = PlanBatch(requests, scores, &plan, &unresolved_shared); !s.ok()) return s;
  const std::vector<std::vector<int64_t>> unresolved = RunTasks(plan);
  if (stats != nullptr) {
    stats->unresolved_ids_per_table = unresolved_shared;
    for (const auto& per_task : unresolved) {
      for (size_t i = 0; i < per_task.size(); ++i) {
        stats->unresolved_ids_per_table[i] += per_task[i];
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CpuEngine::PlanBatch(absl::Span<const Request* const> requests,
                                  absl::Span<const absl::Span<float>> scores, BatchPlan* plan,
                                  std::vector<int64_t>* unresolved_shared) const {
  const Model& m = *model_;
  const size_t num_features = m.features.size();
  plan->requests = requests;
  plan->scores = scores;
  plan->row_start.assign(requests.size() + 1, 0);
  for (const EmbeddingTable& t : m.tables) plan->hash_views.push_back(t.hash.view());
  plan->score_now = m.score_clock->fetch_add(1, std::memory_order_relaxed) + 1;
  plan->feat_col.resize(num_features);
  int col = m.dense_out_width();
  for (size_t f = 0; f < num_features; ++f) {
    plan->feat_col[f] = col;
    col += m.tables[m.features[f].table].dim;
  }
  plan->feat_width = col;

  plan->offsets.resize(requests.size());
  plan->shared.resize(requests.size());
  for (size_t r = 0; r < requests.size(); ++r) {
    const Request& req = *requests[r];
    if (req.features.size() != num_features ||
        scores[r].size() != static_cast<size_t>(req.num_candidates)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ScoreBatch: request ", r, " does not fit the model or its output"));
    }
    plan->row_start[r + 1] = plan->row_start[r] + req.num_candidates;
    plan->offsets[r].resize(num_features);
    plan->shared[r].resize(num_features);
    for (size_t f = 0; f < num_features; ++f) {
      const FeatureInput& in = req.features[f];
      std::vector<int64_t>& off = plan->offsets[r][f];
      off = BagOffsets(in.lengths);
      if (in.lengths.size() != 1) continue;
      // One bag for every candidate: pool it once, broadcast per row.
      const int table = m.features[f].table;
      const EmbeddingTable& t = m.tables[table];
      std::vector<float>& v = plan->shared[r][f];
      v.resize(t.dim);
      kernels::PoolBags bags{in.ids.data(), off.data(),
                             in.weights.empty() ? nullptr : in.weights.data(), 1};
      (*unresolved_shared)[table] += kernels::PoolEmbeddings(
          t.pool_view(&plan->hash_views[table], plan->score_now), bags, v.data(), t.dim);
    }
  }
  return absl::OkStatus();
}

std::vector<std::vector<int64_t>> CpuEngine::RunTasks(const BatchPlan& plan) {
  const int64_t total = plan.row_start.back();
  const int64_t max_task = RoundUpRows(options_.max_rows_per_task);
  const int64_t per_thread = RoundUpRows((total + num_threads_ - 1) / num_threads_);
  const int64_t rows_per_task = std::clamp<int64_t>(per_thread, kernels::kRowQuantum, max_task);
  const int64_t num_tasks = (total + rows_per_task - 1) / rows_per_task;
  std::vector<std::vector<int64_t>> unresolved(num_tasks,
                                               std::vector<int64_t>(model_->tables.size(), 0));
  if (num_tasks == 1 || pool_ == nullptr) {
    // A small batch (every 1-candidate request at low load) is one task: run
    // it on the calling thread. Handing it to the pool cost two thread
    // wake-ups per batch plus the pool threads' spinning afterwards, several
    // times the task itself (perf, docs/benchmarks.md "Per-request host path").
    // Without a pool (one thread) every task runs here, one after another.
    // The same RunTask on the same rows gives the same bits.
    std::unique_ptr<Scratch> scratch = TakeCallerScratch();
    for (int64_t t = 0; t < num_tasks; ++t) {
      const int64_t begin = t * rows_per_task;
      RunTask(plan, begin, std::min(total, begin + rows_per_task), scratch.get(),
              &unresolved[t]);
    }
    ReturnCallerScratch(std::move(scratch));
    return unresolved;
  }
  Eigen::Barrier done(static_cast<unsigned>(num_tasks));
  for (int64_t t = 0; t < num_tasks; ++t) {
    pool_->pool.Schedule([this, &plan, &unresolved, &done, t, rows_per_task, total] {
      const int id = pool_->pool.CurrentThreadId();
      const int64_t begin = t * rows_per_task;
      RunTask(plan, begin, std::min(total, begin + rows_per_task), scratch_[id].get(),
              &unresolved[t]);
      done.Notify();
    });
  }
  done.Wait();
  return unresolved;
}

std::unique_ptr<CpuEngine::Scratch> CpuEngine::TakeCallerScratch() {
  absl::MutexLock lock(&caller_scratch_mu_);
  if (caller_scratch_.empty()) return std::make_unique<Scratch>();
  std::unique_ptr<Scratch> s = std::move(caller_scratch_.back());
  caller_scratch_.pop_back();
  return s;
}

void CpuEngine::ReturnCallerScratch(std::unique_ptr<Scratch> scratch) {
  absl::MutexLock lock(&caller_scratch_mu_);
  caller_scratch_.push_back(std::move(scratch));
}

void CpuEngine::RunTask(const BatchPlan& plan, int64_t row_begin,
                        int64_t row_end, Scratch* s,
                        std::vector<int64_t>* unresolved) const {
  const Model& m = *model_;
  const int64_t n = row_end - row_begin;
  const int64_t rows = RoundUpRows(n);  // padded rows are zeros

  int max_width = std::max(m.num_dense, m.interaction_width);
  for (const Linear& l : m.bottom) max_width = std::max(max_width, l.out);
  for (const Linear& l : m.top) max_width = std::max(max_width, l.out);
  auto grow = [](std::vector<float>& v, int64_t size) {
    if (static_cast<int64_t>(v.size()) < size) v.resize(size);
  };
  grow(s->ping, rows * max_width);
  grow(s->pong, rows * max_width);
  grow(s->feats, rows * plan.feat_width);
  grow(s->top_in, rows * m.interaction_width);
  if (!m.cross.empty()) grow(s->cross_tmp, rows * m.cross[0].rank);

  const std::vector<RowSegment> segments = SegmentRows(plan.row_start, row_begin, row_end);
  RunBottomMlp(plan, segments, n, rows, s);
  PoolFeatures(plan, segments, s->feats.data(), unresolved);
  int64_t top_stride = 0;
  const float* top_in = Interact(plan, rows, s, &top_stride);
  RunTopMlp(plan, segments, rows, top_in, top_stride, s);
}

// 1. Dense input -> bottom MLP -> x in feats[:, 0:dense_out_width].
void CpuEngine::RunBottomMlp(const BatchPlan& plan, absl::Span<const RowSegment> segments,
                             int64_t n, int64_t rows, Scratch* s) const {
  const Model& m = *model_;
  const int fw = plan.feat_width;
  float* feats = s->feats.data();
  const int nd = m.num_dense;
  float* dense_dst = m.bottom.empty() ? feats : s->ping.data();
  const int64_t dense_stride = m.bottom.empty() ? fw : nd;
  for (const RowSegment& seg : segments) {
    const float* src = plan.requests[seg.request]->dense.data() + seg.first_candidate * nd;
    for (int64_t i = 0; i < seg.count; ++i) {
      std::memcpy(dense_dst + (seg.local_row + i) * dense_stride, src + i * nd,
                  nd * sizeof(float));
    }
  }
  ZeroRows(feats, fw, n, rows);  // padding rows: all zero inputs
  if (m.bottom.empty()) return;
  ZeroRows(s->ping.data(), nd, n, rows);
  const float* in = s->ping.data();
  int64_t in_stride = nd;
  for (size_t l = 0; l < m.bottom.size(); ++l) {
    const bool last = l + 1 == m.bottom.size();
    float* out = last ? feats : (in == s->ping.data() ? s->pong.data() : s->ping.data());
    const int64_t out_stride = last ? fw : m.bottom[l].out;
    kernels::LinearForward(m.bottom[l].view(), in, in_stride, rows, Activation::kRelu, out,
                           out_stride);
    in = out;
    in_stride = out_stride;
  }
}

// 2. Pooled embeddings straight into their columns of feats.
void CpuEngine::PoolFeatures(const BatchPlan& plan, absl::Span<const RowSegment> segments,
                             float* feats, std::vector<int64_t>* unresolved) const {
  const Model& m = *model_;
  const int fw = plan.feat_width;
  for (size_t f = 0; f < m.features.size(); ++f) {
    const int table = m.features[f].table;
    const EmbeddingTable& t = m.tables[table];
    const kernels::PoolTable view = t.pool_view(&plan.hash_views[table], plan.score_now);
    for (const RowSegment& seg : segments) {
      const FeatureInput& in = plan.requests[seg.request]->features[f];
      float* dst = feats + seg.local_row * fw + plan.feat_col[f];
      const std::vector<float>& shared = plan.shared[seg.request][f];
      if (!shared.empty()) {
        for (int64_t i = 0; i < seg.count; ++i) {
          std::memcpy(dst + i * fw, shared.data(), t.dim * sizeof(float));
        }
        continue;
      }
      kernels::PoolBags bags{
          in.ids.data(), plan.offsets[seg.request][f].data() + seg.first_candidate,
          in.weights.empty() ? nullptr : in.weights.data(), seg.count};
      (*unresolved)[table] += kernels::PoolEmbeddings(view, bags, dst, fw);
    }
  }
}

// 3. Interaction: the top MLP's input and its row stride.
const float* CpuEngine::Interact(const BatchPlan& plan, int64_t rows, Scratch* s,
                                 int64_t* stride) const {
  const Model& m = *model_;
  const float* feats = s->feats.data();
  switch (m.interaction) {
    case rankd::v1::DOT:
      kernels::DotInteraction(feats, rows, 1 + static_cast<int>(m.features.size()),
                              m.dense_out_width(), m.self_interaction, s->top_in.data(),
                              m.interaction_width);
      *stride = m.interaction_width;
      return s->top_in.data();
    case rankd::v1::DCN_V2: {
      const float* x = feats;
      for (size_t l = 0; l < m.cross.size(); ++l) {
        float* next = (l % 2 == 0) ? s->top_in.data() : s->ping.data();
        kernels::CrossLayerForward(m.cross[l].view(), feats, x, rows, s->cross_tmp.data(), next);
        x = next;
      }
      *stride = plan.feat_width;
      return x;
    }
    default:  // CAT: feats already is [x, e_0, ..]
      *stride = plan.feat_width;
      return feats;
  }
}

// 4. Top MLP, sigmoid after the last (1-wide) layer; scores to the requests.
void CpuEngine::RunTopMlp(const BatchPlan& plan, absl::Span<const RowSegment> segments,
                          int64_t rows, const float* top_in, int64_t top_stride, Scratch* s) const {
  const Model& m = *model_;
  const float* in = top_in;
  int64_t in_stride = top_stride;
  for (size_t l = 0; l < m.top.size(); ++l) {
    const bool last = l + 1 == m.top.size();
    float* out = (in == s->pong.data()) ? s->ping.data() : s->pong.data();
    kernels::LinearForward(m.top[l].view(), in, in_stride, rows,
                           last ? Activation::kSigmoid : Activation::kRelu, out,
                           m.top[l].out);
    in = out;
    in_stride = m.top[l].out;
  }
  for (const RowSegment& seg : segments) {
    float* dst = plan.scores[seg.request].data() + seg.first_candidate;
    for (int64_t i = 0; i < seg.count; ++i) dst[i] = in[(seg.local_row + i) * in_stride];
  }
}

}  // namespace rankd::engine
