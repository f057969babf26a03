#include "server/http/kserve_json.h"

#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rankd::server {
namespace {

using ::testing::HasSubstr;

absl::Status Parse(const std::string& body, inference::ModelInferRequest* out) {
  return ParseKServeInferJson(body, out);
}

std::string ParseError(const std::string& body) {
  inference::ModelInferRequest r;
  absl::Status s = Parse(body, &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << body;
  return std::string(s.message());
}

TEST(KServeJsonTest, ReadsEveryFieldInAnyOrder) {
  inference::ModelInferRequest r;
  ASSERT_TRUE(Parse(R"({"parameters": {"a": [1, {"b": null}], "c": "d"},
      "inputs": [
        {"data": [[0.5, 1], [2, -3.25]], "shape": [2, 2], "datatype": "FP32", "name": "dense"},
        {"name": "cat_0", "datatype": "INT64", "shape": [3],
         "data": [9007199254740993, -1, 0], "parameters": {"x": 1}},
        {"name": "cat_0.lengths", "datatype": "INT32", "shape": [2], "data": [2, 1]}],
      "outputs": [{"name": "scores", "parameters": {}}],
      "id": "req-7"})",
                    &r)
                  .ok());
  EXPECT_EQ(r.id(), "req-7");
  ASSERT_EQ(r.inputs_size(), 3);
  const auto& dense = r.inputs(0);
  EXPECT_EQ(dense.name(), "dense");
  EXPECT_EQ(dense.datatype(), "FP32");
  EXPECT_THAT(dense.shape(), ::testing::ElementsAre(2, 2));
  EXPECT_THAT(dense.contents().fp32_contents(), ::testing::ElementsAre(0.5f, 1.0f, 2.0f, -3.25f));
  // 2^53 + 1: an INT64 survives exactly (never through a double).
  EXPECT_THAT(r.inputs(1).contents().int64_contents(),
              ::testing::ElementsAre(9007199254740993LL, -1, 0));
  EXPECT_THAT(r.inputs(2).contents().int_contents(), ::testing::ElementsAre(2, 1));
  ASSERT_EQ(r.outputs_size(), 1);
  EXPECT_EQ(r.outputs(0).name(), "scores");
}

TEST(KServeJsonTest, RandomTensorsRoundTripBitForBit) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> value(-1e6f, 1e6f);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> floats(1 + rng() % 200);
    std::vector<int64_t> ids(1 + rng() % 200);
    std::string data_f, data_i;
    for (float& f : floats) {
      f = value(rng) / static_cast<float>(1 + rng() % 1000);
      if (!data_f.empty()) data_f += ",";
      AppendFloat(f, &data_f);
    }
    for (int64_t& id : ids) {
      id = static_cast<int64_t>(rng());
      absl::StrAppend(&data_i, data_i.empty() ? "" : ",", id);
    }
    inference::ModelInferRequest r;
    ASSERT_TRUE(Parse(absl::StrCat(R"({"inputs":[{"name":"f","datatype":"FP32","shape":[)",
                                   floats.size(), R"(],"data":[)", data_f,
                                   R"(]},{"name":"i","datatype":"INT64","shape":[)", ids.size(),
                                   R"(],"data":[)", data_i, "]}]}"),
                      &r)
                    .ok());
    ASSERT_EQ(r.inputs(0).contents().fp32_contents_size(), static_cast<int>(floats.size()));
    for (size_t k = 0; k < floats.size(); ++k) {
      const float got = r.inputs(0).contents().fp32_contents(k);
      EXPECT_EQ(std::memcmp(&got, &floats[k], sizeof(float)), 0) << floats[k] << " " << got;
    }
    EXPECT_THAT(r.inputs(1).contents().int64_contents(), ::testing::ElementsAreArray(ids));
  }
}

TEST(KServeJsonTest, ErrorsNameTheInputAndTheField) {
  EXPECT_THAT(ParseError("[1]"), HasSubstr("must be a JSON object"));
  EXPECT_THAT(ParseError("{\"inputs\": [}"), HasSubstr("not valid JSON"));
  EXPECT_THAT(ParseError("{\"inputz\": []}"), HasSubstr("unknown field \"inputz\""));
  EXPECT_THAT(ParseError(R"({"inputs":[{"name":"a","datatype":"FP32","shape":[1]}]})"),
              HasSubstr("inputs[0] (\"a\"): missing \"data\""));
  EXPECT_THAT(ParseError(R"({"inputs":[{"name":"a","shape":[1],"data":[1]}]})"),
              HasSubstr("missing \"datatype\""));
  EXPECT_THAT(
      ParseError(R"({"inputs":[{"name":"ok","datatype":"INT32","shape":[1],"data":[1]},
                               {"name":"b","datatype":"INT64","shape":[2],"data":[1,2.5]}]})"),
      HasSubstr("inputs[1] (\"b\"): INT64 \"data\" holds a non-integer number"));
  EXPECT_THAT(ParseError(R"({"inputs":[{"name":"c","datatype":"INT32","shape":[1],
                                       "data":[2147483648]}]})"),
              HasSubstr("out of INT32 range"));
  EXPECT_THAT(
      ParseError(R"({"inputs":[{"name":"d","datatype":"FP32","shape":[1],"data":[1e39]}]})"),
      HasSubstr("out of FP32 range"));
  EXPECT_THAT(ParseError(R"({"inputs":[{"name":"e","datatype":"INT64","shape":[1],
                                       "data":[18446744073709551615]}]})"),
              HasSubstr("out of range"));
  EXPECT_THAT(
      ParseError(R"({"inputs":[{"name":"f","datatype":"FP32","shape":[1],"data":[true]}]})"),
      HasSubstr("\"data\" holds a boolean; numbers expected"));
  EXPECT_THAT(
      ParseError(R"({"inputs":[{"name":"g","datatype":"FP32","shape":[1.5],"data":[1]}]})"),
      HasSubstr("\"shape\" holds a non-integer number"));
  EXPECT_THAT(ParseError(R"({"inputs":[{"name":"h","datatype":"FP32","shape":[1],"data":[1],
                                       "parameters":{"binary_data_size":4}}]})"),
              HasSubstr("binary tensor data extension"));
  EXPECT_THAT(ParseError(R"({"inputs":{"name":"x"}})"), HasSubstr("\"inputs\" is an object"));
  EXPECT_THAT(ParseError(R"({"id": 5})"), HasSubstr("\"id\" is a number"));
}

TEST(KServeJsonTest, NestingIsBoundedWithoutRecursion) {
  // Deep enough to overflow a recursive parser's stack; refused at the bound.
  const int depth = 200000;
  std::string deep = R"({"inputs":[{"name":"a","datatype":"FP32","shape":[1],"data":)";
  deep += std::string(depth, '[') + "1" + std::string(depth, ']') + "}]}";
  EXPECT_THAT(ParseError(deep), HasSubstr(absl::StrCat("more than ", kMaxJsonDepth, " deep")));
  std::string deep_params = R"({"parameters":{"a":)" + std::string(depth, '[') +
                            std::string(depth, ']') + "}}";
  EXPECT_THAT(ParseError(deep_params), HasSubstr("deep"));
}

TEST(KServeJsonTest, LongNamesAreCutInErrors) {
  const std::string name(100000, 'n');
  const std::string message =
      ParseError(absl::StrCat(R"({"inputs":[{"name":")", name, R"(","shape":[1],"data":[1]}]})"));
  EXPECT_LT(message.size(), 400u);
  EXPECT_THAT(message, HasSubstr("(100000 bytes)"));
}

TEST(KServeJsonTest, ResponseReadsBackBitForBit) {
  const std::vector<float> scores = {0.1f, 1.0f / 3.0f, 1e-30f, 0.99999994f, 0.0f};
  const std::string body = KServeInferResponseJson("mini", 3, "id\"1", scores);
  EXPECT_THAT(body, HasSubstr(R"("model_name":"mini","model_version":"3","id":"id\"1")"));
  EXPECT_THAT(body, HasSubstr(R"("name":"scores","datatype":"FP32","shape":[5],"data":[)"));
  // Feed the data back through the request reader as an FP32 tensor.
  const size_t start = body.find("\"data\":[") + 8;
  const std::string data = body.substr(start, body.find(']', start) - start);
  inference::ModelInferRequest r;
  ASSERT_TRUE(Parse(absl::StrCat(R"({"inputs":[{"name":"s","datatype":"FP32","shape":[5],"data":[)",
                                 data, "]}]}"),
                    &r)
                  .ok());
  for (size_t i = 0; i < scores.size(); ++i) {
    const float got = r.inputs(0).contents().fp32_contents(i);
    EXPECT_EQ(std::memcmp(&got, &scores[i], sizeof(float)), 0) << i;
  }
  EXPECT_EQ(KServeInferResponseJson("m", 1, "", {}).find("\"id\""), std::string::npos);
}

TEST(KServeJsonTest, MetadataHasNumericShapes) {
  inference::ModelMetadataResponse m;
  m.set_name("mini");
  m.add_versions("1");
  m.set_platform("rankd_cpu");
  auto* in = m.add_inputs();
  in->set_name("dense");
  in->set_datatype("FP32");
  in->add_shape(-1);
  in->add_shape(13);
  EXPECT_EQ(KServeModelMetadataJson(m),
            R"({"inputs":[{"datatype":"FP32","name":"dense","shape":[-1,13]}],"name":"mini",)"
            R"("outputs":[],"platform":"rankd_cpu","versions":["1"]})");
  EXPECT_EQ(ErrorJson("a \"b\"\n"), R"({"error":"a \"b\"\n"})");
}

}  // namespace
}  // namespace rankd::server
