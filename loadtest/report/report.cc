#include "loadtest/report/report.h"

#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace rankd::loadtest {
namespace {

// A latency in ms with about 3 significant digits.
std::string Ms(double us) {
  const double ms = us / 1000.0;
  if (ms < 1) return absl::StrFormat("%.3f", ms);
  if (ms < 10) return absl::StrFormat("%.2f", ms);
  if (ms < 100) return absl::StrFormat("%.1f", ms);
  return absl::StrFormat("%.0f", ms);
}

std::string Rate(double per_s) {
  if (per_s >= 1e6) return absl::StrFormat("%.2fM", per_s / 1e6);
  if (per_s >= 1e4) return absl::StrFormat("%.1fk", per_s / 1e3);
  return absl::StrFormat("%.1f", per_s);
}

std::string Codes(const std::map<std::string, int64_t>& codes) {
  if (codes.empty()) return "none";
  std::vector<std::string> parts;
  for (const auto& [code, n] : codes) parts.push_back(absl::StrCat(code, " ", n));
  return absl::StrJoin(parts, ", ");
}

std::string LatencyLine(const LatencySummary& l, double slo_percentile) {
  std::string line =
      absl::StrCat("p50 ", Ms(l.p50_us), "  p90 ", Ms(l.p90_us), "  p99 ", Ms(l.p99_us), "  p99.9 ",
                   Ms(l.p999_us), "  max ", Ms(l.max_us), "  mean ", Ms(l.mean_us), " ms");
  if (slo_percentile != 50 && slo_percentile != 90 && slo_percentile != 99 &&
      slo_percentile != 99.9) {
    absl::StrAppend(&line, "  (p", slo_percentile, " ", Ms(l.slo_percentile_us), " ms)");
  }
  return line;
}

std::string ServerLine(const ServerFigures& s) {
  if (!s.available) return "not scraped (--metrics_url)";
  return absl::StrCat(
      s.requests, " requests (", Codes(s.requests_by_code), "), ", s.candidates,
      " candidates\n             request ", Ms(s.mean_request_us), " ms mean (p50 ~",
      Ms(s.p50_request_us), ", p99 ~", Ms(s.p99_request_us), " ms from buckets), queue ",
      Ms(s.mean_queue_us), " ms mean (p99 ~", Ms(s.p99_queue_us), "), compute ",
      Ms(s.mean_compute_us), " ms per batch\n             ", s.batches, " batches of ",
      absl::StrFormat("%.2f", s.mean_batch_requests), " requests / ",
      absl::StrFormat("%.1f", s.mean_batch_candidates), " candidates on average",
      s.ids_missing + s.ids_out_of_range > 0
          ? absl::StrCat(", ", s.ids_missing, " missing / ", s.ids_out_of_range,
                         " out-of-range ids")
          : "");
}

// rankload's own CPU in a step, in cores; "-" where not measured.
std::string ClientCpu(const StepResult& s) {
  return s.client_cpu_cores > 0 ? absl::StrFormat("%.2f", s.client_cpu_cores) : "-";
}

std::string StepTitle(const StepResult& s) {
  if (s.mode == "closed") return absl::StrCat("closed loop, ", s.concurrency, " in flight");
  return absl::StrCat("open loop, ", s.arrival, " arrivals at ", Rate(s.target_rps), " req/s");
}

void AppendStep(const StepResult& s, double slo_percentile, std::string* out) {
  absl::StrAppend(out, StepTitle(s), ", ", s.duration_s, " s measured after ", s.warmup_s,
                  " s warm-up\n");
  absl::StrAppend(out, "  requests   sent ", s.sent, " (", Rate(s.sent_rps), "/s), answered ",
                  s.completed, ", achieved ", Rate(s.achieved_rps), "/s, OK ", s.ok, ", errors ",
                  s.errors, "\n");
  absl::StrAppend(out, "  candidates ", Rate(s.candidates_per_s), "/s scored (mean ",
                  absl::StrFormat("%.1f", s.mean_candidates), " per request)\n");
  if (s.mode == "open") {
    absl::StrAppend(out, "  latency    ", LatencyLine(s.latency, slo_percentile),
                    "\n             (from the scheduled send time: coordinated omission corrected)\n");
    absl::StrAppend(out, "  service    ", LatencyLine(s.service, slo_percentile),
                    "\n             (from the actual send: what a closed-loop tool would report)\n");
    absl::StrAppend(out, "  send lag   p50 ", Ms(s.send_lag.p50_us), "  p99 ", Ms(s.send_lag.p99_us),
                    "  max ", Ms(s.send_lag.max_us), " ms; ", s.late_sends,
                    " sends more than 1 ms late\n");
  } else {
    absl::StrAppend(out, "  latency    ", LatencyLine(s.latency, slo_percentile),
                    "\n             (closed loop: from the actual send; blind to stalls)\n");
  }
  if (s.client_cpu_cores > 0) {
    absl::StrAppend(out, "  client     ", ClientCpu(s),
                    " cores of CPU (rankload's own, all threads, over the window)\n");
  }
  if (s.client_behind) {
    absl::StrAppend(out,
                    "  WARNING    the client fell behind its schedule (late sends or the "
                    "in-flight cap): add --threads / --connections, or run rankload on another "
                    "machine; latency still counts from the scheduled times\n");
  }
  absl::StrAppend(out, "  errors     ", Codes(s.errors_by_code), "\n");
  absl::StrAppend(out, "  server     ", ServerLine(s.server_window), "\n");
  if (s.slo_pass.has_value()) {
    absl::StrAppend(out, "  SLO        ", *s.slo_pass ? "pass" : "FAIL", ": ", s.slo_reason, "\n");
  }
}

}  // namespace

LatencySummary Summarize(const LatencyHistogram& ns, double slo_percentile) {
  LatencySummary l;
  l.count = ns.count();
  if (l.count == 0) return l;
  l.min_us = ns.min() / 1e3;
  l.mean_us = ns.mean() / 1e3;
  l.p50_us = ns.Percentile(50) / 1e3;
  l.p90_us = ns.Percentile(90) / 1e3;
  l.p99_us = ns.Percentile(99) / 1e3;
  l.p999_us = ns.Percentile(99.9) / 1e3;
  l.max_us = ns.max() / 1e3;
  l.slo_percentile_us = ns.Percentile(slo_percentile) / 1e3;
  return l;
}

std::string FormatInterval(const IntervalStats& i, const std::string& prefix) {
  return absl::StrFormat("%s[%5.1fs]%s %9s req/s  p50 %8s ms  p99 %8s ms  max %8s ms  err %lld  in flight %lld",
                         prefix, i.start_s + i.length_s, i.warmup ? " warm-up" : "",
                         Rate(i.length_s > 0 ? i.completed / i.length_s : 0), Ms(i.p50_us),
                         Ms(i.p99_us), Ms(i.max_us), static_cast<long long>(i.errors),
                         static_cast<long long>(i.in_flight));
}

std::string FormatReport(const Report& report) {
  const RunSettings& r = report.settings;
  std::string out = absl::StrCat("rankload ", r.label.empty() ? "" : absl::StrCat("[", r.label, "] "),
                                 "-> ", r.target, " (", r.protocol, ", ", r.connections, " connections, ", r.threads,
                                 " sender threads, deadline ", r.deadline_ms, " ms)\ntraffic: ",
                                 r.traffic, "\n\n");
  if (report.steps.size() == 1) {
    AppendStep(report.steps[0], r.slo_percentile, &out);
  } else if (!report.steps.empty()) {
    const bool server = report.steps[0].server_window.available;
    absl::StrAppend(&out, absl::StrFormat("%-4s %-10s %10s %10s %9s %9s %9s %9s %9s %7s %11s %11s",
                                          "step", "load", "achieved/s", "cand/s", "p50 ms",
                                          "p90 ms", "p99 ms", "p99.9 ms", "max ms", "errors",
                                          "late sends", "client cpu"));
    if (server) absl::StrAppend(&out, absl::StrFormat(" %9s %9s %7s", "queue ms", "comp. ms", "batch"));
    absl::StrAppend(&out, "  SLO\n");
    for (size_t i = 0; i < report.steps.size(); ++i) {
      const StepResult& s = report.steps[i];
      const std::string load = s.mode == "closed" ? absl::StrCat("c=", s.concurrency)
                                                  : absl::StrCat(Rate(s.target_rps), "/s");
      absl::StrAppend(
          &out, absl::StrFormat("%-4d %-10s %10s %10s %9s %9s %9s %9s %9s %7lld %11lld %11s", i,
                                load, Rate(s.achieved_rps), Rate(s.candidates_per_s),
                                Ms(s.latency.p50_us), Ms(s.latency.p90_us), Ms(s.latency.p99_us),
                                Ms(s.latency.p999_us), Ms(s.latency.max_us),
                                static_cast<long long>(s.errors),
                                static_cast<long long>(s.late_sends), ClientCpu(s)));
      if (server) {
        absl::StrAppend(&out, absl::StrFormat(" %9s %9s %7.1f", Ms(s.server_window.mean_queue_us),
                                              Ms(s.server_window.mean_compute_us),
                                              s.server_window.mean_batch_candidates));
      }
      absl::StrAppend(&out, "  ",
                      s.slo_pass.has_value() ? (*s.slo_pass ? "pass" : "FAIL: " + s.slo_reason)
                                             : "",
                      s.client_behind ? "  (client behind schedule)" : "", "\n");
    }
    absl::StrAppend(&out, "(open loop: latency from the scheduled send time; ",
                    "closed loop: from the send; cand/s = candidates scored per second; ",
                    "client cpu = rankload's own, in cores)\n");
  }
  if (report.slo.has_value()) {
    const SloResult& s = *report.slo;
    absl::StrAppend(&out, "\nSLO: p", s.percentile, " <= ", s.latency_bound_ms,
                    " ms with errors <= ", s.max_error_ratio * 100, "%\n");
    if (s.found) {
      absl::StrAppend(&out, "  highest passing rate ", Rate(s.best_rps), " req/s (achieved ",
                      Rate(s.best_achieved_rps), "/s, ", Rate(s.best_candidates_per_s),
                      " candidates/s, p", s.percentile, " ", Ms(s.best_latency_us), " ms; step ",
                      s.best_step, ")\n");
    } else {
      absl::StrAppend(&out, "  NOT MET at any rate tried\n");
    }
    absl::StrAppend(&out, "  ", s.steps, " steps; ", s.stop_reason, "\n");
  }
  return out;
}

}  // namespace rankd::loadtest
