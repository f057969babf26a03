// Online updates on the CUDA backend under concurrent scoring (the GPU twin
// of live_tables_test's NoTornRowsUnderConcurrentScoring): an updater writes
// every row of table 0 with one value per message while scoring threads
// send requests through a ModelInstance of CUDA workers. Updates are ordered
// on the GPU (DeviceModel::Update), not by draining the workers, so this is
// what shows that a batch still sees all of a message or none of it: every
// answer must equal the CPU engine's scores for one single message's value,
// and never one older than the message acknowledged before the request was
// sent. Tables in HBM, in pinned host memory behind the HBM cache, and a
// DYNAMIC table. Needs a CUDA device (tags "manual", "gpu"); skips without.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/cuda/cuda_table_store.h"
#include "engine/cuda/cuda_worker.h"
#include "engine/serving/model_instance.h"
#include "engine/testing/test_models.h"
#include "engine/updates/host_table_store.h"
#include "engine/updates/live_tables.h"
#include "gtest/gtest.h"

namespace rankd::engine::cuda {
namespace {

// Values cycle through kValues distinct levels (message v writes level
// v % kValues), so the scores stay in the model's sensitive range.
constexpr int kValues = 64;
float Level(int64_t v) { return 0.05f * static_cast<float>(v % kValues + 1) - 1.6f; }

enum class Kind { kHbm, kHost, kDynamic };

testing::RandomModelSpec Spec(Kind kind) {
  testing::RandomModelSpec spec;
  spec.dim = 8;
  spec.table_rows = {96, 40};
  spec.seed = 5;
  if (kind == Kind::kDynamic) {
    spec.dynamic_tables = {0};
    spec.id_policy = rankd::v1::ZERO;
  }
  return spec;
}

std::shared_ptr<Model> MakeModel(Kind kind) {
  std::shared_ptr<Model> m = testing::MakeRandomModel(Spec(kind));
  if (kind == Kind::kDynamic) testing::MakeTableGrowable(m.get(), 0, 128);
  if (kind == Kind::kHost) m->tables[0].placement = rankd::v1::HOST;
  return m;
}

// Table 0's ids: row indices (STATIC) or its stored keys (DYNAMIC).
std::vector<int64_t> TableIds(const EmbeddingTable& t) {
  std::vector<int64_t> ids(t.num_rows);
  for (int64_t r = 0; r < t.num_rows; ++r) {
    ids[r] = t.dynamic ? reinterpret_cast<const int64_t*>(t.keys.data)[r] : r;
  }
  return ids;
}

struct Observation {
  int64_t floor = 0;    // acknowledged before the request was sent
  int64_t ceiling = 0;  // acknowledged once it was answered (+1: in flight)
  std::vector<float> scores;
};

void RunStress(Kind kind) {
  if (UsableCudaDevices() == 0) GTEST_SKIP() << "no usable CUDA device";
  std::shared_ptr<Model> model = MakeModel(kind);
  const EmbeddingTable& t = model->tables[0];
  const std::vector<int64_t> ids = TableIds(t);
  testing::RandomRequestSpec request_spec;
  request_spec.num_candidates = 8;
  const testing::OwnedRequest request = testing::MakeRandomRequest(*model, request_spec);

  // CPU references: the scores after a message of each level.
  std::shared_ptr<Model> ref_model = MakeModel(kind);
  LiveTables ref_live(ref_model, {std::make_shared<HostTableStore>(ref_model)});
  auto cpu = CpuEngine::Create(ref_model, CpuEngine::Options{});
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  std::vector<std::vector<float>> expected(kValues);
  std::vector<float> rows(ids.size() * t.dim);
  auto delta_of = [&](int64_t v) {
    std::fill(rows.begin(), rows.end(), Level(v));
    return TableDelta{0, ids, absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(rows.data()),
                                                  rows.size() * 4),
                      {}};
  };
  for (int k = 0; k < kValues; ++k) {
    ASSERT_TRUE(ref_live.Apply(delta_of(k), {}).ok());
    auto s = (*cpu)->Score(request.view());
    ASSERT_TRUE(s.ok()) << s.status();
    expected[k] = *s;
  }
  // The levels must be told apart by the scores (else a mix could pass).
  for (int k = 1; k < kValues; ++k) {
    float diff = 0;
    for (size_t c = 0; c < expected[k].size(); ++c) {
      diff = std::max(diff, std::abs(expected[k][c] - expected[k - 1][c]));
    }
    ASSERT_GT(diff, 1e-4f) << "levels " << k - 1 << " and " << k << " score alike";
  }

  CudaWorker::Options wo;
  wo.max_rows = 64;  // batches of more than 64 candidates run in slices
  CudaSetupReport report;
  auto workers = CreateCudaWorkers(model, wo, /*workers_per_device=*/3, {0}, &report);
  ASSERT_TRUE(workers.ok()) << workers.status();
  auto live = std::make_shared<LiveTables>(
      model, std::vector<std::shared_ptr<TableStore>>{
                 std::make_shared<CudaTableStore>(report.device_models)});
  // The served tables start at level 0 (message 0).
  ASSERT_TRUE(live->Apply(delta_of(0), {}).ok());
  ModelInstance::Options options;
  options.batching.max_batch_candidates = 128;
  options.batching.max_queue_delay_us = 100;
  options.live_tables = live;
  auto instance = ModelInstance::Create(model, options, *std::move(workers));
  ASSERT_TRUE(instance.ok()) << instance.status();

  std::atomic<int64_t> acknowledged{0};
  std::atomic<bool> stop{false};
  std::thread updater([&] {
    for (int64_t v = 1; !stop.load(); ++v) {
      auto applied = live->Apply(delta_of(v), {});
      ASSERT_TRUE(applied.ok()) << applied.status();
      ASSERT_EQ(applied->result.rows_applied, static_cast<int64_t>(ids.size()));
      acknowledged.store(v);
    }
  });
  constexpr int kScorers = 6;
  std::vector<std::vector<Observation>> seen(kScorers);
  std::vector<std::thread> scorers;
  for (int s = 0; s < kScorers; ++s) {
    scorers.emplace_back([&, s] {
      while (!stop.load()) {
        Observation o;
        o.floor = acknowledged.load();
        o.scores.assign(request.num_candidates, -7.0f);
        absl::Notification done;
        absl::Status status;
        QueuedRequest q;
        q.request = request.view();
        q.scores = absl::MakeSpan(o.scores);
        q.done = [&](absl::Status st, const RequestTiming&) {
          status = st;
          done.Notify();
        };
        if (!(*instance)->Submit(std::move(q)).ok()) continue;
        done.WaitForNotification();
        ASSERT_TRUE(status.ok()) << status;
        o.ceiling = acknowledged.load() + 1;
        seen[s].push_back(std::move(o));
      }
    });
  }
  const char* env = std::getenv("RANKD_STRESS_SECONDS");
  absl::SleepFor(absl::Seconds(env != nullptr ? std::atof(env) : 5.0));
  stop.store(true);
  updater.join();
  for (std::thread& s : scorers) s.join();
  (*instance)->Shutdown();

  // Every answer: one message's scores, from the acknowledged one or later.
  int64_t answers = 0, mixed = 0, stale = 0;
  for (const auto& per_thread : seen) {
    for (const Observation& o : per_thread) {
      ++answers;
      auto matches = [&](int64_t v) {
        const std::vector<float>& e = expected[v % kValues];
        for (size_t c = 0; c < e.size(); ++c) {
          if (std::abs(o.scores[c] - e[c]) > 1e-5f) return false;
        }
        return true;
      };
      bool in_range = false;
      for (int64_t v = o.floor; v <= o.ceiling && !in_range; ++v) in_range = matches(v);
      if (in_range) continue;
      bool any = false;
      for (int k = 0; k < kValues && !any; ++k) any = matches(k);
      ++(any ? stale : mixed);
    }
  }
  EXPECT_EQ(mixed, 0) << "answers that match no single message, of " << answers;
  EXPECT_EQ(stale, 0) << "answers older than an acknowledged message, of " << answers;
  EXPECT_GT(answers, 200);
  EXPECT_GT(acknowledged.load(), 100);
}

TEST(LiveTablesGpuTest, NoTornRowsHbm) { RunStress(Kind::kHbm); }
TEST(LiveTablesGpuTest, NoTornRowsHostBehindCache) { RunStress(Kind::kHost); }
TEST(LiveTablesGpuTest, NoTornRowsDynamic) { RunStress(Kind::kDynamic); }

}  // namespace
}  // namespace rankd::engine::cuda
