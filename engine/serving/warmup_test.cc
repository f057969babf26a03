// WarmUpWorkers: every worker's WarmUp (not its Execute) on two requests of
// each positive size, one whose bags hold one id each and one whose bags do
// not (two ids, or none and one where a feature takes at most one), every
// candidate scored; the first failure stops the warm-up and names the worker
// and the size.
#include "engine/serving/warmup.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/testing/test_models.h"
#include "gtest/gtest.h"

namespace rankd::engine {
namespace {

// Records which entry point ran for which size; fails WarmUp at `fail_at`.
class RecordingWorker final : public Worker {
 public:
  RecordingWorker(std::string name, int32_t fail_at) : name_(std::move(name)), fail_at_(fail_at) {}
  absl::string_view name() const override { return name_; }
  absl::Status Execute(absl::Span<const Request* const> requests,
                       absl::Span<const absl::Span<float>> scores, BatchStats*) override {
    executes.push_back(requests[0]->num_candidates);
    return absl::OkStatus();
  }
  absl::Status WarmUp(absl::Span<const Request* const> requests,
                      absl::Span<const absl::Span<float>> scores) override {
    const Request& r = *requests[0];
    const int32_t b = r.num_candidates;
    warm_ups.push_back(b);
    EXPECT_EQ(requests.size(), 1u);
    EXPECT_EQ(scores[0].size(), static_cast<size_t>(b));
    std::vector<std::vector<int32_t>> bags;
    for (const FeatureInput& f : r.features) {
      int64_t total = 0;
      for (int32_t len : f.lengths) total += len;
      EXPECT_EQ(static_cast<int64_t>(f.ids.size()), total);
      bags.emplace_back(f.lengths.begin(), f.lengths.end());
    }
    lengths.push_back(std::move(bags));
    if (b == fail_at_) return absl::InternalError("device fell over");
    return absl::OkStatus();
  }
  std::vector<int32_t> executes, warm_ups;
  // Per WarmUp call, per feature: its bags' lengths.
  std::vector<std::vector<std::vector<int32_t>>> lengths;

 private:
  std::string name_;
  int32_t fail_at_;
};

// Feature 0 takes any bag, feature 1 at most one id, feature 2 is request-level.
std::shared_ptr<const Model> SmallModel() {
  testing::RandomModelSpec spec;
  spec.table_rows = {10, 20, 30};
  spec.request_level_features = {2};
  spec.dim = 4;
  spec.bottom = {8};
  spec.top = {4};
  std::shared_ptr<Model> m = testing::MakeRandomModel(spec);
  m->features[1].max_ids_per_bag = 1;
  return m;
}

TEST(WarmUpWorkersTest, RunsEveryWorkersWarmUpAtEveryPositiveSize) {
  auto model = SmallModel();
  std::vector<std::unique_ptr<Worker>> workers;
  workers.push_back(std::make_unique<RecordingWorker>("w0", -1));
  workers.push_back(std::make_unique<RecordingWorker>("w1", -1));
  ASSERT_TRUE(WarmUpWorkers(*model, workers, {1, 0, 16, -3, 64}).ok());
  for (const auto& w : workers) {
    const auto& r = static_cast<const RecordingWorker&>(*w);
    EXPECT_EQ(r.warm_ups, (std::vector<int32_t>{1, 1, 16, 16, 64, 64}));
    EXPECT_TRUE(r.executes.empty()) << "WarmUpWorkers must call WarmUp, not Execute";
    ASSERT_EQ(r.lengths.size(), 6u);
    for (size_t call = 0; call < r.lengths.size(); ++call) {
      SCOPED_TRACE(::testing::Message() << "call " << call);
      const int32_t b = r.warm_ups[call];
      const auto& bags = r.lengths[call];
      ASSERT_EQ(bags.size(), 3u);
      ASSERT_EQ(bags[0].size(), static_cast<size_t>(b));
      ASSERT_EQ(bags[1].size(), static_cast<size_t>(b));
      ASSERT_EQ(bags[2].size(), 1u);  // request-level: one shared bag
      if (call % 2 == 0) {  // one id a bag
        for (const auto& f : bags) {
          for (int32_t len : f) EXPECT_EQ(len, 1);
        }
        continue;
      }
      for (int32_t len : bags[0]) EXPECT_EQ(len, 2);
      for (int k = 0; k < b; ++k) EXPECT_EQ(bags[1][k], k % 2) << "max_ids_per_bag 1";
      EXPECT_EQ(bags[2][0], 2);
    }
  }
}

TEST(WarmUpWorkersTest, AFailureNamesTheWorkerAndTheSizeAndStops) {
  auto model = SmallModel();
  std::vector<std::unique_ptr<Worker>> workers;
  workers.push_back(std::make_unique<RecordingWorker>("w0", -1));
  workers.push_back(std::make_unique<RecordingWorker>("w1", 16));
  workers.push_back(std::make_unique<RecordingWorker>("w2", -1));
  const absl::Status s = WarmUpWorkers(*model, workers, {1, 16, 64});
  ASSERT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_NE(s.message().find("on worker w1"), std::string::npos) << s;
  EXPECT_NE(s.message().find("with 16 candidates"), std::string::npos) << s;
  EXPECT_NE(s.message().find("device fell over"), std::string::npos) << s;
  EXPECT_EQ(static_cast<const RecordingWorker&>(*workers[1]).warm_ups,
            (std::vector<int32_t>{1, 1, 16}));
  EXPECT_TRUE(static_cast<const RecordingWorker&>(*workers[2]).warm_ups.empty());
}

// The interface's default WarmUp is Execute (the CPU worker keeps it).
TEST(WarmUpWorkersTest, DefaultWarmUpIsExecute) {
  class ExecuteOnly final : public Worker {
   public:
    absl::string_view name() const override { return "cpu"; }
    absl::Status Execute(absl::Span<const Request* const> requests,
                         absl::Span<const absl::Span<float>>, BatchStats*) override {
      sizes.push_back(requests[0]->num_candidates);
      return absl::OkStatus();
    }
    std::vector<int32_t> sizes;
  };
  auto model = SmallModel();
  std::vector<std::unique_ptr<Worker>> workers;
  workers.push_back(std::make_unique<ExecuteOnly>());
  ASSERT_TRUE(WarmUpWorkers(*model, workers, {2, 8}).ok());
  EXPECT_EQ(static_cast<const ExecuteOnly&>(*workers[0]).sizes,
            (std::vector<int32_t>{2, 2, 8, 8}));
}

}  // namespace
}  // namespace rankd::engine
