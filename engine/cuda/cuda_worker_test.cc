// The CUDA worker's host-side decisions, without a GPU (runs in CI): where
// its counters sit, the staging decision, the cross-layer mode, when the
// lookup runs fused with the interaction.
#include "engine/cuda/cuda_worker.h"

#include <cstdint>
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

// A DOT model of `features` features over tables of `dim` floats, x of
// width `dim`, and its device descriptors (fp32 rows at an aligned address:
// what the unit-bag kernel pools).
struct FusedCase {
  Model model;
  std::vector<kc::DeviceTable> tables;
  FusedCase(int features, int dim) {
    model.num_dense = dim;  // no bottom MLP: x is the dense features
    model.interaction = rankd::v1::DOT;
    for (int f = 0; f < features; ++f) {
      SparseFeature sf;
      sf.table = f;
      model.features.push_back(sf);
      kc::DeviceTable t;
      t.rows = reinterpret_cast<const void*>(uintptr_t{1} << 20);
      t.dim = dim;
      t.num_rows = 1000;
      tables.push_back(t);
    }
  }
  bool Fits(bool unit_pooled = true, bool any_host = false) const {
    return FusedLookupDotFits(model, tables, unit_pooled, any_host);
  }
};

TEST(CudaWorkerHostTest, LookupFusesWithTheInteractionOnlyWhereTheKernelApplies) {
  EXPECT_TRUE(FusedCase(26, 16).Fits());   // kaggle
  EXPECT_TRUE(FusedCase(1, 4).Fits());
  EXPECT_FALSE(FusedCase(26, 16).Fits(/*unit_pooled=*/false));
  EXPECT_FALSE(FusedCase(26, 16).Fits(true, /*any_host=*/true));
  FusedCase cat(26, 16);
  cat.model.interaction = rankd::v1::CAT;
  EXPECT_FALSE(cat.Fits());
  FusedCase mixed(26, 16);
  mixed.tables[3].dim = 8;  // not the interaction's dim
  EXPECT_FALSE(mixed.Fits());
  FusedCase hashed(26, 16);
  hashed.tables[5].hash.num_buckets = 4;  // DYNAMIC: not a unit-bag table
  EXPECT_FALSE(hashed.Fits());
  EXPECT_FALSE(FusedCase(26, 6).Fits());    // dim not a multiple of 4
  EXPECT_FALSE(FusedCase(200, 64).Fits());  // a row past the shared-memory bound
  FusedCase bottom(26, 16);
  bottom.model.num_dense = 13;
  Linear l;
  l.in = 13;
  l.out = 16;
  bottom.model.bottom.push_back(l);  // x from the bottom MLP, 16 wide
  EXPECT_TRUE(bottom.Fits());
  bottom.model.bottom.back().out = 32;
  EXPECT_FALSE(bottom.Fits());
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
