#include "loadtest/report/report_csv.h"

#include <functional>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace rankd::loadtest {
namespace {

std::string D(double v) { return absl::StrFormat("%.17g", v); }
std::string I(int64_t v) { return absl::StrCat(v); }

// One column: its name, how to print it and how to read it back; `absent`,
// when set, is read for a file written before the column existed.
struct Column {
  const char* name;
  std::function<std::string(const StepResult&)> get;
  std::function<bool(absl::string_view, StepResult*)> set;
  const char* absent = nullptr;
};

#define RANKLOAD_DCOL(name, field)                                        \
  Column {                                                                \
    name, [](const StepResult& s) { return D(s.field); },                 \
        [](absl::string_view v, StepResult* s) { return absl::SimpleAtod(v, &s->field); } \
  }
// An integer of type T; a negative one only when `signed_ok` (the server
// window's counter deltas: a restarted rankd resets its counters).
template <typename T>
bool ParseInteger(absl::string_view text, bool signed_ok, T* out) {
  int64_t x = 0;
  if (!absl::SimpleAtoi(text, &x) || (x < 0 && !signed_ok) ||
      x < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
      x > static_cast<int64_t>(std::numeric_limits<T>::max())) {
    return false;
  }
  *out = static_cast<T>(x);
  return true;
}

template <typename T>
bool ParseCount(absl::string_view text, T* out) {
  return ParseInteger(text, /*signed_ok=*/false, out);
}

// A count rankload kept itself: never negative.
#define RANKLOAD_ICOL(name, field)                                                  \
  Column {                                                                          \
    name, [](const StepResult& s) { return I(s.field); },                           \
        [](absl::string_view v, StepResult* s) { return ParseCount(v, &s->field); } \
  }
// A difference of two scrapes of a rankd counter: negative when rankd
// restarted in between.
#define RANKLOAD_DELTA_COL(name, field)                                                            \
  Column {                                                                                         \
    name, [](const StepResult& s) { return I(s.field); }, [](absl::string_view v, StepResult* s) { \
      return ParseInteger(v, /*signed_ok=*/true, &s->field);                                       \
    }                                                                                              \
  }

std::string CodesText(const std::map<std::string, int64_t>& codes) {
  std::vector<std::string> parts;
  for (const auto& [code, n] : codes) parts.push_back(absl::StrCat(code, "=", n));
  return absl::StrJoin(parts, ";");
}

bool ParseCodes(absl::string_view text, std::map<std::string, int64_t>* out) {
  out->clear();
  for (absl::string_view part : absl::StrSplit(text, ';', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(part, absl::MaxSplits('=', 1));
    int64_t n = 0;
    if (kv.first.empty() || !ParseCount(kv.second, &n)) return false;
    (*out)[std::string(kv.first)] = n;
  }
  return true;
}

const std::vector<Column>& Columns() {
  static const auto* columns = new std::vector<Column>{
      Column{"mode", [](const StepResult& s) { return s.mode; },
             [](absl::string_view v, StepResult* s) {
               s->mode = std::string(v);
               return v == "open" || v == "closed";
             }},
      Column{"arrival", [](const StepResult& s) { return s.arrival; },
             [](absl::string_view v, StepResult* s) {
               s->arrival = std::string(v);
               return true;
             }},
      RANKLOAD_DCOL("target_rps", target_rps),
      RANKLOAD_ICOL("concurrency", concurrency),
      RANKLOAD_DCOL("warmup_s", warmup_s),
      RANKLOAD_DCOL("duration_s", duration_s),
      RANKLOAD_DCOL("mean_candidates", mean_candidates),
      RANKLOAD_ICOL("sent", sent),
      RANKLOAD_ICOL("completed", completed),
      RANKLOAD_ICOL("ok", ok),
      RANKLOAD_ICOL("errors", errors),
      RANKLOAD_DCOL("sent_rps", sent_rps),
      RANKLOAD_DCOL("achieved_rps", achieved_rps),
      RANKLOAD_DCOL("ok_rps", ok_rps),
      RANKLOAD_DCOL("candidates_per_s", candidates_per_s),
      RANKLOAD_DCOL("latency_p50_us", latency.p50_us),
      RANKLOAD_DCOL("latency_p90_us", latency.p90_us),
      RANKLOAD_DCOL("latency_p99_us", latency.p99_us),
      RANKLOAD_DCOL("latency_p99_9_us", latency.p999_us),
      RANKLOAD_DCOL("latency_max_us", latency.max_us),
      RANKLOAD_DCOL("latency_mean_us", latency.mean_us),
      RANKLOAD_DCOL("latency_slo_percentile_us", latency.slo_percentile_us),
      RANKLOAD_DCOL("service_p50_us", service.p50_us),
      RANKLOAD_DCOL("service_p99_us", service.p99_us),
      RANKLOAD_DCOL("service_max_us", service.max_us),
      RANKLOAD_DCOL("send_lag_p99_us", send_lag.p99_us),
      RANKLOAD_DCOL("send_lag_max_us", send_lag.max_us),
      RANKLOAD_ICOL("late_sends", late_sends),
      Column{"client_behind",
             [](const StepResult& s) { return std::string(s.client_behind ? "1" : "0"); },
             [](absl::string_view v, StepResult* s) {
               s->client_behind = v == "1";
               return v == "0" || v == "1";
             }},
      Column{"client_cpu_cores", [](const StepResult& s) { return D(s.client_cpu_cores); },
             [](absl::string_view v, StepResult* s) {
               return absl::SimpleAtod(v, &s->client_cpu_cores);
             },
             "0"},
      Column{"errors_by_code", [](const StepResult& s) { return CodesText(s.errors_by_code); },
             [](absl::string_view v, StepResult* s) { return ParseCodes(v, &s->errors_by_code); }},
      RANKLOAD_DELTA_COL("server_requests", server_window.requests),
      RANKLOAD_DELTA_COL("server_candidates", server_window.candidates),
      RANKLOAD_DCOL("server_mean_request_us", server_window.mean_request_us),
      RANKLOAD_DCOL("server_p99_request_us", server_window.p99_request_us),
      RANKLOAD_DCOL("server_mean_queue_us", server_window.mean_queue_us),
      RANKLOAD_DCOL("server_mean_compute_us", server_window.mean_compute_us),
      RANKLOAD_DCOL("server_mean_batch_candidates", server_window.mean_batch_candidates),
      RANKLOAD_DCOL("server_mean_batch_requests", server_window.mean_batch_requests),
      Column{"slo",
             [](const StepResult& s) {
               return std::string(!s.slo_pass.has_value() ? "" : *s.slo_pass ? "pass" : "fail");
             },
             [](absl::string_view v, StepResult* s) {
               if (v.empty()) {
                 s->slo_pass.reset();
               } else {
                 s->slo_pass = v == "pass";
               }
               return v.empty() || v == "pass" || v == "fail";
             }},
  };
  return *columns;
}

}  // namespace

std::string ReportToCsv(const Report& report) {
  std::vector<std::string> header = {"step"};
  for (const Column& c : Columns()) header.push_back(c.name);
  std::string out = absl::StrJoin(header, ",") + "\n";
  for (size_t i = 0; i < report.steps.size(); ++i) {
    std::vector<std::string> row = {absl::StrCat(i)};
    for (const Column& c : Columns()) row.push_back(c.get(report.steps[i]));
    absl::StrAppend(&out, absl::StrJoin(row, ","), "\n");
  }
  return out;
}

absl::StatusOr<std::vector<std::map<std::string, std::string>>> ParseCsv(absl::string_view text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, any = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field.push_back('"');
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field.push_back(c);
      }
      continue;
    }
    if (c == '"') {
      quoted = true;
      any = true;
    } else if (c == ',') {
      row.push_back(std::move(field));
      field.clear();
      any = true;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      if (any || !field.empty()) {
        row.push_back(std::move(field));
        rows.push_back(std::move(row));
      }
      row.clear();
      field.clear();
      any = false;
    } else {
      field.push_back(c);
      any = true;
    }
  }
  if (quoted) return absl::InvalidArgumentError("csv: unterminated quote");
  if (any || !field.empty()) {
    row.push_back(std::move(field));
    rows.push_back(std::move(row));
  }
  std::vector<std::map<std::string, std::string>> out;
  if (rows.empty()) return out;
  for (size_t r = 1; r < rows.size(); ++r) {
    if (rows[r].size() != rows[0].size()) {
      return absl::InvalidArgumentError(absl::StrCat("csv: row ", r + 1, " has ", rows[r].size(),
                                                     " fields, the header ", rows[0].size()));
    }
    std::map<std::string, std::string> m;
    for (size_t c = 0; c < rows[0].size(); ++c) m[rows[0][c]] = rows[r][c];
    out.push_back(std::move(m));
  }
  return out;
}

absl::StatusOr<StepResult> StepFromCsvRow(const std::map<std::string, std::string>& row) {
  StepResult s;
  for (const Column& c : Columns()) {
    auto it = row.find(c.name);
    if (it == row.end() && c.absent == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("csv: no column ", c.name));
    }
    const absl::string_view value = it != row.end() ? absl::string_view(it->second) : c.absent;
    if (!c.set(value, &s)) {
      return absl::InvalidArgumentError(
          absl::StrCat("csv: column ", c.name, ": bad value \"", value, "\""));
    }
  }
  s.server_window.available = s.server_window.requests > 0;
  return s;
}

}  // namespace rankd::loadtest
