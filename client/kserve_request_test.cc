#include "client/kserve_request.h"

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rankd::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Two candidates, two dense values each, a weighted per-candidate feature and
// a request-level one.
rankd::v1::ScoreRequest TwoCandidates() {
  rankd::v1::ScoreRequest r;
  r.set_model("mini");
  r.set_version(3);
  r.set_num_candidates(2);
  for (float v : {0.5f, -1.f, 2.f, 3.25f}) r.add_dense(v);
  auto* a = r.add_sparse();
  a->set_name("cat_0");
  for (int64_t id : {int64_t{7}, int64_t{1} << 40, int64_t{9}}) a->add_ids(id);
  for (int l : {1, 2}) a->add_lengths(l);
  for (float w : {1.f, 0.5f, 2.f}) a->add_weights(w);
  auto* u = r.add_sparse();
  u->set_name("user");
  u->add_ids(-4);
  u->add_lengths(1);
  return r;
}

template <typename T>
std::vector<T> FromBytes(const std::string& bytes) {
  std::vector<T> v(bytes.size() / sizeof(T));
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

std::vector<std::string> Names(const inference::ModelInferRequest& r) {
  std::vector<std::string> names;
  for (const auto& in : r.inputs()) names.push_back(in.name());
  return names;
}

TEST(KServeRequestTest, TypedTensorsCarryEveryField) {
  auto r = ToModelInferRequest(TwoCandidates(), /*raw=*/false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model_name(), "mini");
  EXPECT_EQ(r->model_version(), "3");
  EXPECT_EQ(r->raw_input_contents_size(), 0);
  EXPECT_THAT(Names(*r),
              ElementsAre("dense", "cat_0", "cat_0.lengths", "cat_0.weights", "user", "user.lengths"));
  const auto& dense = r->inputs(0);
  EXPECT_EQ(dense.datatype(), "FP32");
  EXPECT_THAT(dense.shape(), ElementsAre(2, 2));
  EXPECT_THAT(dense.contents().fp32_contents(), ElementsAre(0.5f, -1.f, 2.f, 3.25f));
  EXPECT_EQ(r->inputs(1).datatype(), "INT64");
  EXPECT_THAT(r->inputs(1).shape(), ElementsAre(3));
  EXPECT_THAT(r->inputs(1).contents().int64_contents(), ElementsAre(7, int64_t{1} << 40, 9));
  EXPECT_EQ(r->inputs(2).datatype(), "INT32");
  EXPECT_THAT(r->inputs(2).contents().int_contents(), ElementsAre(1, 2));
  EXPECT_THAT(r->inputs(3).contents().fp32_contents(), ElementsAre(1.f, 0.5f, 2.f));
  EXPECT_THAT(r->inputs(5).shape(), ElementsAre(1));  // request-level: [1]
  EXPECT_THAT(r->inputs(4).contents().int64_contents(), ElementsAre(-4));
}

TEST(KServeRequestTest, RawContentsAreOneLittleEndianBlobPerInput) {
  auto r = ToModelInferRequest(TwoCandidates(), /*raw=*/true);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->raw_input_contents_size(), r->inputs_size());
  for (const auto& in : r->inputs()) EXPECT_FALSE(in.has_contents()) << in.name();
  EXPECT_THAT(FromBytes<float>(r->raw_input_contents(0)), ElementsAre(0.5f, -1.f, 2.f, 3.25f));
  EXPECT_THAT(FromBytes<int64_t>(r->raw_input_contents(1)), ElementsAre(7, int64_t{1} << 40, 9));
  EXPECT_THAT(FromBytes<int32_t>(r->raw_input_contents(2)), ElementsAre(1, 2));
  EXPECT_THAT(FromBytes<float>(r->raw_input_contents(3)), ElementsAre(1.f, 0.5f, 2.f));
  EXPECT_THAT(r->inputs(0).shape(), ElementsAre(2, 2));
}

TEST(KServeRequestTest, NoDenseAndNewestVersionLeaveThemOut) {
  rankd::v1::ScoreRequest s = TwoCandidates();
  s.clear_dense();
  s.set_version(0);
  auto r = ToModelInferRequest(s, false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model_version(), "");
  EXPECT_EQ(r->inputs(0).name(), "cat_0");
}

TEST(KServeRequestTest, RefusesWhatKServeCannotCarry) {
  rankd::v1::ScoreRequest s = TwoCandidates();
  s.set_version_label("canary");
  EXPECT_THAT(ToModelInferRequest(s, true).status().message(), HasSubstr("version_label"));
  s = TwoCandidates();
  s.set_num_candidates(0);
  EXPECT_THAT(ToModelInferRequest(s, true).status().message(), HasSubstr("num_candidates"));
  s = TwoCandidates();
  s.add_dense(1);  // 5 values for 2 rows
  EXPECT_THAT(ToModelInferRequest(s, true).status().message(), HasSubstr("dense"));
}

inference::ModelInferResponse Scores(bool raw, std::vector<float> scores) {
  inference::ModelInferResponse r;
  r.set_model_name("mini");
  r.set_model_version("4");
  auto* out = r.add_outputs();
  out->set_name("scores");
  out->set_datatype("FP32");
  out->add_shape(static_cast<int64_t>(scores.size()));
  if (raw) {
    r.add_raw_output_contents()->assign(reinterpret_cast<const char*>(scores.data()),
                                        scores.size() * sizeof(float));
  } else {
    out->mutable_contents()->mutable_fp32_contents()->Add(scores.begin(), scores.end());
  }
  return r;
}

TEST(KServeRequestTest, ReadsTypedAndRawScores) {
  for (bool raw : {false, true}) {
    auto s = FromModelInferResponse(Scores(raw, {0.25f, 0.75f}));
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->version, 4);
    EXPECT_THAT(s->scores, ElementsAre(0.25f, 0.75f));
  }
}

TEST(KServeRequestTest, RefusesMalformedResponses) {
  auto r = Scores(false, {0.5f});
  r.set_model_version("four");
  EXPECT_THAT(FromModelInferResponse(r).status().message(), HasSubstr("model_version"));
  r = Scores(false, {0.5f});
  r.mutable_outputs(0)->set_name("probabilities");
  EXPECT_THAT(FromModelInferResponse(r).status().message(), HasSubstr("scores"));
  r = Scores(false, {0.5f});
  r.mutable_outputs(0)->set_shape(0, 2);
  EXPECT_THAT(FromModelInferResponse(r).status().message(), HasSubstr("2"));
  r = Scores(true, {0.5f, 1.f});
  r.mutable_raw_output_contents(0)->pop_back();
  EXPECT_THAT(FromModelInferResponse(r).status().message(), HasSubstr("raw_output_contents"));
  r = Scores(false, {});
  r.clear_outputs();
  EXPECT_THAT(FromModelInferResponse(r).status().message(), HasSubstr("outputs"));
}

}  // namespace
}  // namespace rankd::client
