#include "server/lifecycle/version_state.h"

#include "engine/serving/clock.h"
#include "gtest/gtest.h"

namespace rankd::server {
namespace {

TEST(VersionStateTest, TheHappyPathRecordsWhenEachStateBegan) {
  engine::FakeClock clock;
  VersionRecord r(clock.Now());
  EXPECT_EQ(r.state(), rankd::v1::UNLOADED);
  EXPECT_TRUE(r.MayLoad(7, false));
  clock.Advance(absl::Seconds(1));
  ASSERT_TRUE(r.StartLoading(clock.Now()).ok());
  EXPECT_EQ(r.since(), clock.Now());
  EXPECT_FALSE(r.MayLoad(7, true));
  clock.Advance(absl::Seconds(2));
  ASSERT_TRUE(r.Ready(clock.Now()).ok());
  EXPECT_EQ(r.state(), rankd::v1::READY);
  EXPECT_EQ(r.since(), clock.Now());
  ASSERT_TRUE(r.StartDraining(clock.Now()).ok());
  ASSERT_TRUE(r.Unloaded(clock.Now()).ok());
  EXPECT_TRUE(r.MayLoad(7, false));
}

TEST(VersionStateTest, AFailedVersionWaitsForOtherFiles) {
  engine::FakeClock clock;
  VersionRecord r(clock.Now());
  ASSERT_TRUE(r.StartLoading(clock.Now()).ok());
  ASSERT_TRUE(r.Failed(clock.Now(), "weights.safetensors: truncated", 42).ok());
  EXPECT_EQ(r.state(), rankd::v1::FAILED);
  EXPECT_EQ(r.reason(), "weights.safetensors: truncated");
  EXPECT_FALSE(r.MayLoad(42, false));
  EXPECT_TRUE(r.MayLoad(43, false));
  EXPECT_TRUE(r.MayLoad(42, true));
  ASSERT_TRUE(r.StartLoading(clock.Now()).ok());  // the retry
  EXPECT_EQ(r.reason(), "");
}

TEST(VersionStateTest, OtherTransitionsAreRefused) {
  engine::FakeClock clock;
  VersionRecord r(clock.Now());
  EXPECT_EQ(r.Ready(clock.Now()).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(r.StartDraining(clock.Now()).ok());
  EXPECT_FALSE(r.Unloaded(clock.Now()).ok());
  EXPECT_FALSE(r.Failed(clock.Now(), "x", 1).ok());
  ASSERT_TRUE(r.StartLoading(clock.Now()).ok());
  absl::Status twice = r.StartLoading(clock.Now());
  EXPECT_NE(twice.message().find("from LOADING"), std::string::npos) << twice;
  EXPECT_EQ(r.state(), rankd::v1::LOADING);
}

}  // namespace
}  // namespace rankd::server
