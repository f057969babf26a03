#include "server/kserve_conversion.h"

#include <cstring>
#include <string>

#include "engine/testing/test_models.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rankd::server {
namespace {

using inference::ModelInferRequest;
using ::testing::HasSubstr;

class KServeConversionTest : public ::testing::Test {
 protected:
  KServeConversionTest() {
    engine::testing::RandomModelSpec spec;
    spec.table_rows = {7, 11};
    model_ = engine::testing::MakeRandomModel(spec);  // 5 dense, features f0 and f1
    req_.set_model_name("test");
    auto* dense = AddInput("dense", "FP32", {2, 5});
    for (int i = 0; i < 10; ++i) dense->mutable_contents()->add_fp32_contents(0.5f * i + 0.25f);
    for (const char* name : {"f1", "f0"}) {  // any order: matched by name
      auto* ids = AddInput(name, "INT64", {3});
      for (int64_t id : {3, 4, 5}) ids->mutable_contents()->add_int64_contents(id);
      auto* lengths = AddInput(std::string(name) + ".lengths", "INT32", {2});
      lengths->mutable_contents()->add_int_contents(1);
      lengths->mutable_contents()->add_int_contents(2);
    }
  }
  ModelInferRequest::InferInputTensor* AddInput(const std::string& name, const char* datatype,
                                                std::initializer_list<int64_t> shape) {
    auto* t = req_.add_inputs();
    t->set_name(name);
    t->set_datatype(datatype);
    for (int64_t d : shape) t->add_shape(d);
    return t;
  }
  ModelInferRequest::InferInputTensor* Input(const std::string& name) {
    for (auto& t : *req_.mutable_inputs()) {
      if (t.name() == name) return &t;
    }
    return nullptr;
  }
  // Moves every input's typed elements into raw_input_contents, each entry
  // starting `offset` bytes into its string (0: aligned as parsed; 1: not).
  void MakeRaw() {
    for (auto& t : *req_.mutable_inputs()) {
      const auto& c = t.contents();
      std::string bytes;
      if (c.fp32_contents_size() > 0) {
        bytes.assign(reinterpret_cast<const char*>(c.fp32_contents().data()),
                     4 * c.fp32_contents_size());
      } else if (c.int64_contents_size() > 0) {
        bytes.assign(reinterpret_cast<const char*>(c.int64_contents().data()),
                     8 * c.int64_contents_size());
      } else {
        bytes.assign(reinterpret_cast<const char*>(c.int_contents().data()),
                     4 * c.int_contents_size());
      }
      req_.add_raw_input_contents(bytes);
      t.clear_contents();
    }
  }
  std::string Error() {
    KServeRequest out;
    absl::Status s = ToEngineRequest(*model_, req_, {}, &out);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    return std::string(s.message());
  }
  std::shared_ptr<engine::Model> model_;
  ModelInferRequest req_;
};

TEST_F(KServeConversionTest, TypedContentsAreViewedWhereTheyLie) {
  KServeRequest out;
  ASSERT_TRUE(ToEngineRequest(*model_, req_, {}, &out).ok());
  EXPECT_FALSE(out.raw);
  EXPECT_EQ(out.request.num_candidates, 2);
  EXPECT_EQ(out.request.dense.data(), Input("dense")->contents().fp32_contents().data());
  EXPECT_EQ(out.request.features[0].ids.data(), Input("f0")->contents().int64_contents().data());
  EXPECT_EQ(out.request.features[1].lengths.data(),
            Input("f1.lengths")->contents().int_contents().data());
  EXPECT_TRUE(out.request.features[0].weights.empty());
  EXPECT_TRUE(out.copies.empty());
}

TEST_F(KServeConversionTest, RawContentsGiveTheSameRequest) {
  KServeRequest typed;
  ASSERT_TRUE(ToEngineRequest(*model_, req_, {}, &typed).ok());
  const std::vector<float> dense(typed.request.dense.begin(), typed.request.dense.end());
  const std::vector<int64_t> ids(typed.request.features[1].ids.begin(),
                                 typed.request.features[1].ids.end());
  MakeRaw();
  KServeRequest raw;
  absl::Status s = ToEngineRequest(*model_, req_, {}, &raw);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(raw.raw);
  EXPECT_EQ(std::vector<float>(raw.request.dense.begin(), raw.request.dense.end()), dense);
  EXPECT_EQ(std::vector<int64_t>(raw.request.features[1].ids.begin(),
                                 raw.request.features[1].ids.end()),
            ids);
}

TEST(KServeRawViewTest, MisalignedBytesAreCopiedAligned) {
  alignas(8) char buffer[1 + 3 * 8];
  const int64_t ids[3] = {3, -4, int64_t{1} << 40};
  std::memcpy(buffer + 1, ids, sizeof(ids));
  std::list<std::vector<int64_t>> copies;
  auto misaligned = ViewOrCopy<int64_t>(absl::string_view(buffer + 1, sizeof(ids)), &copies);
  ASSERT_EQ(copies.size(), 1u);
  ASSERT_EQ(misaligned.size(), 3u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(misaligned.data()) % alignof(int64_t), 0u);
  EXPECT_EQ(std::vector<int64_t>(misaligned.begin(), misaligned.end()),
            std::vector<int64_t>(ids, ids + 3));
  alignas(8) char aligned[sizeof(ids)];
  std::memcpy(aligned, ids, sizeof(ids));
  auto view = ViewOrCopy<int64_t>(absl::string_view(aligned, sizeof(ids)), &copies);
  EXPECT_EQ(static_cast<const void*>(view.data()), static_cast<const void*>(aligned));
  EXPECT_EQ(copies.size(), 1u);  // no second copy
}

TEST_F(KServeConversionTest, SharedBagsWeightsAndNoDense) {
  auto* w = AddInput("f0.weights", "FP32", {3});
  for (float v : {0.5f, 1.0f, 2.0f}) w->mutable_contents()->add_fp32_contents(v);
  auto* lengths = Input("f1.lengths");  // one bag shared by both candidates
  lengths->set_shape(0, 1);
  lengths->mutable_contents()->clear_int_contents();
  lengths->mutable_contents()->add_int_contents(3);
  KServeRequest out;
  absl::Status s = ToEngineRequest(*model_, req_, {}, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(out.request.features[0].weights.size(), 3u);
  EXPECT_EQ(out.request.features[1].lengths.size(), 1u);
}

TEST_F(KServeConversionTest, ErrorsNameTheTensorAndTheReason) {
  ModelInferRequest good = req_;
  auto reset = [&] { req_ = good; };
  AddInput("nope", "FP32", {1});
  EXPECT_THAT(Error(), AllOf(HasSubstr("input \"nope\": unknown tensor"), HasSubstr("f0.lengths")));
  reset();
  AddInput("f0", "INT64", {0});
  EXPECT_THAT(Error(), HasSubstr("input \"f0\": appears twice"));
  reset();
  Input("dense")->set_datatype("FP64");
  EXPECT_THAT(Error(), HasSubstr("input \"dense\": datatype \"FP64\", expected FP32"));
  reset();
  Input("f0")->add_shape(1);
  EXPECT_THAT(Error(), HasSubstr("input \"f0\": shape has 2 dimensions, expected 1"));
  reset();
  Input("dense")->set_shape(1, 4);
  EXPECT_THAT(Error(), HasSubstr("shape[1] is 4; model \"test\" has 5 dense features"));
  reset();
  Input("dense")->set_shape(0, -3);
  EXPECT_THAT(Error(), HasSubstr("shape[0] is -3"));
  reset();
  Input("f0")->set_shape(0, 4);
  EXPECT_THAT(Error(), HasSubstr("input \"f0\": shape has 4 elements, contents.int64_contents has 3"));
  reset();
  Input("f0.lengths")->mutable_contents()->add_int64_contents(1);
  EXPECT_THAT(Error(), HasSubstr("elements belong in contents.int_contents, got contents.int64_contents"));
  reset();
  req_.mutable_inputs()->DeleteSubrange(0, 1);  // dense
  EXPECT_THAT(Error(), HasSubstr("input \"dense\" is missing"));
  reset();
  req_.mutable_inputs()->DeleteSubrange(2, 1);  // f1.lengths
  EXPECT_THAT(Error(), HasSubstr("input \"f1.lengths\" is missing"));
  reset();
  req_.add_outputs()->set_name("probabilities");
  EXPECT_THAT(Error(), HasSubstr("outputs[0]: unknown output \"probabilities\""));
  reset();
  Input("f0.lengths")->mutable_contents()->set_int_contents(1, 5);  // 1 + 5 != 3 ids
  EXPECT_THAT(Error(), HasSubstr("f0"));  // engine validation, naming the feature
  reset();
  MakeRaw();
  req_.mutable_raw_input_contents()->RemoveLast();
  EXPECT_THAT(Error(), HasSubstr("raw_input_contents has 4 entries for 5 inputs"));
  reset();
  MakeRaw();
  req_.mutable_raw_input_contents(0)->append("1234");
  EXPECT_THAT(Error(), HasSubstr("input \"dense\": raw_input_contents[0] has 44 bytes"));
  reset();
  MakeRaw();
  Input("f0")->mutable_contents()->add_int64_contents(1);
  EXPECT_THAT(Error(), HasSubstr("input \"f0\": contents set while the request uses raw"));
}

TEST(KServeVersionTest, EmptyIsLatestAndOnlyPositiveIntegersParse) {
  EXPECT_EQ(*ParseKServeVersion(""), 0);
  EXPECT_EQ(*ParseKServeVersion("12"), 12);
  for (const char* bad : {"0", "-1", "v1", "1.0", " 1", "99999999999999999999"}) {
    auto v = ParseKServeVersion(bad);
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_THAT(std::string(v.status().message()), HasSubstr("model_version")) << bad;
  }
}

TEST(KServeResponseTest, TypedAndRawScoresLandInTheResponse) {
  for (bool raw : {false, true}) {
    inference::ModelInferResponse r;
    absl::Span<float> scores = PrepareKServeResponse("m", 3, "req-7", 3, raw, &r);
    ASSERT_EQ(scores.size(), 3u);
    scores[0] = 0.25f, scores[1] = 0.5f, scores[2] = 0.75f;
    EXPECT_EQ(r.model_name(), "m");
    EXPECT_EQ(r.model_version(), "3");
    EXPECT_EQ(r.id(), "req-7");
    ASSERT_EQ(r.outputs_size(), 1);
    EXPECT_EQ(r.outputs(0).name(), "scores");
    EXPECT_EQ(r.outputs(0).datatype(), "FP32");
    ASSERT_EQ(r.outputs(0).shape_size(), 1);
    EXPECT_EQ(r.outputs(0).shape(0), 3);
    std::vector<float> got(3);
    if (raw) {
      ASSERT_EQ(r.raw_output_contents_size(), 1);
      EXPECT_FALSE(r.outputs(0).has_contents());
      ASSERT_EQ(r.raw_output_contents(0).size(), 12u);
      std::memcpy(got.data(), r.raw_output_contents(0).data(), 12);
    } else {
      EXPECT_EQ(r.raw_output_contents_size(), 0);
      got.assign(r.outputs(0).contents().fp32_contents().begin(),
                 r.outputs(0).contents().fp32_contents().end());
    }
    EXPECT_EQ(got, (std::vector<float>{0.25f, 0.5f, 0.75f})) << "raw " << raw;
  }
}

TEST(KServeMetadataTest, ListsEveryInputWithItsShape) {
  engine::testing::RandomModelSpec spec;
  spec.table_rows = {7, 11};
  spec.request_level_features = {1};
  auto model = engine::testing::MakeRandomModel(spec);
  inference::ModelMetadataResponse r;
  KServeModelInputs(*model, &r);
  std::vector<std::string> got;
  for (const auto& t : r.inputs()) {
    std::string shape;
    for (int64_t d : t.shape()) shape += std::to_string(d) + ",";
    got.push_back(t.name() + " " + t.datatype() + " " + shape);
  }
  EXPECT_EQ(got, (std::vector<std::string>{
                     "dense FP32 -1,5,", "f0 INT64 -1,", "f0.lengths INT32 -1,",
                     "f0.weights FP32 -1,", "f1 INT64 -1,", "f1.lengths INT32 1,",
                     "f1.weights FP32 -1,"}));
  ASSERT_EQ(r.outputs_size(), 1);
  EXPECT_EQ(r.outputs(0).name(), "scores");
}

}  // namespace
}  // namespace rankd::server
