#include "engine/gpu/gpu_backend.h"

#include <string>

#include "engine/testing/test_models.h"
#include "gtest/gtest.h"

namespace rankd::engine::gpu {
namespace {

TEST(GpuOptionsTest, ParsesEveryMathName) {
  EXPECT_EQ(*ParseMath("fp32"), Math::kFp32);
  EXPECT_EQ(*ParseMath("tf32"), Math::kTf32);
  EXPECT_EQ(*ParseCrossMath("auto"), CrossMath::kAuto);
  EXPECT_EQ(*ParseCrossMath("fp32"), CrossMath::kFp32);
  EXPECT_EQ(*ParseCrossMath("tf32x3"), CrossMath::kTf32x3);
  EXPECT_EQ(*ParseCrossMath("bf16x3"), CrossMath::kBf16x3);
  EXPECT_EQ(*ParseCrossMath("tf32"), CrossMath::kTf32);
}

TEST(GpuOptionsTest, BadNamesNameTheFlagAndAreTruncated) {
  absl::StatusOr<Math> math = ParseMath("fp16");
  ASSERT_FALSE(math.ok());
  EXPECT_EQ(math.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(math.status().message().find("--gpu_math"), std::string::npos);
  EXPECT_NE(math.status().message().find("\"fp16\""), std::string::npos);

  const std::string huge(100000, 'x');
  absl::StatusOr<CrossMath> cross = ParseCrossMath(huge);
  ASSERT_FALSE(cross.ok());
  EXPECT_NE(cross.status().message().find("--gpu_cross_math"), std::string::npos);
  EXPECT_LT(cross.status().message().size(), 1000u);
  EXPECT_FALSE(ParseCrossMath("").ok());
  EXPECT_FALSE(ParseCrossMath("TF32").ok());
}

std::shared_ptr<Model> SmallModel() {
  testing::RandomModelSpec spec;
  return testing::MakeRandomModel(spec);
}

#ifdef RANKD_TEST_NO_CUDA
// Built with --config=cpu: no GPU, and asking for one says why.
TEST(GpuBackendTest, BuildWithoutCudaReportsNoBackend) {
  EXPECT_FALSE(BuiltWithCuda());
  std::string why;
  EXPECT_EQ(UsableGpus(&why), 0);
  EXPECT_NE(why.find("no CUDA backend"), std::string::npos) << why;
  EXPECT_NE(why.find("--config=cpu"), std::string::npos) << why;
  EXPECT_EQ(SmallestGpuMemoryBytes(), 0);
  EXPECT_EQ(BuiltGpuArchs(), "");
  absl::StatusOr<Version> version = CreateVersion(SmallModel(), Options{});
  ASSERT_FALSE(version.ok());
  EXPECT_EQ(version.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(version.status().message().find("no CUDA backend"), std::string::npos);
}
#else
TEST(GpuBackendTest, CudaBuildNamesItsArchitectures) {
  EXPECT_TRUE(BuiltWithCuda());
  EXPECT_FALSE(BuiltGpuArchs().empty());
  std::string why;
  if (UsableGpus(&why) == 0) {
    EXPECT_FALSE(why.empty());
    EXPECT_EQ(SmallestGpuMemoryBytes(), 0);
    EXPECT_FALSE(CreateVersion(SmallModel(), Options{}).ok());
  } else {
    EXPECT_GT(SmallestGpuMemoryBytes(), 0);
  }
}
#endif

}  // namespace
}  // namespace rankd::engine::gpu
