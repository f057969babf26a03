#include "server/lifecycle/serving_config.h"

#include "gtest/gtest.h"

namespace rankd::server {
namespace {

TEST(ServingConfigTest, ParsesPolicyAndLabels) {
  auto c = ParseServingConfig(
      "version_policy { latest { num_versions: 2 } }\n"
      "version_labels { key: 'stable' value: 3 }\n",
      "m/serving.pbtxt");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(PolicyString(c->version_policy()), "latest 2");
  EXPECT_EQ(c->version_labels().at("stable"), 3);
}

TEST(ServingConfigTest, ErrorsNameTheFileAndField) {
  auto syntax = ParseServingConfig("version_policy { lates {} }", "m/serving.pbtxt");
  EXPECT_EQ(syntax.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(syntax.status().message().find("m/serving.pbtxt:1:"), std::string::npos)
      << syntax.status();
  auto empty = ParseServingConfig("version_policy { specific {} }", "p");
  EXPECT_NE(empty.status().message().find("version_policy.specific.versions"), std::string::npos);
  auto zero = ParseServingConfig("version_policy { specific { versions: [2, 0] } }", "p");
  EXPECT_NE(zero.status().message().find("versions[1]"), std::string::npos);
  auto label = ParseServingConfig("version_labels { key: 'a b' value: 1 }", "p");
  EXPECT_NE(label.status().message().find("\"a b\""), std::string::npos);
  auto value = ParseServingConfig("version_labels { key: 'ok' value: 0 }", "p");
  EXPECT_NE(value.status().message().find("version_labels[\"ok\"]"), std::string::npos);
}

TEST(ServingConfigTest, SelectVersions) {
  const std::set<int64_t> available = {1, 3, 4, 9};
  rankd::v1::VersionPolicy latest;  // unset: latest 1
  EXPECT_EQ(SelectVersions(latest, available), (std::set<int64_t>{9}));
  latest.mutable_latest()->set_num_versions(3);
  EXPECT_EQ(SelectVersions(latest, available), (std::set<int64_t>{3, 4, 9}));
  latest.mutable_latest()->set_num_versions(10);
  EXPECT_EQ(SelectVersions(latest, available), available);
  rankd::v1::VersionPolicy all;
  all.mutable_all();
  EXPECT_EQ(SelectVersions(all, available), available);
  EXPECT_EQ(PolicyString(all), "all");
  rankd::v1::VersionPolicy specific;
  specific.mutable_specific()->add_versions(3);
  specific.mutable_specific()->add_versions(5);
  EXPECT_EQ(SelectVersions(specific, available), (std::set<int64_t>{3}));
  EXPECT_EQ(PolicyString(specific), "specific 3,5");
  EXPECT_TRUE(SelectVersions(latest, {}).empty());
}

TEST(ServingConfigTest, ReadServingConfigMissingIsNotFound) {
  EXPECT_EQ(ReadServingConfig("/nonexistent/serving.pbtxt").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace rankd::server
