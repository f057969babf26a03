#include "engine/model/placement_plan.h"

#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace rankd::engine {
namespace {

rankd::v1::ModelConfig Config(const std::string& text) {
  rankd::v1::ModelConfig c;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &c));
  return c;
}

// Three fp32 dim-4 tables (16-byte rows): 100, 1000 and 10000 rows, no MLPs.
rankd::v1::ModelConfig ThreeTables(const std::string& placement_c = "AUTO") {
  return Config(R"(name: "m" num_dense: 4
    tables { name: "a" num_rows: 100 dim: 4 dtype: FP32 placement: AUTO }
    tables { name: "b" num_rows: 1000 dim: 4 dtype: FP32 placement: AUTO }
    tables { name: "c" num_rows: 10000 dim: 4 dtype: FP32 placement: )" +
                placement_c + " }");
}

TEST(MemoryBudgetTest, ParsesBytesSuffixesAndFractions) {
  EXPECT_EQ(ParseMemoryBudget("--b", "8G")->bytes, int64_t{8} << 30);
  EXPECT_EQ(ParseMemoryBudget("--b", "8GiB")->bytes, int64_t{8} << 30);
  EXPECT_EQ(ParseMemoryBudget("--b", "512mb")->bytes, int64_t{512} << 20);
  EXPECT_EQ(ParseMemoryBudget("--b", "1073741824")->bytes, int64_t{1} << 30);
  EXPECT_DOUBLE_EQ(ParseMemoryBudget("--b", "0.25")->fraction, 0.25);
  EXPECT_TRUE(ParseMemoryBudget("--b", "")->unset());
  EXPECT_EQ(ParseMemoryBudget("--b", "0.5")->Resolve(80, 10), 40);
  EXPECT_EQ(ParseMemoryBudget("--b", "")->Resolve(80, 10), 10);
}

TEST(MemoryBudgetTest, RejectsNonsenseNamingTheFlag) {
  for (const char* bad : {"lots", "-3G", "0", "1.5", "0.0", "8X", "G", "99999999999T"}) {
    auto b = ParseMemoryBudget("--device_memory_budget", bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.status().message().find("--device_memory_budget"), std::string::npos);
    EXPECT_NE(b.status().message().find(bad), std::string::npos);
  }
}

TEST(PlacementPlanTest, EverythingFitsInHbm) {
  auto plan = PlanPlacement(ThreeTables(), 1 << 20);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const TablePlan& t : plan->tables) EXPECT_EQ(t.tier, Tier::kDevice) << t.name;
  EXPECT_FALSE(plan->any_host());
  EXPECT_EQ(plan->device_bytes(), 16 * 11100);
  EXPECT_EQ(plan->host_bytes(), 0);
}

TEST(PlacementPlanTest, AutoPutsSmallestTablesInHbmAndCachesTheRest) {
  // Budget: a + b whole (17600 bytes) plus 40000 for c's cache: slot map
  // 40000 bytes of 4 per row leaves 0 for rows -> no cache. Give 60000 more.
  auto plan = PlanPlacement(ThreeTables(), 17600 + 40000 + 16 * 1000);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->tables[0].tier, Tier::kDevice);
  EXPECT_EQ(plan->tables[1].tier, Tier::kDevice);
  ASSERT_EQ(plan->tables[2].tier, Tier::kHost);
  EXPECT_EQ(plan->tables[2].cache_rows, 1000);
  EXPECT_EQ(plan->tables[2].cache_bytes, 40000 + 16000);
  EXPECT_EQ(plan->host_bytes(), 160000);
  EXPECT_LE(plan->device_bytes(), plan->budget_bytes);
  EXPECT_NE(plan->Describe().find("HOST"), std::string::npos);
}

TEST(PlacementPlanTest, NoCacheWhenTheSlotMapDoesNotFit) {
  auto plan = PlanPlacement(ThreeTables(), 17600 + 100);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->tables[2].tier, Tier::kHost);
  EXPECT_EQ(plan->tables[2].cache_rows, 0);
  EXPECT_EQ(plan->tables[2].cache_bytes, 0);
}

TEST(PlacementPlanTest, ExplicitHostStaysHostEvenWithRoom) {
  auto plan = PlanPlacement(ThreeTables("HOST"), int64_t{1} << 30);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->tables[2].tier, Tier::kHost);
  EXPECT_EQ(plan->tables[2].cache_rows, 10000);  // all of it cached
}

TEST(PlacementPlanTest, DeviceTablesOverBudgetAreRefusedWithTheNumbers) {
  auto plan = PlanPlacement(ThreeTables("DEVICE"), 100000);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(plan.status().message().find("c 156.25 KiB"), std::string::npos)
      << plan.status();
  EXPECT_NE(plan.status().message().find("--device_memory_budget"), std::string::npos);
}

TEST(PlacementPlanTest, DenseWeightsAndDynamicIndexesAlwaysInHbm) {
  auto c = Config(R"(name: "m" num_dense: 4 bottom_mlp: [8]
    tables { name: "d" kind: DYNAMIC num_rows: 100 capacity: 256 dim: 8 dtype: FP16 placement: HOST }
    sparse_features { name: "f" table: "d" })");
  const int64_t dense = DenseWeightBytes(c);
  EXPECT_GT(dense, 0);
  // Hash slots (16 B each) plus a row key, a score and a free-list entry
  // per key of max_keys (= num_rows here).
  const int64_t index = 256 * 16 + 24 * 100;
  auto plan = PlanPlacement(c, dense + index);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->tables[0].tier, Tier::kHost);
  EXPECT_EQ(plan->tables[0].index_bytes, index);
  EXPECT_EQ(plan->device_bytes(), dense + index);
  EXPECT_FALSE(PlanPlacement(c, dense + index - 1).ok());
}

}  // namespace
}  // namespace rankd::engine
