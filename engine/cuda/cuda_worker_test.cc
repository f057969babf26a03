// The CUDA worker's host-side decisions, without a GPU (runs in CI): where
// its counters sit, the staging decision, the cross-layer mode.
#include "engine/cuda/cuda_worker.h"

#include <set>
#include <string>

#include "gtest/gtest.h"
#include "kernels/cuda/small_rows_linear.h"

namespace rankd::engine::cuda {
namespace {

using CM = CudaWorker::CrossMath;
namespace kc = kernels::cuda;

TEST(CudaWorkerHostTest, StagingFollowsTheMissRateAndKeepsItWithoutLookups) {
  EXPECT_TRUE(StageNextSlice(3, 100, 0.03, false));    // 3% >= 3%
  EXPECT_FALSE(StageNextSlice(2, 100, 0.03, true));    // 2% < 3%
  EXPECT_TRUE(StageNextSlice(0, 0, 0.03, true));       // no HOST lookups: unchanged
  EXPECT_FALSE(StageNextSlice(0, 0, 0.03, false));
  EXPECT_TRUE(StageNextSlice(0, 10, 0.0, false));      // rate 0: always stage
}

TEST(CudaWorkerHostTest, CrossMathResolvesFromTheMlpMath) {
  CudaWorker::Options o;
  o.math = kc::MathMode::kFp32;
  EXPECT_EQ(ResolveCrossMath(o), CM::kFp32);
  o.math = kc::MathMode::kTf32;
  EXPECT_EQ(ResolveCrossMath(o), CM::kTf32x3);
  o.cross_math = CM::kTf32;
  EXPECT_EQ(ResolveCrossMath(o), CM::kTf32);
  o.math = kc::MathMode::kFp32;
  o.cross_math = CM::kTf32x3;
  EXPECT_EQ(ResolveCrossMath(o), CM::kTf32x3);
}

TEST(CudaWorkerHostTest, SplitWeightsFollowTheResolvedCrossMath) {
  CudaWorker::Options o;
  EXPECT_EQ(CrossSplitFor(o), DeviceModel::CrossSplit::kNone);  // fp32
  o.cross_math = CM::kTf32x3;
  EXPECT_EQ(CrossSplitFor(o), DeviceModel::CrossSplit::kTf32x3);
  o.cross_math = CM::kBf16x3;
  EXPECT_EQ(CrossSplitFor(o), DeviceModel::CrossSplit::kBf16x3);
  o.cross_math = CM::kTf32;
  EXPECT_EQ(CrossSplitFor(o), DeviceModel::CrossSplit::kNone);
  o.cross_math = CM::kAuto;
  o.math = kc::MathMode::kTf32;
  EXPECT_EQ(CrossSplitFor(o), DeviceModel::CrossSplit::kTf32x3);
}

TEST(CudaWorkerHostTest, CrossMathParsesItsFiveNamesOnly) {
  CM m = CM::kFp32;
  EXPECT_TRUE(ParseCrossMath("auto", &m));
  EXPECT_EQ(m, CM::kAuto);
  EXPECT_TRUE(ParseCrossMath("tf32x3", &m));
  EXPECT_EQ(m, CM::kTf32x3);
  EXPECT_TRUE(ParseCrossMath("tf32", &m));
  EXPECT_EQ(m, CM::kTf32);
  EXPECT_TRUE(ParseCrossMath("bf16x3", &m));
  EXPECT_EQ(m, CM::kBf16x3);
  EXPECT_TRUE(ParseCrossMath("fp32", &m));
  EXPECT_EQ(m, CM::kFp32);
  for (const char* bad : {"", "TF32", "tf32x2", "fp16", "auto ", "bf16", "BF16X3"}) {
    EXPECT_FALSE(ParseCrossMath(bad, &m)) << bad;
    EXPECT_EQ(m, CM::kFp32) << "a refused name leaves the mode alone";
  }
}

// Bad options are refused before the worker touches the GPU or the model.
TEST(CudaWorkerHostTest, CreateRefusesBadOptionsNamingTheField) {
  CudaWorker::Options o;
  o.lookup_beside_mlp_max_rows = -1;
  auto w = CudaWorker::Create(nullptr, o, "bad");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(w.status().message().find("lookup_beside_mlp_max_rows"), std::string::npos)
      << w.status();
  o = CudaWorker::Options();
  o.dense_first_min_rows = -3;
  w = CudaWorker::Create(nullptr, o, "bad");
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("dense_first_min_rows"), std::string::npos) << w.status();
  o = CudaWorker::Options();
  o.dense_first_min_rows = 512;
  o.dense_first_max_rows = 256;
  w = CudaWorker::Create(nullptr, o, "bad");
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("dense_first_max_rows"), std::string::npos) << w.status();
  o = CudaWorker::Options();
  o.copy_beside_mlp_min_rows = -1;
  w = CudaWorker::Create(nullptr, o, "bad");
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("copy_beside_mlp_min_rows"), std::string::npos)
      << w.status();
  EXPECT_EQ(CudaWorker::Options().dense_first_min_rows, 256);
  EXPECT_EQ(CudaWorker::Options().dense_first_max_rows, 4096);
  EXPECT_EQ(CudaWorker::Options().lookup_beside_mlp_max_rows, kc::kSmallRowsMax)
      << "by default only the small-rows bucket pools beside the bottom MLP";
}

}  // namespace
}  // namespace rankd::engine::cuda
