#include "loadtest/metrics/prometheus_text.h"

#include <cmath>

#include "gtest/gtest.h"

namespace rankd::loadtest {
namespace {

// What prometheus-cpp writes for rankd (abridged), plus format corners.
constexpr char kBefore[] = R"(# HELP rankd_requests_total Score RPCs finished, by model and gRPC status code.
# TYPE rankd_requests_total counter
rankd_requests_total{code="OK",model="mini"} 100
rankd_requests_total{code="NOT_FOUND",model=""} 2
rankd_requests_total{code="OK",model="other"} 7
# TYPE rankd_queue_duration_seconds histogram
rankd_queue_duration_seconds_count{model="mini"} 100
rankd_queue_duration_seconds_sum{model="mini"} 0.01
rankd_queue_duration_seconds_bucket{model="mini",le="0.0001"} 90
rankd_queue_duration_seconds_bucket{model="mini",le="0.001"} 100
rankd_queue_duration_seconds_bucket{model="mini",le="+Inf"} 100
rankd_request_duration_seconds_count{model="mini"} 102
rankd_request_duration_seconds_sum{model="mini"} 0.0102
rankd_compute_duration_seconds_count{model="mini"} 50
rankd_compute_duration_seconds_sum{model="mini"} 0.005
rankd_batch_candidates_count{model="mini"} 50
rankd_batch_candidates_sum{model="mini"} 100
rankd_batch_requests_count{model="mini"} 50
rankd_batch_requests_sum{model="mini"} 100
rankd_candidates_total{model="mini"} 100
)";

constexpr char kAfter[] = R"(rankd_requests_total{code="OK",model="mini"} 1100
rankd_requests_total{code="INVALID_ARGUMENT",model="mini"} 5
rankd_requests_total{code="NOT_FOUND",model=""} 12
rankd_requests_total{code="OK",model="other"} 900
rankd_queue_duration_seconds_count{model="mini"} 1100
rankd_queue_duration_seconds_sum{model="mini"} 0.21
rankd_queue_duration_seconds_bucket{model="mini",le="0.0001"} 590
rankd_queue_duration_seconds_bucket{model="mini",le="0.001"} 1090
rankd_queue_duration_seconds_bucket{model="mini",le="+Inf"} 1100
rankd_request_duration_seconds_count{model="mini"} 1117
rankd_request_duration_seconds_sum{model="mini"} 0.5102
rankd_compute_duration_seconds_count{model="mini"} 550
rankd_compute_duration_seconds_sum{model="mini"} 0.105
rankd_batch_candidates_count{model="mini"} 550
rankd_batch_candidates_sum{model="mini"} 4100
rankd_batch_requests_count{model="mini"} 550
rankd_batch_requests_sum{model="mini"} 1100
rankd_candidates_total{model="mini"} 4100
rankd_ids_missing_total{model="mini",table="t0"} 3
)";

TEST(PromSnapshotTest, ParsesSamplesLabelsAndSpecialValues) {
  auto s = PromSnapshot::Parse(
      "# HELP x help text with \"quotes\"\n"
      "\n"
      "plain 1.5\n"
      "with_ts{a=\"1\"} 2 1700000000000\n"
      "esc{path=\"C:\\\\dir\",q=\"say \\\"hi\\\"\",nl=\"a\\nb\",} 3\n"
      "  spaced { a = \"x\" , b=\"y\" }   -4e-3  \n"
      "inf{le=\"+Inf\"} +Inf\n"
      "ninf -Inf\n"
      "nan NaN\n");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->samples().size(), 7u);
  EXPECT_EQ(s->samples()[0].name, "plain");
  EXPECT_EQ(s->samples()[0].value, 1.5);
  EXPECT_EQ(s->samples()[1].labels.at("a"), "1");
  EXPECT_EQ(s->samples()[2].labels.at("path"), "C:\\dir");
  EXPECT_EQ(s->samples()[2].labels.at("q"), "say \"hi\"");
  EXPECT_EQ(s->samples()[2].labels.at("nl"), "a\nb");
  EXPECT_EQ(s->samples()[3].name, "spaced");
  EXPECT_EQ(s->samples()[3].labels.at("b"), "y");
  EXPECT_DOUBLE_EQ(s->samples()[3].value, -4e-3);
  EXPECT_TRUE(std::isinf(s->samples()[4].value));
  EXPECT_LT(s->samples()[5].value, 0);
  EXPECT_TRUE(std::isnan(s->samples()[6].value));
}

TEST(PromSnapshotTest, ErrorsNameTheLine) {
  for (const char* bad : {"ok 1\n{x=\"1\"} 2\n", "ok 1\nm{x=1} 2\n", "ok 1\nm{x=\"1\" 2\n",
                          "ok 1\nm one\n", "ok 1\nm 1 2 3\n", "ok 1\nm{x=\"1\",x=\"2\"} 1\n",
                          "ok 1\nm\n"}) {
    auto s = PromSnapshot::Parse(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.status().message().find("line 2"), std::string::npos) << s.status();
  }
}

TEST(PromSnapshotTest, SumAndBuckets) {
  auto s = PromSnapshot::Parse(kAfter);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->Sum("rankd_requests_total"), 1100 + 5 + 12 + 900);
  EXPECT_EQ(s->Sum("rankd_requests_total",
                   [](const PromLabels& l) { return l.at("code") == "OK"; }),
            2000);
  auto b = s->Buckets("rankd_queue_duration_seconds");
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b.begin()->second, 590);
  EXPECT_EQ(b.rbegin()->second, 1100);
}

TEST(HistogramQuantileTest, InterpolatesInsideTheBucket) {
  const std::map<double, double> h = {{1.0, 50}, {2.0, 90}, {4.0, 100}, {INFINITY, 100}};
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.5, h), 1.0);
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.25, h), 0.5);   // first bucket starts at 0
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.7, h), 1.5);
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.95, h), 3.0);
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.99, {{1.0, 50}, {INFINITY, 100}}), 1.0);  // in +Inf
  EXPECT_TRUE(std::isnan(HistogramQuantile(0.5, {})));
  EXPECT_TRUE(std::isnan(HistogramQuantile(0.5, {{1.0, 0}, {INFINITY, 0}})));
}

TEST(ServerDeltaTest, DifferencesForOurModels) {
  auto before = PromSnapshot::Parse(kBefore);
  auto after = PromSnapshot::Parse(kAfter);
  ASSERT_TRUE(before.ok() && after.ok());
  const ServerFigures f = ServerDelta(*before, *after, {"mini"}, 2.5);
  EXPECT_TRUE(f.available);
  EXPECT_EQ(f.span_s, 2.5);
  // "other" is not ours; model="" (unknown models) is.
  EXPECT_EQ(f.requests_by_code.at("OK"), 1000);
  EXPECT_EQ(f.requests_by_code.at("INVALID_ARGUMENT"), 5);
  EXPECT_EQ(f.requests_by_code.at("NOT_FOUND"), 10);
  EXPECT_EQ(f.requests, 1015);
  EXPECT_EQ(f.candidates, 4000);
  EXPECT_EQ(f.batches, 500);
  EXPECT_NEAR(f.mean_queue_us, 0.2 / 1000 * 1e6, 1e-9);      // 200 us
  EXPECT_NEAR(f.mean_request_us, 0.5 / 1015 * 1e6, 1e-9);
  EXPECT_NEAR(f.mean_compute_us, 0.1 / 500 * 1e6, 1e-9);     // per batch
  EXPECT_NEAR(f.mean_batch_candidates, 8.0, 1e-12);
  EXPECT_NEAR(f.mean_batch_requests, 2.0, 1e-12);
  // Queue buckets after - before: 500 <= 100 us, 490 in (100 us, 1 ms], 10 above.
  EXPECT_NEAR(f.p99_queue_us, 1000, 1e-6);  // rank 990 = the 1 ms edge
  EXPECT_EQ(f.ids_missing, 3);
  EXPECT_EQ(f.ids_out_of_range, 0);
}

}  // namespace
}  // namespace rankd::loadtest
