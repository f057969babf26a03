#include "server/request_conversion.h"

#include "engine/testing/test_models.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rankd::server {
namespace {

using ::testing::HasSubstr;

class ConversionTest : public ::testing::Test {
 protected:
  ConversionTest() {
    engine::testing::RandomModelSpec spec;
    spec.table_rows = {7, 11};
    model_ = engine::testing::MakeRandomModel(spec);
    req_.set_model("test");
    req_.set_num_candidates(2);
    for (int i = 0; i < 10; ++i) req_.add_dense(0.5f * i + 0.25f);
    // Sent in reverse order on purpose: features are matched by name.
    for (const char* name : {"f1", "f0"}) {
      auto* f = req_.add_sparse();
      f->set_name(name);
      f->add_ids(3);
      f->add_ids(4);
      f->add_ids(5);
      f->add_lengths(1);
      f->add_lengths(2);
    }
  }
  std::string Error() {
    auto r = ToEngineRequest(*model_, req_);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(r.status().message());
  }
  std::shared_ptr<engine::Model> model_;
  rankd::v1::ScoreRequest req_;
};

TEST_F(ConversionTest, MapsFeaturesByNameWithoutCopying) {
  auto r = ToEngineRequest(*model_, req_);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->features.size(), 2u);
  // Feature 0 of the model is the request's sparse[1]; its ids are a view.
  EXPECT_EQ(r->features[0].ids.data(), req_.sparse(1).ids().data());
  EXPECT_EQ(r->features[1].ids.data(), req_.sparse(0).ids().data());
  EXPECT_EQ(r->dense.data(), req_.dense().data());
}

// Config order (what clients send) takes the positional fast path; the result
// is the same mapping, and duplicates past the model's features are caught.
TEST_F(ConversionTest, MapsFeaturesInConfigOrder) {
  req_.mutable_sparse()->SwapElements(0, 1);  // now f0, f1
  auto r = ToEngineRequest(*model_, req_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->features[0].ids.data(), req_.sparse(0).ids().data());
  EXPECT_EQ(r->features[1].ids.data(), req_.sparse(1).ids().data());

  *req_.add_sparse() = req_.sparse(1);  // f0, f1, f1
  EXPECT_THAT(Error(), HasSubstr("sparse[2].name: feature \"f1\" appears twice (also sparse[1])"));
}

TEST_F(ConversionTest, UnknownFeature) {
  req_.mutable_sparse(0)->set_name("nope");
  EXPECT_THAT(Error(), HasSubstr("sparse[0].name: unknown feature \"nope\"; model \"test\" has: f0, f1"));
}

TEST_F(ConversionTest, DuplicateFeature) {
  req_.mutable_sparse(0)->set_name("f0");
  EXPECT_THAT(Error(), HasSubstr("sparse[1].name: feature \"f0\" appears twice (also sparse[0])"));
}

TEST_F(ConversionTest, MissingFeature) {
  req_.mutable_sparse()->RemoveLast();
  EXPECT_THAT(Error(), HasSubstr("sparse: feature \"f0\" is missing"));
}

TEST_F(ConversionTest, EngineChecksApply) {
  req_.add_dense(1.0f);
  EXPECT_THAT(Error(), HasSubstr("dense: has 11 values; expected 10"));
}

// A client's feature name is quoted cut to 128 bytes with its size, in both
// errors that quote it.
TEST_F(ConversionTest, HugeFeatureNamesAreQuotedCutShort) {
  const std::string huge(8 << 20, 'q');
  req_.mutable_sparse(0)->set_name(huge);
  std::string e = Error();
  EXPECT_LT(e.size(), 600u) << e.substr(0, 300);
  EXPECT_THAT(e, HasSubstr("unknown feature"));
  EXPECT_THAT(e, HasSubstr("(8388608 bytes)"));
  // A name that matches a feature, sent twice under it: the duplicate path.
  req_.mutable_sparse(0)->set_name("f0");
  e = Error();
  EXPECT_THAT(e, HasSubstr("appears twice"));
  EXPECT_LT(e.size(), 600u);
}

}  // namespace
}  // namespace rankd::server
