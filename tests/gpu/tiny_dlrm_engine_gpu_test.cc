// The fused tiny-DLRM kernel (kernels/cuda/tiny_dlrm.h, through the host
// packing of engine/cuda/testing/tiny_dlrm_host.h) against the CPU engine, the
// project's reference, on MakeRandomModel models: mini-like shapes with 3, 8
// and 16 tables, fp32 / fp16 / bf16 rows, SUM / MEAN / MAX, weighted bags,
// DYNAMIC tables, unresolved ids with default vectors, request-level (shared)
// bags, self interaction, several requests per batch. Inputs are never zero;
// scores are poisoned before every launch and all of them checked:
// |p_gpu - p_cpu| <= 1e-6, or the logit within 1e-5 relative. Needs a GPU.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "engine/batch_stats.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/cuda/testing/tiny_dlrm_host.h"
#include "engine/model/model.h"
#include "engine/request.h"
#include "engine/testing/test_models.h"
#include "gtest/gtest.h"
#include "kernels/cuda/gpu_test_util.h"
#include "kernels/cuda/tiny_dlrm.h"

namespace rankd {
namespace {

using engine::testing::MakeRandomModel;
using engine::testing::MakeRandomRequest;
using engine::testing::OwnedRequest;
using engine::testing::RandomModelSpec;
using engine::testing::RandomRequestSpec;

struct Case {
  std::string name;
  RandomModelSpec model;
  RandomRequestSpec request;
  std::vector<int32_t> candidates = {1, 33, 2048};  // one request each, then all together
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<int64_t> SweepRows(int n) {
  const int64_t rows[] = {10, 20, 30, 40, 60, 80, 100, 120, 160, 200, 240, 320, 400, 500, 640, 800};
  return std::vector<int64_t>(rows, rows + n);
}

RandomModelSpec Mini(int tables) {
  RandomModelSpec s;
  s.num_dense = 13;
  s.dim = 4;
  s.table_rows = SweepRows(tables);
  s.bottom = {8};  // 13-8-4
  s.top = {8};     // (4 + pairs)-8-1
  return s;
}

class TinyDlrmEngineTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    int count = 0;
    ASSERT_CUDA(cudaGetDeviceCount(&count)) << "no CUDA device: this test needs a GPU";
    ASSERT_GT(count, 0);
    ASSERT_CUDA(cudaStreamCreate(&stream_));
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  cudaStream_t stream_ = nullptr;
};

TEST_P(TinyDlrmEngineTest, MatchesCpuEngine) {
  const Case& c = GetParam();
  std::shared_ptr<const engine::Model> model = MakeRandomModel(c.model);
  auto dm = engine::cuda::testing::TinyDlrmDeviceModel::Create(model);
  ASSERT_TRUE(dm.ok()) << dm.status();
  engine::CpuEngine::Options options;
  options.num_threads = 2;
  auto cpu = engine::CpuEngine::Create(model, options);
  ASSERT_TRUE(cpu.ok()) << cpu.status();

  // Batches: each request size alone, then all of them in one batch.
  std::vector<OwnedRequest> owned;
  for (size_t i = 0; i < c.candidates.size(); ++i) {
    RandomRequestSpec spec = c.request;
    spec.num_candidates = c.candidates[i];
    spec.seed = c.request.seed * 100 + i;
    owned.push_back(MakeRandomRequest(*model, spec));
  }
  std::vector<engine::Request> views;
  for (const OwnedRequest& o : owned) views.push_back(o.view());
  std::vector<std::vector<const engine::Request*>> batches;
  for (const engine::Request& v : views) batches.push_back({&v});
  batches.emplace_back();
  for (const engine::Request& v : views) batches.back().push_back(&v);

  for (const auto& batch : batches) {
    int64_t rows = 0;
    std::vector<std::vector<float>> want(batch.size());
    std::vector<absl::Span<float>> spans;
    for (size_t r = 0; r < batch.size(); ++r) {
      want[r].resize(batch[r]->num_candidates);
      spans.push_back(absl::MakeSpan(want[r]));
      rows += batch[r]->num_candidates;
    }
    SCOPED_TRACE("batch of " + std::to_string(batch.size()) + " requests, " +
                 std::to_string(rows) + " candidates");
    engine::BatchStats stats;
    ASSERT_TRUE((*cpu)->ScoreBatch(batch, spans, &stats).ok());

    auto dev = engine::cuda::testing::TinyDlrmDeviceBatch::Create(**dm, batch);
    ASSERT_TRUE(dev.ok()) << dev.status();
    ASSERT_TRUE((*dev)->Reset(stream_).ok());
    const absl::Status launched = (*dev)->Launch(stream_);
    ASSERT_TRUE(launched.ok()) << launched;
    auto got = (*dev)->Scores(stream_);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(static_cast<int64_t>(got->size()), rows);

    int64_t i = 0, bad = 0;
    double max_err = 0;
    for (size_t r = 0; r < batch.size(); ++r) {
      for (float p : want[r]) {
        const float g = (*got)[i];
        const double err = std::fabs(static_cast<double>(g) - p);
        const double z = std::log(static_cast<double>(p) / (1.0 - p));
        const bool ok = err <= 1e-6 || err <= 1e-5 * std::fabs(z) * p * (1.0 - p);
        if (std::isfinite(err)) max_err = std::max(max_err, err);
        if (!ok && bad++ < 10) {
          ADD_FAILURE() << "request " << r << " candidate " << i << ": gpu " << g << " cpu " << p;
        }
        ++i;
      }
    }
    EXPECT_EQ(bad, 0);
    std::printf("[ %s, %ld candidates ] max |p_gpu - p_cpu| = %.3g\n", c.name.c_str(),
                static_cast<long>(rows), max_err);
    // Unresolved ids: the CPU engine pools a shared bag once per request, the
    // kernel once per candidate (expanded), so compare without shared bags.
    const bool shared = c.request.share_all_bags || !c.model.request_level_features.empty();
    if (!shared) {
      auto unresolved = (*dev)->UnresolvedPerTable(stream_);
      ASSERT_TRUE(unresolved.ok()) << unresolved.status();
      EXPECT_EQ(*unresolved, stats.unresolved_ids_per_table);
    }
  }
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  {
    Case c;
    c.name = "mini";
    c.model = Mini(3);
    c.request.max_bag = 1;  // preset: one id per bag (lengths 0 or 1 here)
    c.candidates = {1, 256, 1024, 2048, 4096};
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "mini_bags0to3_weighted";
    c.model = Mini(3);
    c.request.max_bag = 3;
    c.request.weighted = true;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "sweep8_fp16_mean";
    c.model = Mini(8);
    c.model.row_type = kernels::RowType::kFp16;
    c.model.pooling = kernels::Pooling::kMean;
    c.request.max_bag = 3;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "sweep16_bf16_max";
    c.model = Mini(16);
    c.model.row_type = kernels::RowType::kBf16;
    c.model.pooling = kernels::Pooling::kMax;
    c.request.max_bag = 3;
    c.request.weighted = true;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "sweep16_dynamic_unresolved_default";
    c.model = Mini(16);
    c.model.dynamic_tables = {0, 7, 15};
    c.model.id_policy = rankd::v1::ZERO;
    c.model.default_vector = true;
    c.request.max_bag = 3;
    c.request.unresolved_fraction = 0.1;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "mini_request_level_feature";
    c.model = Mini(3);
    c.model.request_level_features = {1};
    c.request.max_bag = 3;
    c.candidates = {1, 40, 700};
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "sweep8_all_shared_bags_fp16";
    c.model = Mini(8);
    c.model.row_type = kernels::RowType::kFp16;
    c.request.share_all_bags = true;
    c.request.max_bag = 3;
    c.candidates = {5, 64, 300};
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "mini_self_interaction";
    c.model = Mini(3);
    c.model.self_interaction = true;
    c.request.max_bag = 2;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "dim16_wider_mlps";
    c.model = Mini(8);
    c.model.dim = 16;
    c.model.bottom = {64, 32};
    c.model.top = {64, 16};
    c.model.dynamic_tables = {2};
    c.request.max_bag = 3;
    cases.push_back(c);
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Models, TinyDlrmEngineTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

TEST(TinyDlrmShapeOfTest, RejectsWhatTheKernelCannotRun) {
  RandomModelSpec dcn = Mini(3);
  dcn.interaction = rankd::v1::DCN_V2;
  EXPECT_FALSE(engine::cuda::testing::TinyDlrmShapeOf(*MakeRandomModel(dcn)).ok());
  RandomModelSpec wide = Mini(3);
  wide.top = {128};
  EXPECT_FALSE(engine::cuda::testing::TinyDlrmShapeOf(*MakeRandomModel(wide)).ok());
  auto mini = engine::cuda::testing::TinyDlrmShapeOf(*MakeRandomModel(Mini(3)));
  ASSERT_TRUE(mini.ok()) << mini.status();
  EXPECT_EQ(mini->interaction_width(), 10);
}

}  // namespace
}  // namespace rankd
