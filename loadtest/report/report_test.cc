#include "loadtest/report/report.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "loadtest/report/report_csv.h"
#include "loadtest/report/report_json.h"

namespace rankd::loadtest {
namespace {

StepResult SampleStep(int i) {
  StepResult s;
  s.mode = i % 2 ? "closed" : "open";
  s.arrival = i % 2 ? "" : "poisson";
  s.target_rps = i % 2 ? 0 : 1000.5 * (i + 1);
  s.concurrency = i % 2 ? 8 : 0;
  s.warmup_s = 1.5;
  s.duration_s = 10;
  s.mean_candidates = 63.25;
  s.sent = 10005 + i;
  s.completed = 10004 + i;
  s.sent_rps = 1000.5;
  s.achieved_rps = 999.875;
  s.ok_rps = 998.1;
  s.candidates_per_s = 63125.7;
  s.ok = 9981;
  s.errors = 23 + i;
  s.errors_by_code = {{"DEADLINE_EXCEEDED", 20}, {"NOT_FOUND", 3 + i}};
  s.total_by_code = {{"OK", 12000}, {"DEADLINE_EXCEEDED", 21}, {"NOT_FOUND", 4}};
  s.latency = {9981, 101.5, 250.25, 200, 300, 900.125, 1500, 4000, 900.125};
  s.service = {9981, 100, 240, 190, 290, 800, 1400, 3900, 800};
  s.send_lag = {10005, 1, 30, 20, 40, 80, 200, 1200, 80};
  s.late_sends = 2;
  s.client_behind = i == 2;
  s.in_flight_cap_waits = 0;
  s.client_cpu_cores = 1.25 + i;
  s.intervals = {{0, 1, true, 1000, 0, 210, 800, 900, 3}, {1, 0.5, false, 500, 2, 220, 810, 950, 0}};
  s.server_window.available = true;
  s.server_window.span_s = 10.2;
  s.server_window.requests_by_code = {{"OK", 9981}, {"NOT_FOUND", 3}};
  s.server_window.requests = 9984;
  s.server_window.candidates = 631000;
  s.server_window.batches = 5000;
  s.server_window.mean_request_us = 120.5;
  s.server_window.p50_request_us = 100;
  s.server_window.p99_request_us = 480;
  s.server_window.mean_queue_us = 20.25;
  s.server_window.p99_queue_us = 95;
  s.server_window.mean_compute_us = 80.5;
  s.server_window.mean_batch_candidates = 126.5;
  s.server_window.mean_batch_requests = 2.0;
  s.server_window.ids_missing = 7;
  if (i != 1) s.slo_pass = i == 0;
  s.slo_reason = "p99 0.9 ms <= 5 ms";
  return s;
}

Report SampleReport() {
  Report r;
  r.settings = {"label \"quoted\"", "127.0.0.1:8500", "kserve", "slo", "generated, candidates 64",
                "mini", 4, 2, 200, 250.0, 99.9, "2026-11-22T10:00:00Z",
                "rankload --mode slo --slo_latency_ms 5", 10, 2};
  for (int i = 0; i < 3; ++i) r.steps.push_back(SampleStep(i));
  SloResult slo;
  slo.found = true;
  slo.percentile = 99.9;
  slo.latency_bound_ms = 5;
  slo.max_error_ratio = 0.001;
  slo.best_rps = 1000.5;
  slo.best_achieved_rps = 999.875;
  slo.best_candidates_per_s = 63125.7;
  slo.best_latency_us = 900.125;
  slo.best_step = 0;
  slo.steps = 3;
  slo.stop_reason = "bracketed";
  r.slo = slo;
  return r;
}

void ExpectLatencyEq(const LatencySummary& a, const LatencySummary& b) {
  EXPECT_EQ(a.count, b.count);
  EXPECT_EQ(a.min_us, b.min_us);
  EXPECT_EQ(a.mean_us, b.mean_us);
  EXPECT_EQ(a.p50_us, b.p50_us);
  EXPECT_EQ(a.p90_us, b.p90_us);
  EXPECT_EQ(a.p99_us, b.p99_us);
  EXPECT_EQ(a.p999_us, b.p999_us);
  EXPECT_EQ(a.max_us, b.max_us);
  EXPECT_EQ(a.slo_percentile_us, b.slo_percentile_us);
}

TEST(ReportJsonTest, RoundTrip) {
  const Report want = SampleReport();
  const std::string text = ReportToJson(want);
  auto got = ReportFromJson(text);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->settings.label, want.settings.label);
  EXPECT_EQ(got->settings.command_line, want.settings.command_line);
  EXPECT_EQ(got->settings.slo_percentile, 99.9);
  EXPECT_EQ(got->settings.connections, 4);
  EXPECT_EQ(got->settings.protocol, "kserve");
  EXPECT_EQ(got->settings.drain_s, 10);
  EXPECT_EQ(got->settings.slo_recheck, 2);
  ASSERT_EQ(got->steps.size(), want.steps.size());
  for (size_t i = 0; i < want.steps.size(); ++i) {
    const StepResult& a = got->steps[i];
    const StepResult& b = want.steps[i];
    EXPECT_EQ(a.mode, b.mode);
    EXPECT_EQ(a.arrival, b.arrival);
    EXPECT_EQ(a.target_rps, b.target_rps);
    EXPECT_EQ(a.concurrency, b.concurrency);
    EXPECT_EQ(a.sent, b.sent);
    EXPECT_EQ(a.achieved_rps, b.achieved_rps);
    EXPECT_EQ(a.candidates_per_s, b.candidates_per_s);
    EXPECT_EQ(a.errors_by_code, b.errors_by_code);
    EXPECT_EQ(a.total_by_code, b.total_by_code);
    ExpectLatencyEq(a.latency, b.latency);
    ExpectLatencyEq(a.service, b.service);
    ExpectLatencyEq(a.send_lag, b.send_lag);
    EXPECT_EQ(a.client_behind, b.client_behind);
    EXPECT_EQ(a.client_cpu_cores, b.client_cpu_cores);
    ASSERT_EQ(a.intervals.size(), 2u);
    EXPECT_EQ(a.intervals[1].length_s, 0.5);
    EXPECT_EQ(a.intervals[0].warmup, true);
    EXPECT_EQ(a.intervals[1].p99_us, 810);
    EXPECT_EQ(a.server_window.available, true);
    EXPECT_EQ(a.server_window.requests_by_code, b.server_window.requests_by_code);
    EXPECT_EQ(a.server_window.mean_queue_us, 20.25);
    EXPECT_EQ(a.server_window.ids_missing, 7);
    EXPECT_EQ(a.server_total.available, false);
    EXPECT_EQ(a.slo_pass, b.slo_pass);
    EXPECT_EQ(a.slo_reason, b.slo_reason);
  }
  ASSERT_TRUE(got->slo.has_value());
  EXPECT_EQ(got->slo->best_rps, 1000.5);
  EXPECT_EQ(got->slo->best_latency_us, 900.125);
  EXPECT_EQ(got->slo->stop_reason, "bracketed");
  // Writing the read-back report gives the same text.
  EXPECT_EQ(ReportToJson(*got), text);
}

TEST(ReportJsonTest, ReportsWithoutTheClientsCpuRead) {
  // Reports written before the field existed lack it: read as not measured.
  std::string text = ReportToJson(SampleReport());
  for (size_t at; (at = text.find("\"client_cpu_cores\"")) != std::string::npos;) {
    const size_t end = text.find_first_of(",}", at);
    text.erase(at, end - at + (text[end] == ',' ? 1 : 0));
  }
  auto got = ReportFromJson(text);
  ASSERT_TRUE(got.ok()) << got.status() << "\n" << text.substr(0, 2000);
  for (const StepResult& s : got->steps) EXPECT_EQ(s.client_cpu_cores, 0);
}

TEST(ReportJsonTest, RejectsOtherJson) {
  EXPECT_FALSE(ReportFromJson("{").ok());
  EXPECT_FALSE(ReportFromJson("{\"a\": 1}").ok());
  EXPECT_FALSE(ReportFromJson("{\"tool\": \"rankload\", \"settings\": {}}").ok());
}

TEST(ReportCsvTest, RoundTrip) {
  const Report want = SampleReport();
  const std::string text = ReportToCsv(want);
  auto rows = ParseCsv(text);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), want.steps.size());
  for (size_t i = 0; i < want.steps.size(); ++i) {
    EXPECT_EQ((*rows)[i].at("step"), std::to_string(i));
    auto got = StepFromCsvRow((*rows)[i]);
    ASSERT_TRUE(got.ok()) << got.status();
    const StepResult& b = want.steps[i];
    EXPECT_EQ(got->mode, b.mode);
    EXPECT_EQ(got->arrival, b.arrival);
    EXPECT_EQ(got->target_rps, b.target_rps);
    EXPECT_EQ(got->concurrency, b.concurrency);
    EXPECT_EQ(got->sent, b.sent);
    EXPECT_EQ(got->errors, b.errors);
    EXPECT_EQ(got->achieved_rps, b.achieved_rps);
    EXPECT_EQ(got->candidates_per_s, b.candidates_per_s);
    EXPECT_EQ(got->client_cpu_cores, b.client_cpu_cores);
    // A file written before the column existed reads as not measured.
    std::map<std::string, std::string> older = (*rows)[i];
    ASSERT_EQ(older.erase("client_cpu_cores"), 1u);
    auto old_step = StepFromCsvRow(older);
    ASSERT_TRUE(old_step.ok()) << old_step.status();
    EXPECT_EQ(old_step->client_cpu_cores, 0);
    EXPECT_EQ(got->latency.p50_us, b.latency.p50_us);
    EXPECT_EQ(got->latency.p99_us, b.latency.p99_us);
    EXPECT_EQ(got->latency.p999_us, b.latency.p999_us);
    EXPECT_EQ(got->latency.max_us, b.latency.max_us);
    EXPECT_EQ(got->service.p99_us, b.service.p99_us);
    EXPECT_EQ(got->client_behind, b.client_behind);
    EXPECT_EQ(got->errors_by_code, b.errors_by_code);
    EXPECT_EQ(got->server_window.mean_queue_us, b.server_window.mean_queue_us);
    EXPECT_EQ(got->server_window.mean_batch_candidates, b.server_window.mean_batch_candidates);
    EXPECT_EQ(got->slo_pass, b.slo_pass);
  }
}

TEST(ReportCsvTest, ParsesQuotesAndRejectsRaggedRows) {
  auto rows = ParseCsv("a,b\r\n\"x,1\",\"say \"\"hi\"\"\"\n\n3,4");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].at("a"), "x,1");
  EXPECT_EQ((*rows)[0].at("b"), "say \"hi\"");
  EXPECT_EQ((*rows)[1].at("b"), "4");
  EXPECT_FALSE(ParseCsv("a,b\n1\n").ok());
  EXPECT_FALSE(ParseCsv("a\n\"open\n").ok());
  auto missing = StepFromCsvRow({{"mode", "open"}});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("column"), std::string::npos);
}

TEST(ReportCsvTest, RefusesNegativeAndOutOfRangeCounts) {
  auto rows = ParseCsv(ReportToCsv(SampleReport()));
  ASSERT_TRUE(rows.ok()) << rows.status();
  const std::map<std::string, std::string> good = (*rows)[0];
  ASSERT_TRUE(StepFromCsvRow(good).ok());
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"sent", "-1"},        {"ok", "-5"},
      {"errors", "-1"},      {"late_sends", "-2"},
      {"concurrency", "-3"}, {"concurrency", "2147483648"},
      {"completed", "1e3"},  {"errors_by_code", "UNAVAILABLE=-4"},
  };
  for (const auto& [column, value] : bad) {
    std::map<std::string, std::string> row = good;
    row[column] = value;
    auto got = StepFromCsvRow(row);
    ASSERT_FALSE(got.ok()) << column << "=" << value;
    EXPECT_NE(got.status().message().find("column " + column), std::string::npos) << got.status();
  }
  // The server window's counters restart with rankd: a negative delta is
  // what rankload saw, and reads back.
  std::map<std::string, std::string> restarted = good;
  restarted["server_requests"] = "-7";
  auto got = StepFromCsvRow(restarted);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->server_window.requests, -7);
}

TEST(ReportTextTest, MentionsWhatMatters) {
  Report r = SampleReport();
  const std::string table = FormatReport(r);
  EXPECT_NE(table.find("highest passing rate"), std::string::npos) << table;
  EXPECT_NE(table.find("client behind schedule"), std::string::npos) << table;
  r.steps.resize(1);
  r.slo.reset();
  const std::string one = FormatReport(r);
  EXPECT_NE(one.find("coordinated omission corrected"), std::string::npos) << one;
  EXPECT_NE(one.find("DEADLINE_EXCEEDED 20"), std::string::npos) << one;
  EXPECT_NE(one.find("queue 0.020 ms mean"), std::string::npos) << one;
  EXPECT_NE(one.find("client     1.25 cores of CPU"), std::string::npos) << one;
  r.steps[0].client_cpu_cores = 0;
  EXPECT_EQ(FormatReport(r).find("cores of CPU"), std::string::npos) << "not measured: no line";
  const std::string line = FormatInterval(r.steps[0].intervals[0], "[x] ");
  EXPECT_NE(line.find("warm-up"), std::string::npos) << line;
  EXPECT_NE(line.find("p99    0.800 ms"), std::string::npos) << line;
}

}  // namespace
}  // namespace rankd::loadtest
