// Runs without a GPU: the fit check is plain arithmetic on the model's bytes.
#include "engine/cuda/device_model.h"

#include "engine/testing/test_models.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rankd::engine::cuda {
namespace {

using ::testing::HasSubstr;

TEST(DeviceModelTest, RequiredBytesCountsTablesHashAndWeights) {
  testing::RandomModelSpec spec;
  spec.table_rows = {1000, 2000};
  spec.dim = 8;
  spec.dynamic_tables = {1};
  auto m = testing::MakeRandomModel(spec);
  const int64_t rows = (1000 + 2000) * 8 * 4;
  const int64_t hash = m->tables[1].hash.bytes();
  EXPECT_GT(hash, 0);
  EXPECT_GE(DeviceModel::RequiredBytes(*m), rows + hash);
  EXPECT_LT(DeviceModel::RequiredBytes(*m), rows + hash + 64 * 1024);
}

TEST(DeviceModelTest, RefusesAModelBiggerThanTheGpuWithTheNumbers) {
  testing::RandomModelSpec spec;
  spec.table_rows = {1 << 20};
  spec.dim = 16;  // 64 MiB of rows
  auto m = testing::MakeRandomModel(spec);
  auto plan = PlanPlacement(PlanInputFromModel(*m), int64_t{1} << 40);  // all in HBM
  ASSERT_TRUE(plan.ok()) << plan.status();
  const int64_t need = plan->device_bytes();
  EXPECT_GE(need, int64_t{64} << 20);
  EXPECT_TRUE(DeviceModel::CheckFits(*m, *plan, 0, need + 100, need * 2, 100).ok());
  absl::Status s = DeviceModel::CheckFits(*m, *plan, 3, need + 100, need * 2, 101);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("model \"test\" version 1 does not fit on one GPU"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("needs 0.06 GiB"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("GPU 3 has"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("--device_memory_budget"));
}

TEST(DeviceModelTest, ABudgetMovesTheTableToHostMemory) {
  testing::RandomModelSpec spec;
  spec.table_rows = {1 << 20, 100};
  spec.dim = 16;
  auto m = testing::MakeRandomModel(spec);
  auto plan = PlanPlacement(PlanInputFromModel(*m), int64_t{16} << 20);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->tables[0].tier, Tier::kHost);
  EXPECT_EQ(plan->tables[1].tier, Tier::kDevice);
  EXPECT_GT(plan->tables[0].cache_rows, 0);
  EXPECT_LE(plan->device_bytes(), int64_t{16} << 20);
  // The HBM part is what is checked against the GPU.
  EXPECT_TRUE(DeviceModel::CheckFits(*m, *plan, 0, int64_t{17} << 20, int64_t{80} << 30, 0).ok());
}

}  // namespace
}  // namespace rankd::engine::cuda
