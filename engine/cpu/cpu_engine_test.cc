#include "engine/cpu/cpu_engine.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/testing/reference_forward.h"
#include "engine/testing/test_models.h"
#include "gtest/gtest.h"
#include "kernels/cpu/thread_limit.h"
#include "kernels/cpu/thread_priority.h"

namespace rankd::engine {
namespace {

using testing::MakeRandomModel;
using testing::MakeRandomRequest;
using testing::OwnedRequest;
using testing::RandomModelSpec;
using testing::RandomRequestSpec;

std::unique_ptr<CpuEngine> MakeEngine(std::shared_ptr<const Model> model,
                                      int threads = 2, int rows_per_task = 256) {
  CpuEngine::Options options;
  options.num_threads = threads;
  options.max_rows_per_task = rows_per_task;
  auto engine = CpuEngine::Create(std::move(model), options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return std::move(engine).value();
}

// A model small enough to score by hand: dense 2, dim 2, two 3-row tables,
// bottom MLP = identity + ReLU, DOT, top MLP 5 -> 1.
std::shared_ptr<Model> GoldenModel() {
  RandomModelSpec spec;
  spec.num_dense = 2;
  spec.dim = 2;
  spec.table_rows = {3, 3};
  spec.bottom = {};
  spec.top = {};
  auto m = MakeRandomModel(spec);
  m->bottom[0].weight = {1, 0, 0, 1};
  m->bottom[0].bias = {0, 0};
  const float t0[] = {1, 0, 0, 1, 1, 1};
  const float t1[] = {2, 0, 0, 2, 1, -1};
  for (int t = 0; t < 2; ++t) {
    auto rows = std::make_shared<std::vector<float>>(t == 0 ? std::vector<float>(t0, t0 + 6)
                                                            : std::vector<float>(t1, t1 + 6));
    m->tables[t].rows = ByteBuffer{reinterpret_cast<const uint8_t*>(rows->data()), 24, rows};
  }
  EXPECT_EQ(m->interaction_width, 5);
  m->top[0].weight = {0.1f, -0.1f, 0.05f, -0.05f, 0.1f};
  m->top[0].bias = {-0.2f};
  return m;
}

TEST(CpuEngineTest, GoldenModelHandComputed) {
  auto engine = MakeEngine(GoldenModel());
  OwnedRequest r;
  r.num_candidates = 2;
  r.dense = {1, 2, -1, 3};
  r.ids = {{0, 2}, {1, 2, 0}};
  r.lengths = {{2, 0}, {1, 2}};
  r.weights = {{}, {}};
  auto scores = engine->Score(r.view());
  ASSERT_TRUE(scores.ok()) << scores.status();
  // Candidate 0: x = (1,2), e0 = (1,0)+(1,1) = (2,1), e1 = (0,2);
  //   z = [1, 2, e0.x=4, e1.x=4, e1.e0=2]; logit = 0.1-0.2+0.2-0.2+0.2-0.2 = -0.1.
  // Candidate 1: x = relu(-1,3) = (0,3), e0 = (0,0), e1 = (1,-1)+(2,0) = (3,-1);
  //   z = [0, 3, 0, -3, 0]; logit = -0.3+0.15-0.2 = -0.35.
  EXPECT_NEAR((*scores)[0], 0.47502081252106, 1e-7);
  EXPECT_NEAR((*scores)[1], 0.41338242108267, 1e-7);
}

TEST(CpuEngineTest, GoldenModelWeightedMeanPooling) {
  auto model = GoldenModel();
  for (auto& t : model->tables) t.pooling = kernels::Pooling::kMean;
  auto engine = MakeEngine(model);
  OwnedRequest r;
  r.num_candidates = 1;
  r.dense = {1, 2};
  r.ids = {{0, 2}, {1}};
  r.lengths = {{2}, {1}};
  r.weights = {{2.0f, 0.5f}, {3.0f}};
  auto scores = engine->Score(r.view());
  ASSERT_TRUE(scores.ok()) << scores.status();
  // e0 = (2*(1,0) + 0.5*(1,1)) / 2 = (1.25, 0.25); e1 = 3*(0,2) = (0,6).
  // z = [1, 2, e0.x = 1.75, e1.x = 12, e1.e0 = 1.5]
  // logit = 0.1 - 0.2 + 0.0875 - 0.6 + 0.15 - 0.2 = -0.6625
  EXPECT_NEAR((*scores)[0], 1.0 / (1.0 + std::exp(0.6625)), 1e-7);
}

struct Case {
  rankd::v1::InteractionKind interaction;
  kernels::Pooling pooling;
  kernels::RowType row_type;
};

class RandomizedTest : public ::testing::TestWithParam<Case> {};

TEST_P(RandomizedTest, MatchesDoublePrecisionReference) {
  const Case c = GetParam();
  int variant = 0;
  for (bool weighted : {false, true}) {
    for (bool zero_policy : {false, true}) {
      ++variant;
      RandomModelSpec spec;
      spec.interaction = c.interaction;
      spec.pooling = c.pooling;
      spec.row_type = c.row_type;
      spec.num_dense = 7;
      spec.dim = 8;
      spec.table_rows = {5, 40, 17, 23};
      if (c.interaction == rankd::v1::CAT) spec.cat_dims = {3, 8, 5, 16};
      spec.bottom = {24};
      spec.top = {19, 7};
      spec.dynamic_tables = {1};
      spec.request_level_features = {2};
      spec.self_interaction = weighted;  // cover both DOT variants
      spec.id_policy = zero_policy ? rankd::v1::ZERO : rankd::v1::ERROR;
      spec.default_vector = zero_policy;
      spec.seed = 100 + variant;
      auto model = MakeRandomModel(spec);
      auto engine = MakeEngine(model, 2, 32);
      for (int b : {1, 3, 17, 70}) {
        RandomRequestSpec rs;
        rs.num_candidates = b;
        rs.max_bag = 5;
        rs.weighted = weighted;
        rs.unresolved_fraction = zero_policy ? 0.2 : 0.0;
        rs.seed = 1000 * variant + b;
        OwnedRequest r = MakeRandomRequest(*model, rs);
        auto scores = engine->Score(r.view());
        ASSERT_TRUE(scores.ok()) << scores.status();
        auto ref = testing::ReferenceForward(*model, r.view());
        for (int i = 0; i < b; ++i) {
          const double s = (*scores)[i];
          const double logit = std::log(s / (1.0 - s));
          const double want = ref.logits[i];
          EXPECT_NEAR(logit, want, 2e-5 * std::max(1.0, std::abs(want)))
              << "candidate " << i << " of " << b << " variant " << variant;
          EXPECT_NEAR(s, ref.scores[i], 1e-6);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllKinds, RandomizedTest,
    ::testing::ValuesIn([] {
      std::vector<Case> cases;
      for (auto i : {rankd::v1::DOT, rankd::v1::CAT, rankd::v1::DCN_V2}) {
        for (auto p : {kernels::Pooling::kSum, kernels::Pooling::kMean, kernels::Pooling::kMax}) {
          for (auto t : {kernels::RowType::kFp32, kernels::RowType::kFp16, kernels::RowType::kBf16}) {
            cases.push_back({i, p, t});
          }
        }
      }
      return cases;
    }()));

// A candidate's score must not depend on its batch: same bits alone, at any
// offset in a bigger batch, with any thread count or task size.
TEST(CpuEngineTest, ScoresIndependentOfBatchComposition) {
  for (auto kind : {rankd::v1::DOT, rankd::v1::CAT, rankd::v1::DCN_V2}) {
    RandomModelSpec spec;
    spec.interaction = kind;
    spec.num_dense = 13;
    spec.dim = 16;
    spec.table_rows = {50, 60, 70};
    spec.bottom = {64, 32};
    spec.top = {48, 16};
    spec.seed = 7;
    auto model = MakeRandomModel(spec);
    std::vector<OwnedRequest> reqs;
    for (int i = 0; i < 6; ++i) {
      RandomRequestSpec rs;
      rs.num_candidates = 1 + 13 * i;
      rs.seed = 50 + i;
      reqs.push_back(MakeRandomRequest(*model, rs));
    }
    // Alone, one thread.
    auto single = MakeEngine(model, 1, 16);
    std::vector<std::vector<float>> alone;
    for (const auto& r : reqs) {
      auto s = single->Score(r.view());
      ASSERT_TRUE(s.ok());
      alone.push_back(*s);
    }
    for (int threads : {1, 2, 3}) {
      for (int task_rows : {16, 48, 256}) {
        auto engine = MakeEngine(model, threads, task_rows);
        std::vector<Request> views;
        for (const auto& r : reqs) views.push_back(r.view());
        // Reverse order so every request lands at a new offset.
        std::vector<const Request*> ptrs;
        std::vector<std::vector<float>> out;
        for (int i = static_cast<int>(reqs.size()) - 1; i >= 0; --i) {
          ptrs.push_back(&views[i]);
          out.emplace_back(reqs[i].num_candidates, std::nanf(""));
        }
        std::vector<absl::Span<float>> spans;
        for (auto& o : out) spans.push_back(absl::MakeSpan(o));
        ASSERT_TRUE(engine->ScoreBatch(ptrs, spans, nullptr).ok());
        for (size_t k = 0; k < ptrs.size(); ++k) {
          const size_t i = reqs.size() - 1 - k;
          ASSERT_EQ(0, std::memcmp(out[k].data(), alone[i].data(),
                                   alone[i].size() * sizeof(float)))
              << "kind " << kind << " threads " << threads << " task_rows "
              << task_rows << " request " << i;
        }
      }
    }
  }
}

TEST(CpuEngineTest, CountsUnresolvedIdsPerTable) {
  RandomModelSpec spec;
  spec.id_policy = rankd::v1::ZERO;
  spec.dynamic_tables = {0};
  auto model = MakeRandomModel(spec);
  auto engine = MakeEngine(model);
  OwnedRequest r = MakeRandomRequest(*model, {});
  // Replace every id of table 0 (dynamic) and table 2 (static) with misses.
  for (auto& id : r.ids[0]) id = 123456789;  // not a stored key (keys are random)
  for (auto& id : r.ids[2]) id = -1;
  const Request view = r.view();
  const Request* reqs[] = {&view};
  std::vector<float> out(view.num_candidates);
  absl::Span<float> spans[] = {absl::MakeSpan(out)};
  BatchStats stats;
  ASSERT_TRUE(engine->ScoreBatch(reqs, spans, &stats).ok());
  ASSERT_EQ(stats.unresolved_ids_per_table.size(), 3u);
  EXPECT_EQ(stats.unresolved_ids_per_table[0], static_cast<int64_t>(r.ids[0].size()));
  EXPECT_EQ(stats.unresolved_ids_per_table[1], 0);
  EXPECT_EQ(stats.unresolved_ids_per_table[2], static_cast<int64_t>(r.ids[2].size()));
}

TEST(CpuEngineTest, RejectsBadOptions) {
  auto model = GoldenModel();
  CpuEngine::Options o;
  o.num_threads = -1;
  EXPECT_FALSE(CpuEngine::Create(model, o).ok());
  o.num_threads = 1;
  o.max_rows_per_task = 0;
  EXPECT_FALSE(CpuEngine::Create(model, o).ok());
  o.max_rows_per_task = 256;
  for (int nice : {-1, kernels::kMaxNice + 1}) {
    o.thread_nice = nice;
    absl::StatusOr<std::unique_ptr<CpuEngine>> engine = CpuEngine::Create(model, o);
    ASSERT_FALSE(engine.ok());
    EXPECT_NE(engine.status().message().find("thread_nice"), std::string::npos)
        << engine.status();
  }
}

// Compute threads the process cannot start (its task limit reached) fail
// Create with RESOURCE_EXHAUSTED and the reason, the ones started leave and
// are joined, and the process goes on; before, std::thread's exception ended
// it. In a death-test child, which alone takes the limit (32 MiB more address space: a few 8 MiB
// stacks).
TEST(CpuEngineTest, ComputeThreadsThatCannotStartFailCreate) {
  if (kernels::testing::kUnderSanitizer)
    GTEST_SKIP() << "needs an unsanitized fork (thread_limit.h)";
  auto model = GoldenModel();
  EXPECT_EXIT(
      {
        kernels::testing::LimitAddressSpaceInThisChildOrExit(int64_t{32} << 20);
        CpuEngine::Options o;
        o.num_threads = 16;
        absl::StatusOr<std::unique_ptr<CpuEngine>> engine = CpuEngine::Create(model, o);
        std::fprintf(stderr, "%s\n", engine.status().ToString().c_str());
        std::_Exit(absl::IsResourceExhausted(engine.status()) ? 0 : 1);
      },
      ::testing::ExitedWithCode(0),
      "RESOURCE_EXHAUSTED: cannot start [0-9]+ of the CPU engine's 16 compute threads: "
      "Resource temporarily unavailable \\(the process or its cgroup may start no more "
      "threads");
}

// Nice values of this process's threads named `name` (/proc/self/task).
std::vector<int> NiceOfThreadsNamed(const std::string& name) {
  std::vector<int> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string got;
    if (!std::getline(comm, got) || got != name) continue;
    std::ifstream stat_file(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(stat_file)),
                     std::istreambuf_iterator<char>());
    // Fields after the ")" closing comm: state is field 3, nice field 19.
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));
    std::string field;
    for (int i = 3; i <= 19 && (fields >> field); ++i) {
    }
    out.push_back(std::stoi(field));
  }
  return out;
}

TEST(CpuEngineTest, PoolThreadsRunAtTheirNiceIncrement) {
  const int base = kernels::ThisThreadNice();
  CpuEngine::Options o;
  o.num_threads = 3;
  o.thread_nice = 5;
  absl::StatusOr<std::unique_ptr<CpuEngine>> engine = CpuEngine::Create(GoldenModel(), o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  // Each pool thread sets its name and nice as it starts, which may be just
  // after Create returns.
  const std::vector<int> want(3, std::min(kernels::kMaxNice, base + 5));
  std::vector<int> got;
  for (int tries = 0; tries < 1000 && got != want; ++tries) {
    got = NiceOfThreadsNamed("rankd-compute");
    if (got != want) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(kernels::ThisThreadNice(), base);
}

}  // namespace
}  // namespace rankd::engine
