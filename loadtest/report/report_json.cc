#include "loadtest/report/report_json.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace rankd::loadtest {
namespace {

using nlohmann::json;

// JSON has no NaN / Inf: they become null (and read back as 0).
json Num(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }
double GetNum(const json& j, const char* key) {
  const json& v = j.at(key);
  return v.is_null() ? 0.0 : v.get<double>();
}

json ToJson(const LatencySummary& l) {
  return json{{"count", l.count},     {"min", Num(l.min_us)},   {"mean", Num(l.mean_us)},
              {"p50", Num(l.p50_us)}, {"p90", Num(l.p90_us)},   {"p99", Num(l.p99_us)},
              {"p99_9", Num(l.p999_us)}, {"max", Num(l.max_us)},
              {"slo_percentile", Num(l.slo_percentile_us)}};
}
LatencySummary LatencyFrom(const json& j) {
  LatencySummary l;
  l.count = j.at("count").get<int64_t>();
  l.min_us = GetNum(j, "min");
  l.mean_us = GetNum(j, "mean");
  l.p50_us = GetNum(j, "p50");
  l.p90_us = GetNum(j, "p90");
  l.p99_us = GetNum(j, "p99");
  l.p999_us = GetNum(j, "p99_9");
  l.max_us = GetNum(j, "max");
  l.slo_percentile_us = GetNum(j, "slo_percentile");
  return l;
}

json ToJson(const ServerFigures& s) {
  if (!s.available) return nullptr;
  return json{{"span_s", Num(s.span_s)},
              {"requests_by_code", s.requests_by_code},
              {"requests", s.requests},
              {"candidates", s.candidates},
              {"batches", s.batches},
              {"mean_request_us", Num(s.mean_request_us)},
              {"p50_request_us", Num(s.p50_request_us)},
              {"p99_request_us", Num(s.p99_request_us)},
              {"mean_queue_us", Num(s.mean_queue_us)},
              {"p99_queue_us", Num(s.p99_queue_us)},
              {"mean_compute_us", Num(s.mean_compute_us)},
              {"mean_batch_candidates", Num(s.mean_batch_candidates)},
              {"mean_batch_requests", Num(s.mean_batch_requests)},
              {"ids_missing", s.ids_missing},
              {"ids_out_of_range", s.ids_out_of_range}};
}
ServerFigures ServerFrom(const json& j) {
  ServerFigures s;
  if (j.is_null()) return s;
  s.available = true;
  s.span_s = GetNum(j, "span_s");
  s.requests_by_code = j.at("requests_by_code").get<std::map<std::string, int64_t>>();
  s.requests = j.at("requests").get<int64_t>();
  s.candidates = j.at("candidates").get<int64_t>();
  s.batches = j.at("batches").get<int64_t>();
  s.mean_request_us = GetNum(j, "mean_request_us");
  s.p50_request_us = GetNum(j, "p50_request_us");
  s.p99_request_us = GetNum(j, "p99_request_us");
  s.mean_queue_us = GetNum(j, "mean_queue_us");
  s.p99_queue_us = GetNum(j, "p99_queue_us");
  s.mean_compute_us = GetNum(j, "mean_compute_us");
  s.mean_batch_candidates = GetNum(j, "mean_batch_candidates");
  s.mean_batch_requests = GetNum(j, "mean_batch_requests");
  s.ids_missing = j.at("ids_missing").get<int64_t>();
  s.ids_out_of_range = j.at("ids_out_of_range").get<int64_t>();
  return s;
}

json ToJson(const IntervalStats& i) {
  return json{{"start_s", Num(i.start_s)}, {"length_s", Num(i.length_s)}, {"warmup", i.warmup},
              {"completed", i.completed},  {"errors", i.errors},          {"p50_us", Num(i.p50_us)},
              {"p99_us", Num(i.p99_us)},   {"max_us", Num(i.max_us)},     {"in_flight", i.in_flight}};
}
IntervalStats IntervalFrom(const json& j) {
  IntervalStats i;
  i.start_s = GetNum(j, "start_s");
  i.length_s = GetNum(j, "length_s");
  i.warmup = j.at("warmup").get<bool>();
  i.completed = j.at("completed").get<int64_t>();
  i.errors = j.at("errors").get<int64_t>();
  i.p50_us = GetNum(j, "p50_us");
  i.p99_us = GetNum(j, "p99_us");
  i.max_us = GetNum(j, "max_us");
  i.in_flight = j.at("in_flight").get<int64_t>();
  return i;
}

json ToJson(const StepResult& s) {
  json intervals = json::array();
  for (const auto& i : s.intervals) intervals.push_back(ToJson(i));
  return json{{"mode", s.mode},
              {"arrival", s.arrival},
              {"target_rps", Num(s.target_rps)},
              {"concurrency", s.concurrency},
              {"warmup_s", Num(s.warmup_s)},
              {"duration_s", Num(s.duration_s)},
              {"mean_candidates", Num(s.mean_candidates)},
              {"sent", s.sent},
              {"completed", s.completed},
              {"sent_rps", Num(s.sent_rps)},
              {"achieved_rps", Num(s.achieved_rps)},
              {"ok_rps", Num(s.ok_rps)},
              {"candidates_per_s", Num(s.candidates_per_s)},
              {"ok", s.ok},
              {"errors", s.errors},
              {"errors_by_code", s.errors_by_code},
              {"total_by_code", s.total_by_code},
              {"latency_us", ToJson(s.latency)},
              {"service_us", ToJson(s.service)},
              {"send_lag_us", ToJson(s.send_lag)},
              {"late_sends", s.late_sends},
              {"client_behind", s.client_behind},
              {"in_flight_cap_waits", s.in_flight_cap_waits},
              {"intervals", intervals},
              {"server_window", ToJson(s.server_window)},
              {"server_total", ToJson(s.server_total)},
              {"slo_pass", s.slo_pass.has_value() ? json(*s.slo_pass) : json(nullptr)},
              {"slo_reason", s.slo_reason}};
}
StepResult StepFrom(const json& j) {
  StepResult s;
  s.mode = j.at("mode").get<std::string>();
  s.arrival = j.at("arrival").get<std::string>();
  s.target_rps = GetNum(j, "target_rps");
  s.concurrency = j.at("concurrency").get<int>();
  s.warmup_s = GetNum(j, "warmup_s");
  s.duration_s = GetNum(j, "duration_s");
  s.mean_candidates = GetNum(j, "mean_candidates");
  s.sent = j.at("sent").get<int64_t>();
  s.completed = j.at("completed").get<int64_t>();
  s.sent_rps = GetNum(j, "sent_rps");
  s.achieved_rps = GetNum(j, "achieved_rps");
  s.ok_rps = GetNum(j, "ok_rps");
  s.candidates_per_s = GetNum(j, "candidates_per_s");
  s.ok = j.at("ok").get<int64_t>();
  s.errors = j.at("errors").get<int64_t>();
  s.errors_by_code = j.at("errors_by_code").get<std::map<std::string, int64_t>>();
  s.total_by_code = j.at("total_by_code").get<std::map<std::string, int64_t>>();
  s.latency = LatencyFrom(j.at("latency_us"));
  s.service = LatencyFrom(j.at("service_us"));
  s.send_lag = LatencyFrom(j.at("send_lag_us"));
  s.late_sends = j.at("late_sends").get<int64_t>();
  s.client_behind = j.at("client_behind").get<bool>();
  s.in_flight_cap_waits = j.at("in_flight_cap_waits").get<int64_t>();
  for (const auto& i : j.at("intervals")) s.intervals.push_back(IntervalFrom(i));
  s.server_window = ServerFrom(j.at("server_window"));
  s.server_total = ServerFrom(j.at("server_total"));
  if (!j.at("slo_pass").is_null()) s.slo_pass = j.at("slo_pass").get<bool>();
  s.slo_reason = j.at("slo_reason").get<std::string>();
  return s;
}

}  // namespace

std::string ReportToJson(const Report& report) {
  const RunSettings& r = report.settings;
  json steps = json::array();
  for (const auto& s : report.steps) steps.push_back(ToJson(s));
  json slo = nullptr;
  if (report.slo.has_value()) {
    const SloResult& s = *report.slo;
    slo = json{{"found", s.found},
               {"percentile", Num(s.percentile)},
               {"latency_bound_ms", Num(s.latency_bound_ms)},
               {"max_error_ratio", Num(s.max_error_ratio)},
               {"best_rps", Num(s.best_rps)},
               {"best_achieved_rps", Num(s.best_achieved_rps)},
               {"best_candidates_per_s", Num(s.best_candidates_per_s)},
               {"best_latency_us", Num(s.best_latency_us)},
               {"best_step", s.best_step},
               {"steps", s.steps},
               {"stop_reason", s.stop_reason}};
  }
  json out{{"tool", "rankload"},
           {"settings",
            {{"label", r.label},
             {"target", r.target},
             {"protocol", r.protocol},
             {"mode", r.mode},
             {"traffic", r.traffic},
             {"models", r.models},
             {"connections", r.connections},
             {"threads", r.threads},
             {"spin_us", r.spin_us},
             {"drain_s", r.drain_s},
             {"slo_recheck", r.slo_recheck},
             {"deadline_ms", Num(r.deadline_ms)},
             {"slo_percentile", Num(r.slo_percentile)},
             {"started_at", r.started_at},
             {"command_line", r.command_line}}},
           {"steps", steps},
           {"slo", slo}};
  return out.dump(2) + "\n";
}

absl::StatusOr<Report> ReportFromJson(absl::string_view text) {
  try {
    const json j = json::parse(text.begin(), text.end());
    if (!j.is_object() || j.value("tool", "") != "rankload") {
      return absl::InvalidArgumentError("not a rankload report (no \"tool\": \"rankload\")");
    }
    Report report;
    const json& r = j.at("settings");
    report.settings.label = r.at("label").get<std::string>();
    report.settings.target = r.at("target").get<std::string>();
    report.settings.protocol = r.value("protocol", std::string("rankd"));  // absent before it existed
    report.settings.mode = r.at("mode").get<std::string>();
    report.settings.traffic = r.at("traffic").get<std::string>();
    report.settings.models = r.at("models").get<std::string>();
    report.settings.connections = r.at("connections").get<int>();
    report.settings.threads = r.at("threads").get<int>();
    report.settings.spin_us = r.value("spin_us", int64_t{0});  // absent before it existed
    report.settings.drain_s = r.value("drain_s", 0.0);        // likewise
    report.settings.slo_recheck = r.value("slo_recheck", 0);
    report.settings.deadline_ms = GetNum(r, "deadline_ms");
    report.settings.slo_percentile = GetNum(r, "slo_percentile");
    report.settings.started_at = r.at("started_at").get<std::string>();
    report.settings.command_line = r.at("command_line").get<std::string>();
    for (const auto& s : j.at("steps")) report.steps.push_back(StepFrom(s));
    const json& slo = j.at("slo");
    if (!slo.is_null()) {
      SloResult s;
      s.found = slo.at("found").get<bool>();
      s.percentile = GetNum(slo, "percentile");
      s.latency_bound_ms = GetNum(slo, "latency_bound_ms");
      s.max_error_ratio = GetNum(slo, "max_error_ratio");
      s.best_rps = GetNum(slo, "best_rps");
      s.best_achieved_rps = GetNum(slo, "best_achieved_rps");
      s.best_candidates_per_s = GetNum(slo, "best_candidates_per_s");
      s.best_latency_us = GetNum(slo, "best_latency_us");
      s.best_step = slo.at("best_step").get<int>();
      s.steps = slo.at("steps").get<int>();
      s.stop_reason = slo.at("stop_reason").get<std::string>();
      report.slo = s;
    }
    return report;
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("bad rankload JSON report: ", e.what()));
  }
}

}  // namespace rankd::loadtest
