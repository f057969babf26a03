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
  spec.table_rows = {1 << 20};  // 4 MiB of rows at dim 4... times dim below
  spec.dim = 16;                // 64 MiB
  auto m = testing::MakeRandomModel(spec);
  const int64_t need = DeviceModel::RequiredBytes(*m);
  EXPECT_TRUE(DeviceModel::CheckFits(*m, 0, need + 100, need * 2, 100).ok());
  absl::Status s = DeviceModel::CheckFits(*m, 3, need + 100, need * 2, 101);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("model \"test\" version 1 needs 0.06 GiB"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("GPU 3 has"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("does not fit on one GPU"));
}

}  // namespace
}  // namespace rankd::engine::cuda
