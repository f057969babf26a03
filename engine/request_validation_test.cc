#include "engine/request_validation.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/testing/test_models.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rankd::engine {
namespace {

using ::testing::HasSubstr;
using testing::MakeRandomModel;
using testing::MakeRandomRequest;
using testing::OwnedRequest;
using testing::RandomModelSpec;
using testing::RandomRequestSpec;

class ValidationTest : public ::testing::Test {
 protected:
  ValidationTest() {
    RandomModelSpec spec;
    spec.table_rows = {7, 11, 13};
    spec.dynamic_tables = {1};
    spec.request_level_features = {2};
    model_ = MakeRandomModel(spec);
    RandomRequestSpec rs;
    rs.num_candidates = 4;
    rs.max_bag = 2;
    rs.weighted = true;
    req_ = MakeRandomRequest(*model_, rs);
    // Make sure feature 0 has ids to corrupt.
    req_.lengths[0] = {1, 1, 1, 1};
    req_.ids[0] = {0, 1, 2, 3};
    req_.weights[0] = {1, 1, 1, 1};
  }
  std::string Error(const RequestLimits& limits = {}) {
    absl::Status s = ValidateRequest(*model_, req_.view(), limits);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    return std::string(s.message());
  }
  std::shared_ptr<Model> model_;
  OwnedRequest req_;
};

TEST_F(ValidationTest, AcceptsValidRequest) {
  EXPECT_TRUE(ValidateRequest(*model_, req_.view()).ok());
}

TEST_F(ValidationTest, NumCandidates) {
  req_.num_candidates = 0;
  EXPECT_THAT(Error(), HasSubstr("num_candidates: must be > 0"));
}

TEST_F(ValidationTest, CandidateLimit) {
  RequestLimits limits;
  limits.max_candidates = 3;
  EXPECT_THAT(Error(limits), HasSubstr("num_candidates: 4 exceeds the server's limit of 3"));
}

TEST_F(ValidationTest, DenseCount) {
  req_.dense.pop_back();
  EXPECT_THAT(Error(), HasSubstr("dense: has 19 values; expected 20"));
}

TEST_F(ValidationTest, DenseNaNAndInf) {
  req_.dense[7] = std::nanf("");
  EXPECT_THAT(Error(), HasSubstr("dense[7] (candidate 1, feature 2)"));
  req_.dense[7] = 1.0f;
  req_.dense[19] = std::numeric_limits<float>::infinity();
  EXPECT_THAT(Error(), HasSubstr("dense[19]"));
}

// Issue 17, defect 3: finite but huge inputs (dense 3e38, weights 1e30)
// overflowed to NaN scores answered OK. With a bound they are refused,
// naming the field, the position and the flag.
TEST_F(ValidationTest, InputMagnitudeBound) {
  RequestLimits limits;
  limits.max_abs_input = 1e9f;
  req_.dense[7] = 3e38f;
  EXPECT_THAT(Error(limits),
              HasSubstr("dense[7] (candidate 1, feature 2): 3e+38 exceeds the server's "
                        "bound of 1e+09 on input magnitudes (--max_abs_input"));
  req_.dense[7] = -2e9f;
  EXPECT_THAT(Error(limits), HasSubstr("dense[7] (candidate 1, feature 2): -2e+09 exceeds"));
  req_.dense[7] = -1e9f;  // the bound itself is allowed
  EXPECT_TRUE(ValidateRequest(*model_, req_.view(), limits).ok());
  req_.weights[0][2] = 1e30f;
  EXPECT_THAT(Error(limits), HasSubstr("sparse feature \"f0\".weights[2]: 1e+30 exceeds the "
                                       "server's bound of 1e+09"));
  // No bound (the engine's default): finite values pass.
  EXPECT_TRUE(ValidateRequest(*model_, req_.view()).ok());
}

// The first bad value is named, whichever kind comes first; Inf is refused
// even under an unbounded (+Inf) or huge --max_abs_input; the largest float
// and -0 pass.
TEST_F(ValidationTest, FirstBadValueWinsAndInfIsNeverInBounds) {
  req_.dense[3] = std::numeric_limits<float>::max();
  req_.dense[4] = -0.0f;
  EXPECT_TRUE(ValidateRequest(*model_, req_.view()).ok());
  req_.dense[12] = std::nanf("");
  req_.dense[5] = -std::numeric_limits<float>::infinity();
  EXPECT_THAT(Error(), HasSubstr("dense[5] (candidate 1, feature 0): -inf is not a finite number"));
  RequestLimits unbounded;
  unbounded.max_abs_input = std::numeric_limits<float>::infinity();
  EXPECT_THAT(Error(unbounded), HasSubstr("dense[5] (candidate 1, feature 0): -inf is not a "
                                          "finite number"));
  req_.dense[5] = 0.0f;
  EXPECT_THAT(Error(unbounded), HasSubstr("dense[12] (candidate 2, feature 2): nan is not a "
                                          "finite number"));
  req_.dense[12] = 0.0f;
  req_.dense[3] = 0.0f;
  req_.weights[0][3] = std::numeric_limits<float>::infinity();
  req_.weights[0][1] = 2e9f;
  RequestLimits bounded;
  bounded.max_abs_input = 1e9f;
  EXPECT_THAT(Error(bounded), HasSubstr("sparse feature \"f0\".weights[1]: 2e+09 exceeds"));
  EXPECT_THAT(Error(), HasSubstr("sparse feature \"f0\".weights[3]: inf is not a finite number"));
}

TEST_F(ValidationTest, MissingFeature) {
  req_.ids.pop_back();
  req_.lengths.pop_back();
  req_.weights.pop_back();
  EXPECT_THAT(Error(), HasSubstr("sparse: has 2 features; the model has 3"));
}

TEST_F(ValidationTest, WrongLengthsCount) {
  req_.lengths[0] = {1, 1, 2};
  EXPECT_THAT(Error(), HasSubstr("sparse feature \"f0\".lengths: has 3 entries; expected num_candidates (4) or 1"));
}

TEST_F(ValidationTest, RequestLevelNeedsOneBag) {
  req_.lengths[2] = {0, 0, 0, 0};
  req_.ids[2].clear();
  req_.weights[2].clear();
  EXPECT_THAT(Error(), HasSubstr("sparse feature \"f2\".lengths: has 4 entries; a request-level feature takes exactly 1"));
}

TEST_F(ValidationTest, NegativeLength) {
  req_.lengths[0] = {1, 1, 3, -1};
  EXPECT_THAT(Error(), HasSubstr("sparse feature \"f0\".lengths[3]: -1 is negative"));
}

TEST_F(ValidationTest, IdsCountMismatch) {
  req_.lengths[0] = {1, 1, 1, 2};
  EXPECT_THAT(Error(), HasSubstr("sparse feature \"f0\".ids: has 4 ids but its lengths add up to 5"));
}

TEST_F(ValidationTest, WeightsCount) {
  req_.weights[0].pop_back();
  EXPECT_THAT(Error(), HasSubstr("sparse feature \"f0\".weights: has 3 values; expected none or one per id (4)"));
}

TEST_F(ValidationTest, WeightNaN) {
  req_.weights[0][2] = std::nanf("");
  EXPECT_THAT(Error(), HasSubstr("sparse feature \"f0\".weights[2]"));
}

TEST_F(ValidationTest, OutOfRangeId) {
  req_.ids[0][3] = 7;
  EXPECT_THAT(Error(), HasSubstr("sparse feature \"f0\".ids[3]: id 7 is out of range [0, 7) of table \"t0\""));
  req_.ids[0][3] = -2;
  EXPECT_THAT(Error(), HasSubstr("id -2 is out of range"));
}

TEST_F(ValidationTest, MissingDynamicKey) {
  req_.lengths[1] = {1, 0, 0, 0};
  req_.ids[1] = {424242};
  req_.weights[1] = {};
  EXPECT_THAT(Error(), HasSubstr("sparse feature \"f1\".ids[0]: key 424242 is not in dynamic table \"t1\""));
}

TEST_F(ValidationTest, ZeroPolicyAcceptsUnresolvedIds) {
  for (auto& t : model_->tables) t.id_policy = rankd::v1::ZERO;
  req_.ids[0][3] = 1000;
  EXPECT_TRUE(ValidateRequest(*model_, req_.view()).ok());
}

TEST_F(ValidationTest, MaxIdsPerBagAndFeature) {
  model_->features[0].max_ids_per_bag = 1;
  req_.lengths[0] = {2, 0, 1, 1};
  EXPECT_THAT(Error(), HasSubstr("sparse feature \"f0\".lengths[0]: 2 ids exceed the feature's max_ids_per_bag (1)"));
  model_->features[0].max_ids_per_bag = 0;
  RequestLimits limits;
  limits.max_ids_per_feature = 3;
  EXPECT_THAT(Error(limits), HasSubstr("sparse feature \"f0\".ids: 4 ids exceed the server's limit of 3"));
}

// The id, length and value checks run in blocks with a scalar tail: a bad
// entry is found and named wherever it stands (first block, a block's edge,
// the tail), the first one when there are several, and the range edges of
// ids hold (num_rows - 1 and 0 pass; num_rows, -1, INT64_MIN and INT64_MAX
// do not).
TEST(ValidationBlocksTest, NamesTheFirstBadEntryWhereverItStands) {
  RandomModelSpec spec;
  spec.table_rows = {1000};
  spec.num_dense = 2;
  auto model = MakeRandomModel(spec);
  model->features[0].max_ids_per_bag = 4;
  constexpr int kCandidates = 300;  // blocks of 64 and a tail of 44
  OwnedRequest req;
  req.num_candidates = kCandidates;
  req.dense.assign(2 * kCandidates, 0.5f);
  req.lengths = {std::vector<int32_t>(kCandidates, 1)};
  req.ids = {std::vector<int64_t>(kCandidates)};
  for (int i = 0; i < kCandidates; ++i) req.ids[0][i] = (i * 37) % 1000;
  req.weights = {{}};
  ASSERT_TRUE(ValidateRequest(*model, req.view()).ok());
  const auto error = [&] { return std::string(ValidateRequest(*model, req.view()).message()); };
  for (const int at : {0, 1, 63, 64, 65, 127, 128, 255, 256, 257, 299}) {
    SCOPED_TRACE(at);
    for (const int64_t ok : {int64_t{0}, int64_t{999}}) {
      req.ids[0][at] = ok;
      EXPECT_TRUE(ValidateRequest(*model, req.view()).ok());
    }
    for (const int64_t bad : {int64_t{1000}, int64_t{-1}, std::numeric_limits<int64_t>::min(),
                              std::numeric_limits<int64_t>::max()}) {
      req.ids[0][at] = bad;
      EXPECT_THAT(error(), HasSubstr(absl::StrCat("sparse feature \"f0\".ids[", at, "]: id ", bad,
                                                  " is out of range [0, 1000)")));
      if (at + 1 < kCandidates) {  // a later one too: the first is named
        req.ids[0][kCandidates - 1] = -5;
        EXPECT_THAT(error(), HasSubstr(absl::StrCat(".ids[", at, "]: id ", bad)));
        req.ids[0][kCandidates - 1] = 1;
      }
    }
    req.ids[0][at] = 3;

    // A bag too long before a negative one: the first is named, whichever kind.
    req.lengths[0][at] = 5;
    EXPECT_THAT(error(), HasSubstr(absl::StrCat(".lengths[", at, "]: 5 ids exceed")));
    req.lengths[0][kCandidates - 1] = -1;
    if (at + 1 < kCandidates) {
      EXPECT_THAT(error(), HasSubstr(absl::StrCat(".lengths[", at, "]: 5 ids exceed")));
    }
    req.lengths[0][at] = std::numeric_limits<int32_t>::min();
    EXPECT_THAT(error(), HasSubstr(absl::StrCat(".lengths[", at, "]: -2147483648 is negative")));
    req.lengths[0][at] = 1;
    req.lengths[0][kCandidates - 1] = 1;

    req.dense[2 * at + 1] = std::nanf("");
    EXPECT_THAT(error(), HasSubstr(absl::StrCat("dense[", 2 * at + 1, "] (candidate ", at)));
    req.dense[2 * at + 1] = 0.5f;
    ASSERT_TRUE(ValidateRequest(*model, req.view()).ok());
  }
}

// A table of no rows resolves no id.
TEST(ValidationBlocksTest, NoIdIsInATableOfNoRows) {
  RandomModelSpec spec;
  spec.table_rows = {1};
  auto model = MakeRandomModel(spec);
  OwnedRequest req = MakeRandomRequest(*model, RandomRequestSpec{});
  req.lengths[0] = {1, 0, 0, 0};
  req.ids[0] = {0};
  req.weights[0] = {};
  ASSERT_TRUE(ValidateRequest(*model, req.view()).ok());
  model->tables[0].num_rows = 0;
  EXPECT_THAT(std::string(ValidateRequest(*model, req.view()).message()),
              HasSubstr("ids[0]: id 0 is out of range [0, 0)"));
}

}  // namespace
}  // namespace rankd::engine
