#include "loadtest/cli/cli.h"

#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "gtest/gtest.h"

ABSL_DECLARE_FLAG(std::string, mode);
ABSL_DECLARE_FLAG(std::string, model);
ABSL_DECLARE_FLAG(std::string, requests);
ABSL_DECLARE_FLAG(std::string, rate);
ABSL_DECLARE_FLAG(double, slo_latency_ms);
ABSL_DECLARE_FLAG(double, duration_s);
ABSL_DECLARE_FLAG(int, threads);
ABSL_DECLARE_FLAG(int64_t, spin_us);
ABSL_DECLARE_FLAG(int, slo_recheck);
ABSL_DECLARE_FLAG(double, drain_s);
ABSL_DECLARE_FLAG(int64_t, model_version);
ABSL_DECLARE_FLAG(std::string, version_label);
ABSL_DECLARE_FLAG(std::string, response_log);
ABSL_DECLARE_FLAG(std::string, target);
ABSL_DECLARE_FLAG(std::string, protocol);
ABSL_DECLARE_FLAG(std::string, http_target);
ABSL_DECLARE_FLAG(int, http_connections);

namespace rankd::loadtest {
namespace {

TEST(ParseNumberListTest, ValuesListsAndRanges) {
  EXPECT_EQ(*ParseNumberList("1000", "--rate"), std::vector<double>{1000});
  EXPECT_EQ(*ParseNumberList("100, 250.5,1e3", "--rate"), (std::vector<double>{100, 250.5, 1000}));
  EXPECT_EQ(*ParseNumberList("100:400:100", "--rate"), (std::vector<double>{100, 200, 300, 400}));
  EXPECT_EQ(*ParseNumberList("100:400:+150", "--rate"), (std::vector<double>{100, 250, 400}));
  EXPECT_EQ(*ParseNumberList("1:64:x2", "--rate"), (std::vector<double>{1, 2, 4, 8, 16, 32, 64}));
  EXPECT_EQ(*ParseIntList("1:8:x2", "--concurrency"), (std::vector<int>{1, 2, 4, 8}));
}

TEST(ParseNumberListTest, ErrorsNameTheFlag) {
  for (const char* bad : {"", "0", "-5", "abc", "1,,2", "nan", "inf", "10:1:1", "1:10:0",
                          "1:10:x1", "1:10", "1:2:3:4", "1:100000:1"}) {
    auto v = ParseNumberList(bad, "--rate");
    ASSERT_FALSE(v.ok()) << "'" << bad << "'";
    EXPECT_EQ(v.status().message().rfind("--rate: ", 0), 0u) << v.status();
  }
  auto frac = ParseIntList("1.5", "--concurrency");
  ASSERT_FALSE(frac.ok());
  EXPECT_EQ(frac.status().message().rfind("--concurrency: ", 0), 0u);
}

TEST(ParseModeTest, KnownModes) {
  EXPECT_EQ(*ParseMode("open"), Mode::kOpen);
  EXPECT_EQ(*ParseMode("closed"), Mode::kClosed);
  EXPECT_EQ(*ParseMode("slo"), Mode::kSlo);
  auto bad = ParseMode("burst");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--mode: must be open, closed or slo"), std::string::npos);
}

class ConfigFromFlagsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::SetFlag(&FLAGS_mode, "open");
    absl::SetFlag(&FLAGS_model, "mini");
    absl::SetFlag(&FLAGS_requests, "");
    absl::SetFlag(&FLAGS_rate, "1000");
    absl::SetFlag(&FLAGS_slo_latency_ms, 0);
    absl::SetFlag(&FLAGS_duration_s, 10);
    absl::SetFlag(&FLAGS_threads, 0);
    absl::SetFlag(&FLAGS_spin_us, 200);
    absl::SetFlag(&FLAGS_slo_recheck, 2);
    absl::SetFlag(&FLAGS_drain_s, 10);
    absl::SetFlag(&FLAGS_model_version, 0);
    absl::SetFlag(&FLAGS_version_label, "");
    absl::SetFlag(&FLAGS_response_log, "");
    absl::SetFlag(&FLAGS_target, "localhost:8500");
    absl::SetFlag(&FLAGS_protocol, "rankd");
    absl::SetFlag(&FLAGS_http_target, "");
    absl::SetFlag(&FLAGS_http_connections, 64);
  }
  static std::string Error() {
    auto c = ConfigFromFlags();
    return c.ok() ? "ok" : std::string(c.status().message());
  }
};

TEST_F(ConfigFromFlagsTest, Defaults) {
  auto c = ConfigFromFlags();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->mode, Mode::kOpen);
  EXPECT_GE(c->threads, 1);
  EXPECT_EQ(c->rates, std::vector<double>{1000});
}

TEST_F(ConfigFromFlagsTest, BadValuesNameTheirFlag) {
  absl::SetFlag(&FLAGS_mode, "slo");
  EXPECT_EQ(Error().rfind("--slo_latency_ms: required", 0), 0u) << Error();
  absl::SetFlag(&FLAGS_slo_latency_ms, 5);
  absl::SetFlag(&FLAGS_rate, "100,200");
  EXPECT_EQ(Error().rfind("--rate: with --mode slo", 0), 0u) << Error();
  SetUp();
  absl::SetFlag(&FLAGS_duration_s, 0);
  EXPECT_EQ(Error().rfind("--duration_s: ", 0), 0u) << Error();
  SetUp();
  absl::SetFlag(&FLAGS_model, "");
  EXPECT_EQ(Error().rfind("--requests / --model: ", 0), 0u) << Error();
  absl::SetFlag(&FLAGS_requests, "a.jsonl");
  absl::SetFlag(&FLAGS_model, "mini");
  EXPECT_EQ(Error().rfind("--requests / --model: ", 0), 0u) << Error();
  SetUp();
  absl::SetFlag(&FLAGS_threads, -1);
  EXPECT_EQ(Error().rfind("--threads: ", 0), 0u) << Error();
  SetUp();
  absl::SetFlag(&FLAGS_spin_us, -5);
  EXPECT_EQ(Error().rfind("--spin_us: ", 0), 0u) << Error();
  SetUp();
  absl::SetFlag(&FLAGS_slo_recheck, 11);
  EXPECT_EQ(Error().rfind("--slo_recheck: ", 0), 0u) << Error();
  absl::SetFlag(&FLAGS_slo_recheck, -1);
  EXPECT_EQ(Error().rfind("--slo_recheck: ", 0), 0u) << Error();
  SetUp();
  absl::SetFlag(&FLAGS_drain_s, -1);
  EXPECT_EQ(Error().rfind("--drain_s: ", 0), 0u) << Error();
  absl::SetFlag(&FLAGS_drain_s, 601);
  EXPECT_EQ(Error().rfind("--drain_s: ", 0), 0u) << Error();
  SetUp();
  absl::SetFlag(&FLAGS_mode, "nope");
  EXPECT_EQ(Error().rfind("--mode: ", 0), 0u) << Error();
}

TEST_F(ConfigFromFlagsTest, VersionLabelAndResponseLog) {
  absl::SetFlag(&FLAGS_version_label, "canary");
  absl::SetFlag(&FLAGS_response_log, "/tmp/calls.csv");
  auto c = ConfigFromFlags();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->version_label, "canary");
  EXPECT_EQ(c->model_version, 0);
  EXPECT_EQ(c->response_log_path, "/tmp/calls.csv");
  // The server reads the label only when the version is 0.
  absl::SetFlag(&FLAGS_model_version, 2);
  EXPECT_EQ(Error().rfind("--version_label: not with --model_version", 0), 0u) << Error();
  // Replayed requests carry their own.
  absl::SetFlag(&FLAGS_model_version, 0);
  absl::SetFlag(&FLAGS_model, "");
  absl::SetFlag(&FLAGS_requests, "a.jsonl");
  EXPECT_EQ(Error().rfind("--version_label: only for generated requests", 0), 0u) << Error();
}

TEST_F(ConfigFromFlagsTest, Protocols) {
  auto c = ConfigFromFlags();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->protocol, Protocol::kRankd);
  absl::SetFlag(&FLAGS_protocol, "kserve");
  c = ConfigFromFlags();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->protocol, Protocol::kKServe);
  absl::SetFlag(&FLAGS_version_label, "canary");
  EXPECT_EQ(Error().rfind("--version_label: not with --protocol kserve", 0), 0u) << Error();
  SetUp();
  // http: the gRPC target's host on port 8501, unless given.
  absl::SetFlag(&FLAGS_protocol, "http");
  absl::SetFlag(&FLAGS_target, "[::1]:9000");
  c = ConfigFromFlags();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->http_target, "[::1]:8501");
  absl::SetFlag(&FLAGS_http_target, "10.0.0.2:80");
  c = ConfigFromFlags();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->http_target, "10.0.0.2:80");
  absl::SetFlag(&FLAGS_http_target, "");
  absl::SetFlag(&FLAGS_target, "unix:///run/rankd.sock");
  EXPECT_EQ(Error().rfind("--http_target: ", 0), 0u) << Error();
  SetUp();
  absl::SetFlag(&FLAGS_http_connections, 0);
  EXPECT_EQ(Error().rfind("--http_connections: ", 0), 0u) << Error();
  SetUp();
  absl::SetFlag(&FLAGS_protocol, "grpc");
  EXPECT_EQ(Error().rfind("--protocol: ", 0), 0u) << Error();
}

}  // namespace
}  // namespace rankd::loadtest
