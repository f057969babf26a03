#include "loadtest/report/report_json.h"

#include <cmath>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace rankd::loadtest {
namespace {

using nlohmann::json;

// --- Each record's keys, listed once --------------------------------------------
//
// Fields(io, record) names every JSON key of `record` with the member it holds,
// in reading order (a report missing several keys names the first). The same
// list writes (io a JsonWriter, record const) and reads (io a JsonReader), so
// the two directions cannot disagree. io(key, member, absent) marks a key that
// reports written before it existed lack: `absent` is read then.

// Enables a Fields overload for T = R or const R.
template <typename T, typename R>
using IfRecord = std::enable_if_t<std::is_same_v<std::remove_const_t<T>, R>>;

template <typename Io, typename T>
IfRecord<T, LatencySummary> Fields(Io& io, T& l) {
  io("count", l.count);
  io("min", l.min_us);
  io("mean", l.mean_us);
  io("p50", l.p50_us);
  io("p90", l.p90_us);
  io("p99", l.p99_us);
  io("p99_9", l.p999_us);
  io("max", l.max_us);
  io("slo_percentile", l.slo_percentile_us);
}

// Without `available`: an unavailable ServerFigures is null (JsonWriter,
// JsonReader).
template <typename Io, typename T>
IfRecord<T, ServerFigures> Fields(Io& io, T& s) {
  io("span_s", s.span_s);
  io("requests_by_code", s.requests_by_code);
  io("requests", s.requests);
  io("candidates", s.candidates);
  io("batches", s.batches);
  io("mean_request_us", s.mean_request_us);
  io("p50_request_us", s.p50_request_us);
  io("p99_request_us", s.p99_request_us);
  io("mean_queue_us", s.mean_queue_us);
  io("p99_queue_us", s.p99_queue_us);
  io("mean_compute_us", s.mean_compute_us);
  io("mean_batch_candidates", s.mean_batch_candidates);
  io("mean_batch_requests", s.mean_batch_requests);
  io("ids_missing", s.ids_missing);
  io("ids_out_of_range", s.ids_out_of_range);
}

template <typename Io, typename T>
IfRecord<T, IntervalStats> Fields(Io& io, T& i) {
  io("start_s", i.start_s);
  io("length_s", i.length_s);
  io("warmup", i.warmup);
  io("completed", i.completed);
  io("errors", i.errors);
  io("p50_us", i.p50_us);
  io("p99_us", i.p99_us);
  io("max_us", i.max_us);
  io("in_flight", i.in_flight);
}

template <typename Io, typename T>
IfRecord<T, StepResult> Fields(Io& io, T& s) {
  io("mode", s.mode);
  io("arrival", s.arrival);
  io("target_rps", s.target_rps);
  io("concurrency", s.concurrency);
  io("warmup_s", s.warmup_s);
  io("duration_s", s.duration_s);
  io("mean_candidates", s.mean_candidates);
  io("sent", s.sent);
  io("completed", s.completed);
  io("sent_rps", s.sent_rps);
  io("achieved_rps", s.achieved_rps);
  io("ok_rps", s.ok_rps);
  io("candidates_per_s", s.candidates_per_s);
  io("ok", s.ok);
  io("errors", s.errors);
  io("errors_by_code", s.errors_by_code);
  io("total_by_code", s.total_by_code);
  io("latency_us", s.latency);
  io("service_us", s.service);
  io("send_lag_us", s.send_lag);
  io("late_sends", s.late_sends);
  io("client_behind", s.client_behind);
  io("in_flight_cap_waits", s.in_flight_cap_waits);
  io("client_cpu_cores", s.client_cpu_cores, 0.0);
  io("intervals", s.intervals);
  io("server_window", s.server_window);
  io("server_total", s.server_total);
  io("slo_pass", s.slo_pass);
  io("slo_reason", s.slo_reason);
}

template <typename Io, typename T>
IfRecord<T, SloResult> Fields(Io& io, T& s) {
  io("found", s.found);
  io("percentile", s.percentile);
  io("latency_bound_ms", s.latency_bound_ms);
  io("max_error_ratio", s.max_error_ratio);
  io("best_rps", s.best_rps);
  io("best_achieved_rps", s.best_achieved_rps);
  io("best_candidates_per_s", s.best_candidates_per_s);
  io("best_latency_us", s.best_latency_us);
  io("best_step", s.best_step);
  io("steps", s.steps);
  io("stop_reason", s.stop_reason);
}

template <typename Io, typename T>
IfRecord<T, RunSettings> Fields(Io& io, T& r) {
  io("label", r.label);
  io("target", r.target);
  io("protocol", r.protocol, std::string("rankd"));
  io("mode", r.mode);
  io("traffic", r.traffic);
  io("models", r.models);
  io("connections", r.connections);
  io("threads", r.threads);
  io("spin_us", r.spin_us, int64_t{0});
  io("drain_s", r.drain_s, 0.0);
  io("slo_recheck", r.slo_recheck, 0);
  io("deadline_ms", r.deadline_ms);
  io("slo_percentile", r.slo_percentile);
  io("started_at", r.started_at);
  io("command_line", r.command_line);
}

// Without "tool": "rankload", which ReportToJson adds and ReportFromJson checks.
template <typename Io, typename T>
IfRecord<T, Report> Fields(Io& io, T& r) {
  io("settings", r.settings);
  io("steps", r.steps);
  io("slo", r.slo);
}

// --- The two directions ---------------------------------------------------------

// Writes the fields it is shown into one JSON object.
class JsonWriter {
 public:
  template <typename R>
  static json Record(const R& record) {
    JsonWriter w;
    Fields(w, record);
    return std::move(w.out_);
  }

  template <typename T>
  void operator()(const char* key, const T& value) {
    out_[key] = Value(value);
  }
  template <typename T>
  void operator()(const char* key, const T& value, const T& /*absent*/) {
    out_[key] = Value(value);
  }

 private:
  // JSON has no NaN / Inf: they become null (and read back as 0).
  static json Value(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }
  static json Value(const LatencySummary& l) { return Record(l); }
  static json Value(const IntervalStats& i) { return Record(i); }
  static json Value(const StepResult& s) { return Record(s); }
  static json Value(const SloResult& s) { return Record(s); }
  static json Value(const RunSettings& r) { return Record(r); }
  static json Value(const ServerFigures& s) { return s.available ? Record(s) : json(nullptr); }
  template <typename T>
  static json Value(const std::vector<T>& items) {
    json out = json::array();
    for (const T& item : items) out.push_back(Value(item));
    return out;
  }
  template <typename T>
  static json Value(const std::optional<T>& v) {
    return v.has_value() ? Value(*v) : json(nullptr);
  }
  // Integers, bools, strings and maps of them, as they are.
  template <typename T>
  static json Value(const T& v) {
    return json(v);
  }

  json out_ = json::object();
};

// Reads the fields it is shown from one JSON object; a missing key or a
// value of the wrong type throws nlohmann::json::exception.
class JsonReader {
 public:
  template <typename R>
  static R Record(const json& j) {
    R record;
    JsonReader r(j);
    Fields(r, record);
    return record;
  }

  template <typename T>
  void operator()(const char* key, T& value) {
    Read(in_.at(key), value);
  }
  template <typename T>
  void operator()(const char* key, T& value, const T& absent) {
    if (in_.contains(key)) {
      Read(in_.at(key), value);
    } else {
      value = absent;
    }
  }

 private:
  explicit JsonReader(const json& in) : in_(in) {}

  static void Read(const json& j, double& v) { v = j.is_null() ? 0.0 : j.get<double>(); }
  static void Read(const json& j, LatencySummary& l) { l = Record<LatencySummary>(j); }
  static void Read(const json& j, IntervalStats& i) { i = Record<IntervalStats>(j); }
  static void Read(const json& j, StepResult& s) { s = Record<StepResult>(j); }
  static void Read(const json& j, SloResult& s) { s = Record<SloResult>(j); }
  static void Read(const json& j, RunSettings& r) { r = Record<RunSettings>(j); }
  static void Read(const json& j, ServerFigures& s) {
    if (j.is_null()) return;
    s = Record<ServerFigures>(j);
    s.available = true;
  }
  template <typename T>
  static void Read(const json& j, std::vector<T>& items) {
    for (const json& item : j) Read(item, items.emplace_back());
  }
  template <typename T>
  static void Read(const json& j, std::optional<T>& v) {
    if (!j.is_null()) Read(j, v.emplace());
  }
  template <typename T>
  static void Read(const json& j, T& v) {
    v = j.get<T>();
  }

  const json& in_;
};

}  // namespace

std::string ReportToJson(const Report& report) {
  json out = JsonWriter::Record(report);
  out["tool"] = "rankload";
  return out.dump(2) + "\n";
}

absl::StatusOr<Report> ReportFromJson(absl::string_view text) {
  try {
    const json j = json::parse(text.begin(), text.end());
    if (!j.is_object() || j.value("tool", "") != "rankload") {
      return absl::InvalidArgumentError("not a rankload report (no \"tool\": \"rankload\")");
    }
    return JsonReader::Record<Report>(j);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("bad rankload JSON report: ", e.what()));
  }
}

}  // namespace rankd::loadtest
