// The CUDA worker's batch path against the CPU engine: batches of several
// slices (slice k + 1 packed into the second arena while the GPU runs slice
// k, slices cutting through requests), packing split over the pool or not,
// arenas that grow between batches. Every score must match the CPU engine
// and the one-slice, single-threaded worker; the output is poisoned with NaN
// before each batch. The two workers also differ in where the lookup runs
// (beside the bottom MLP or after it), a third worker packs and copies
// each batch's dense rows first and starts the bottom MLP before the rest,
// and a fourth copies the bags and ids on a second stream beside the
// bottom MLP (its scores equal the third's bit for bit: same kernels).
// Needs a CUDA device (tags "manual", "gpu"); skips without.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "engine/cpu/cpu_engine.h"
#include "engine/cuda/cuda_worker.h"
#include "engine/cuda/cuda_worker_probe.h"
#include "engine/serving/warmup.h"
#include "engine/testing/test_models.h"
#include "gtest/gtest.h"

namespace rankd::engine::cuda {
namespace {

using testing::MakeRandomModel;
using testing::MakeRandomRequest;
using testing::OwnedRequest;

struct Batch {
  std::vector<OwnedRequest> owned;
  std::vector<Request> views;
  std::vector<const Request*> requests;
};

// Requests of 1..max_candidates candidates, some weighted, some with every
// bag shared, bags of up to max_bag ids.
Batch MakeBatch(const Model& m, int num_requests, int max_candidates, int max_bag,
                uint64_t seed) {
  Batch b;
  for (int i = 0; i < num_requests; ++i) {
    testing::RandomRequestSpec rs;
    rs.num_candidates = 1 + static_cast<int32_t>((seed * 7919 + i * 104729) % max_candidates);
    rs.max_bag = max_bag;
    rs.weighted = i % 3 == 1;
    rs.share_all_bags = i % 5 == 4;
    rs.seed = seed * 1000 + i;
    b.owned.push_back(MakeRandomRequest(m, rs));
  }
  for (auto& o : b.owned) b.views.push_back(o.view());
  for (auto& v : b.views) b.requests.push_back(&v);
  return b;
}

// Scores of `batch` from `worker`, NaN-poisoned first.
std::vector<std::vector<float>> ScoreOn(CudaWorker& worker, const Batch& batch) {
  std::vector<std::vector<float>> out;
  std::vector<absl::Span<float>> spans;
  for (const Request* r : batch.requests) out.emplace_back(r->num_candidates, std::nanf(""));
  for (auto& o : out) spans.push_back(absl::MakeSpan(o));
  absl::Status s = worker.Execute(batch.requests, spans, nullptr);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

TEST(CudaWorkerGpuTest, SlicedAndParallelBatchesMatchTheCpuEngine) {
  if (UsableCudaDevices() == 0) GTEST_SKIP() << "no usable CUDA device";
  testing::RandomModelSpec spec;
  spec.table_rows = {50, 70, 90, 30};
  spec.request_level_features = {3};
  spec.dim = 8;
  spec.bottom = {16};
  spec.top = {12};
  auto model = MakeRandomModel(spec);
  auto cpu = CpuEngine::Create(model, CpuEngine::Options());
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  DeviceModel::Options dmo;
  auto dm = DeviceModel::Create(model, dmo);
  ASSERT_TRUE(dm.ok()) << dm.status();

  CudaWorker::Options whole;  // one slice per batch, packed alone
  whole.max_rows = 4096;
  whole.pack_threads = 0;
  whole.allow_fused_tiny = false;
  // The lookup beside the bottom MLP at every size (cuBLASLt layers too).
  whole.lookup_beside_mlp_max_rows = 4096;
  CudaWorker::Options sliced = whole;  // 48-row slices, packed on 3 pool threads
  sliced.max_rows = 48;
  sliced.pack_threads = 3;
  sliced.parallel_pack_min_rows = 1;
  sliced.lookup_beside_mlp_max_rows = 0;  // never beside, even the 16-row bucket
  // Dense rows first at every size: the bottom MLP starts before the bags
  // and ids are packed.
  CudaWorker::Options dense_first = whole;
  dense_first.lookup_beside_mlp_max_rows = 0;
  dense_first.dense_first_min_rows = 1;
  dense_first.dense_first_max_rows = 4096;
  dense_first.pack_threads = 2;
  dense_first.parallel_pack_min_rows = 1;
  // The bags and ids copied beside the bottom MLP at every size.
  CudaWorker::Options copy_beside = whole;
  copy_beside.lookup_beside_mlp_max_rows = 0;
  copy_beside.dense_first_min_rows = 0;
  copy_beside.copy_beside_mlp_min_rows = 1;
  auto one = CudaWorker::Create(*dm, whole, "whole");
  auto many = CudaWorker::Create(*dm, sliced, "sliced");
  auto first = CudaWorker::Create(*dm, dense_first, "dense first");
  auto beside = CudaWorker::Create(*dm, copy_beside, "copy beside");
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(many.ok()) << many.status();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(beside.ok()) << beside.status();

  // Growing bags between batches make the arenas grow (graphs dropped).
  const int max_bags[] = {2, 2, 9, 3, 30};
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE(::testing::Message() << "round " << round);
    const Batch batch = MakeBatch(*model, 2 + round * 3, 70, max_bags[round], 11 + round);
    const auto a = ScoreOn(**one, batch);
    const auto b = ScoreOn(**many, batch);
    const auto d = ScoreOn(**first, batch);
    const auto e = ScoreOn(**beside, batch);
    for (size_t r = 0; r < batch.requests.size(); ++r) {
      auto want = (*cpu)->Score(*batch.requests[r]);
      ASSERT_TRUE(want.ok()) << want.status();
      for (size_t c = 0; c < want->size(); ++c) {
        const float ref = (*want)[c];
        const float tol = 1e-5f * std::max(1.0f, std::abs(ref));
        ASSERT_NEAR(a[r][c], ref, tol) << "one slice: request " << r << " candidate " << c;
        ASSERT_NEAR(b[r][c], ref, tol) << "sliced: request " << r << " candidate " << c;
        ASSERT_NEAR(d[r][c], ref, tol) << "dense first: request " << r << " candidate " << c;
        // The same kernels as the whole-slice worker's, fed by other copies.
        ASSERT_EQ(e[r][c], d[r][c]) << "copy beside: request " << r << " candidate " << c;
        // The two workers agree within the same bound (cuBLASLt may pick
        // another kernel for another row count).
        ASSERT_NEAR(a[r][c], b[r][c], tol) << "request " << r << " candidate " << c;
      }
    }
    const auto& h = CudaWorkerProbe(many->get()).last_host_path();
    int64_t candidates = 0;
    for (const Request* q : batch.requests) candidates += q->num_candidates;
    EXPECT_EQ(h.slices, (candidates + 47) / 48);
    EXPECT_EQ(h.pack_tasks_parallel, h.slices);
  }
}

// The compact layout (Options::compact_ids: int32 bag offsets, int32 ids but
// for the DYNAMIC table's 64-bit keys) gives the scores of the int64 layout
// bit for bit, ids no int32 holds included (static tables: they name no row
// either way), and the CPU engine's.
TEST(CudaWorkerGpuTest, CompactIdsGiveTheScoresOfWideIds) {
  if (UsableCudaDevices() == 0) GTEST_SKIP() << "no usable CUDA device";
  testing::RandomModelSpec spec;
  spec.table_rows = {50, 70, 90, 30};
  spec.request_level_features = {2};
  spec.dim = 8;
  spec.bottom = {16};
  spec.top = {12};
  spec.id_policy = rankd::v1::ZERO;  // unresolved ids pool the default vector
  spec.default_vector = true;
  spec.dynamic_tables = {1};  // its features keep their int64 keys
  auto model = MakeRandomModel(spec);
  auto cpu = CpuEngine::Create(model, CpuEngine::Options());
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  auto dm = DeviceModel::Create(model, DeviceModel::Options());
  ASSERT_TRUE(dm.ok()) << dm.status();
  CudaWorker::Options wide;
  wide.allow_fused_tiny = false;
  wide.pack_threads = 0;
  wide.compact_ids = false;
  CudaWorker::Options compact = wide;
  compact.compact_ids = true;
  auto a = CudaWorker::Create(*dm, wide, "wide");
  auto b = CudaWorker::Create(*dm, compact, "compact");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  const int64_t odd[] = {-5, int64_t{1} << 40, int64_t{INT32_MAX} + 1, INT32_MAX, 49};
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE(::testing::Message() << "round " << round);
    Batch batch = MakeBatch(*model, 2 + round * 3, 90, 5, 41 + round);
    int k = 0;
    for (auto& o : batch.owned) {
      for (auto& ids : o.ids) {
        for (size_t j = 0; j < ids.size(); j += 4) ids[j] = odd[k++ % 5];
      }
    }
    const auto want = ScoreOn(**a, batch);
    const auto got = ScoreOn(**b, batch);
    for (size_t r = 0; r < batch.requests.size(); ++r) {
      auto ref = (*cpu)->Score(*batch.requests[r]);
      ASSERT_TRUE(ref.ok()) << ref.status();
      for (size_t c = 0; c < want[r].size(); ++c) {
        ASSERT_NEAR(want[r][c], (*ref)[c], 1e-5f * std::max(1.0f, std::abs((*ref)[c])))
            << "request " << r << " candidate " << c;
        ASSERT_EQ(got[r][c], want[r][c]) << "request " << r << " candidate " << c;
      }
    }
  }
}

// Unit bags (Options::unit_bags_min_rows): batches whose features send one
// id per bag are packed as ids only and their bag entries written on the
// GPU; the scores equal explicit packing's bit for bit and the CPU engine's,
// with every feature unit (no bag entries copied), one shared feature
// (explicit) among unit ones, and longer bags (no unit feature), in both id
// layouts and at sizes across several buckets, graphs replayed. Every table
// of the first two models qualifies for the unit-bag kernel (no expansion);
// the third has a DYNAMIC table (its unit feature expanded, the others in
// the unit-bag kernel); the fourth has bf16 rows and MAX pooling.
TEST(CudaWorkerGpuTest, UnitBagsGiveTheScoresOfExplicitBags) {
  if (UsableCudaDevices() == 0) GTEST_SKIP() << "no usable CUDA device";
  for (int variant = 0; variant < 4; ++variant) {
    testing::RandomModelSpec spec;
    spec.table_rows = {50, 70, 90, 30};
    const int shared = variant == 1 ? 1 : -1;
    if (shared >= 0) spec.request_level_features = {shared};
    if (variant == 2) spec.dynamic_tables = {2};
    if (variant == 3) {
      spec.row_type = kernels::RowType::kBf16;
      spec.pooling = kernels::Pooling::kMax;
    }
    spec.dim = 8;
    spec.bottom = {16};
    spec.top = {12};
    auto model = MakeRandomModel(spec);
    auto cpu = CpuEngine::Create(model, CpuEngine::Options());
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    auto dm = DeviceModel::Create(model, DeviceModel::Options());
    ASSERT_TRUE(dm.ok()) << dm.status();
    for (bool compact : {false, true}) {
      CudaWorker::Options explicit_bags;
      explicit_bags.allow_fused_tiny = false;
      explicit_bags.pack_threads = 0;
      explicit_bags.compact_ids = compact;
      explicit_bags.unit_bags_min_rows = 0;
      CudaWorker::Options unit = explicit_bags;
      unit.unit_bags_min_rows = 1;
      auto a = CudaWorker::Create(*dm, explicit_bags, "explicit");
      auto b = CudaWorker::Create(*dm, unit, "unit");
      ASSERT_TRUE(a.ok()) << a.status();
      ASSERT_TRUE(b.ok()) << b.status();
      for (int round = 0; round < 8; ++round) {
        SCOPED_TRACE(::testing::Message() << "variant " << variant << " compact " << compact
                                          << " round " << round);
        Batch batch;
        for (int i = 0; i < 1 + round % 3; ++i) {
          testing::RandomRequestSpec rs;
          rs.num_candidates = 1 + (round * 389 + i * 97) % 600;
          rs.min_bag = 1;
          rs.max_bag = round == 7 && i == 0 ? 3 : 1;
          rs.weighted = round % 4 == 1;
          rs.seed = 300 + round * 7 + i;
          batch.owned.push_back(MakeRandomRequest(*model, rs));
        }
        for (auto& o : batch.owned) batch.views.push_back(o.view());
        for (auto& v : batch.views) batch.requests.push_back(&v);
        // Twice: the second replays the graphs captured by the first.
        for (int pass = 0; pass < 2; ++pass) {
          const auto want = ScoreOn(**a, batch);
          const auto got = ScoreOn(**b, batch);
          for (size_t r = 0; r < batch.requests.size(); ++r) {
            auto ref = (*cpu)->Score(*batch.requests[r]);
            ASSERT_TRUE(ref.ok()) << ref.status();
            for (size_t c = 0; c < want[r].size(); ++c) {
              ASSERT_NEAR(got[r][c], (*ref)[c], 1e-5f * std::max(1.0f, std::abs((*ref)[c])))
                  << "request " << r << " candidate " << c;
              ASSERT_EQ(got[r][c], want[r][c]) << "request " << r << " candidate " << c;
            }
          }
        }
      }
    }
  }
}

// DCN cross layers on tensor cores with split precision (3xTF32, bf16x3):
// with the MLPs in fp32, the scores stay within the fp32 bound of the CPU
// engine; single-pass TF32 is what the split avoids (reported, not bounded).
TEST(CudaWorkerGpuTest, SplitTf32CrossLayersMatchTheCpuEngineLikeFp32) {
  if (UsableCudaDevices() == 0) GTEST_SKIP() << "no usable CUDA device";
  testing::RandomModelSpec spec;
  spec.interaction = rankd::v1::DCN_V2;
  spec.table_rows = {300, 200, 500, 100, 250, 150, 350};
  spec.dim = 33;  // n = 33 * 8 = 264 (3n = 792), rank 13 (3 rank = 39: padded to 40)
  spec.dcn_layers = 3;
  spec.dcn_rank = 13;
  spec.bottom = {32};
  spec.top = {24};
  auto model = MakeRandomModel(spec);
  auto cpu = CpuEngine::Create(model, CpuEngine::Options());
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  const Batch batch = MakeBatch(*model, 6, 200, 6, 3);
  double worst[4] = {0, 0, 0, 0};
  const CudaWorker::CrossMath modes[] = {
      CudaWorker::CrossMath::kFp32, CudaWorker::CrossMath::kTf32x3,
      CudaWorker::CrossMath::kTf32, CudaWorker::CrossMath::kBf16x3};
  for (int k = 0; k < 4; ++k) {
    CudaWorker::Options split_for;
    split_for.cross_math = modes[k];
    DeviceModel::Options dmo;
    dmo.cross_split = CrossSplitFor(split_for);
    auto dm = DeviceModel::Create(model, dmo);
    ASSERT_TRUE(dm.ok()) << dm.status();
    CudaWorker::Options wo;
    wo.cross_math = modes[k];
    wo.max_rows = 256;
    auto worker = CudaWorker::Create(*dm, wo, "cross");
    ASSERT_TRUE(worker.ok()) << worker.status();
    const auto got = ScoreOn(**worker, batch);
    for (size_t r = 0; r < batch.requests.size(); ++r) {
      auto want = (*cpu)->Score(*batch.requests[r]);
      ASSERT_TRUE(want.ok()) << want.status();
      for (size_t c = 0; c < want->size(); ++c) {
        ASSERT_FALSE(std::isnan(got[r][c])) << "mode " << k << " request " << r << " candidate " << c;
        const double err = std::abs(double{got[r][c]} - (*want)[c]) /
                           std::max(1e-30, std::abs(double{(*want)[c]}));
        worst[k] = std::max(worst[k], err);
      }
    }
  }
  EXPECT_LT(worst[0], 1e-5) << "fp32";
  EXPECT_LT(worst[1], 1e-5) << "tf32x3";
  EXPECT_LT(worst[3], 1e-5) << "bf16x3";
  std::printf("max rel. error vs the CPU engine: fp32 %.2e, tf32x3 %.2e, bf16x3 %.2e, tf32 %.2e\n",
              worst[0], worst[1], worst[3], worst[2]);

  // A worker asked for a split mode on a DeviceModel without (or with the
  // other) split weights is refused.
  auto plain = DeviceModel::Create(model, DeviceModel::Options());
  ASSERT_TRUE(plain.ok()) << plain.status();
  DeviceModel::Options tf32_split;
  tf32_split.cross_split = DeviceModel::CrossSplit::kTf32x3;
  auto other = DeviceModel::Create(model, tf32_split);
  ASSERT_TRUE(other.ok()) << other.status();
  for (const auto& [dm, mode] :
       {std::pair{*plain, CudaWorker::CrossMath::kTf32x3},
        std::pair{*plain, CudaWorker::CrossMath::kBf16x3},
        std::pair{*other, CudaWorker::CrossMath::kBf16x3}}) {
    CudaWorker::Options wo;
    wo.cross_math = mode;
    auto refused = CudaWorker::Create(dm, wo, "refused");
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  }
}

// The warm-up tests' model: three small static tables, fp32 rows of whole
// 16-byte chunks (so unit bags use the unit-bag kernel).
std::shared_ptr<Model> WarmUpModel() {
  testing::RandomModelSpec spec;
  spec.table_rows = {50, 70, 90};
  spec.dim = 8;
  spec.bottom = {16};
  spec.top = {12};
  return MakeRandomModel(spec);
}

// A worker that packs and copies the dense rows first at every size when
// alone on the GPU (the one-pass path when another batch is in flight).
CudaWorker::Options DenseFirstAtEverySize() {
  CudaWorker::Options o;
  o.allow_fused_tiny = false;
  o.pack_threads = 0;
  o.lookup_beside_mlp_max_rows = 0;
  o.dense_first_min_rows = 1;
  return o;
}

// A batch that finds another of its model in flight skips the dense-rows-first
// path for the one-pass one, whose graph is another. After Execute alone, the
// first such batch captures a graph (the cost WarmUp takes out of serving);
// after WarmUp it replays one, with the CPU engine's scores.
// The warm-up model on the GPU, one request of 40 candidates, and the CPU
// engine's scores for it: a batch alone or beside another (busy_workers).
class BusyGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (UsableCudaDevices() == 0) GTEST_SKIP() << "no usable CUDA device";
    model_ = WarmUpModel();
    auto cpu = CpuEngine::Create(model_, CpuEngine::Options());
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    auto dm = DeviceModel::Create(model_, DeviceModel::Options());
    ASSERT_TRUE(dm.ok()) << dm.status();
    dm_ = *std::move(dm);
    batch_ = MakeBatch(*model_, 1, 40, 3, 5);
    auto want = (*cpu)->Score(*batch_.requests[0]);
    ASSERT_TRUE(want.ok()) << want.status();
    want_ = *std::move(want);
  }
  // Within 1e-5 of the CPU engine's scores.
  void ExpectCpuScores(const std::vector<float>& got) const {
    ASSERT_EQ(got.size(), want_.size());
    for (size_t c = 0; c < want_.size(); ++c) {
      ASSERT_NEAR(got[c], want_[c], 1e-5f * std::max(1.0f, std::abs(want_[c]))) << c;
    }
  }

  std::shared_ptr<Model> model_;
  std::shared_ptr<const DeviceModel> dm_;
  Batch batch_;
  std::vector<float> want_;
};

TEST_F(BusyGpuTest, WarmUpCapturesTheGraphsOfABusyGpu) {
  const CudaWorker::Options options = DenseFirstAtEverySize();
  std::atomic<int>& busy = dm_->busy_workers();
  auto plain = CudaWorker::Create(dm_, options, "plain");
  auto warmed = CudaWorker::Create(dm_, options, "warmed");
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(warmed.ok()) << warmed.status();
  ScoreOn(**plain, batch_);
  std::vector<float> out(batch_.requests[0]->num_candidates, std::nanf(""));
  const absl::Span<float> spans[] = {absl::MakeSpan(out)};
  absl::Status s = (*warmed)->WarmUp(batch_.requests, spans);
  ASSERT_TRUE(s.ok()) << s;
  ExpectCpuScores(out);
  const int plain_graphs = CudaWorkerProbe(plain->get()).graphs_captured();
  const int warmed_graphs = CudaWorkerProbe(warmed->get()).graphs_captured();
  EXPECT_GT(warmed_graphs, plain_graphs);

  busy.fetch_add(1);  // another worker's batch in flight
  const auto busy_plain = ScoreOn(**plain, batch_);
  const auto busy_warmed = ScoreOn(**warmed, batch_);
  busy.fetch_sub(1);
  EXPECT_GT(CudaWorkerProbe(plain->get()).graphs_captured(), plain_graphs)
      << "the busy path should need a graph of its own";
  EXPECT_EQ(CudaWorkerProbe(warmed->get()).graphs_captured(), warmed_graphs)
      << "WarmUp should have captured the busy path's graph";
  ExpectCpuScores(busy_plain[0]);
  EXPECT_EQ(busy_warmed[0], busy_plain[0]);
}

// Copies beside the bottom MLP do not depend on whether other batches of the
// model are in flight: a batch beside another replays the graphs the batch
// alone captured, with the same scores bit for bit.
TEST_F(BusyGpuTest, CopyBesideTakesOnePathBusyOrNot) {
  CudaWorker::Options options = DenseFirstAtEverySize();
  options.dense_first_min_rows = 0;
  options.copy_beside_mlp_min_rows = 1;
  auto worker = CudaWorker::Create(dm_, options, "beside");
  ASSERT_TRUE(worker.ok()) << worker.status();
  const auto alone = ScoreOn(**worker, batch_);
  const int graphs = CudaWorkerProbe(worker->get()).graphs_captured();
  std::atomic<int>& busy = dm_->busy_workers();
  busy.fetch_add(1);  // another worker's batch in flight
  const auto beside_another = ScoreOn(**worker, batch_);
  busy.fetch_sub(1);
  EXPECT_EQ(CudaWorkerProbe(worker->get()).graphs_captured(), graphs)
      << "a busy GPU should not change the copy-beside path";
  ExpectCpuScores(alone[0]);
  EXPECT_EQ(beside_another[0], alone[0]);
}

// The server's warm-up (WarmUpWorkers) leaves no graph to capture for a
// served batch of a warmed size: one-hot or multi-hot (graphs are keyed by
// whether every bag holds one id), alone on the GPU or beside another batch.
TEST(CudaWorkerGpuTest, WarmUpWorkersLeavesNoGraphToCaptureWhenServing) {
  if (UsableCudaDevices() == 0) GTEST_SKIP() << "no usable CUDA device";
  auto model = WarmUpModel();
  auto dm = DeviceModel::Create(model, DeviceModel::Options());
  ASSERT_TRUE(dm.ok()) << dm.status();
  CudaWorker::Options options = DenseFirstAtEverySize();
  options.unit_bags_min_rows = 1;  // unit and other bags in separate graphs
  auto worker = CudaWorker::Create(*dm, options, "warmed");
  ASSERT_TRUE(worker.ok()) << worker.status();
  std::vector<std::unique_ptr<Worker>> workers;
  workers.push_back(std::move(*worker));
  ASSERT_TRUE(WarmUpWorkers(*model, workers, {64}).ok());
  auto& w = static_cast<CudaWorker&>(*workers[0]);
  const int warmed = CudaWorkerProbe(&w).graphs_captured();

  testing::RandomRequestSpec one_hot;
  one_hot.num_candidates = 50;
  one_hot.min_bag = 1;
  one_hot.max_bag = 1;
  one_hot.seed = 3;
  testing::RandomRequestSpec multi_hot = one_hot;
  multi_hot.min_bag = 0;
  multi_hot.max_bag = 4;
  std::atomic<int>& busy = (*dm)->busy_workers();
  for (const auto& rs : {one_hot, multi_hot}) {
    SCOPED_TRACE(::testing::Message() << "max_bag " << rs.max_bag);
    Batch batch;
    batch.owned.push_back(MakeRandomRequest(*model, rs));
    batch.views.push_back(batch.owned[0].view());
    batch.requests.push_back(&batch.views[0]);
    ScoreOn(w, batch);
    busy.fetch_add(1);
    ScoreOn(w, batch);
    busy.fetch_sub(1);
    EXPECT_EQ(CudaWorkerProbe(&w).graphs_captured(), warmed);
  }
}

}  // namespace
}  // namespace rankd::engine::cuda
