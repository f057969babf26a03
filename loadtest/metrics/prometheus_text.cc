#include "loadtest/metrics/prometheus_text.h"

#include <cmath>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace rankd::loadtest {
namespace {

bool IsNameStart(char c) { return absl::ascii_isalpha(c) || c == '_' || c == ':'; }
bool IsNameChar(char c) { return IsNameStart(c) || absl::ascii_isdigit(c); }

bool ParseValue(absl::string_view text, double* out) {
  if (text == "+Inf" || text == "Inf") {
    *out = std::numeric_limits<double>::infinity();
    return true;
  }
  if (text == "-Inf") {
    *out = -std::numeric_limits<double>::infinity();
    return true;
  }
  if (text == "NaN") {
    *out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  return absl::SimpleAtod(text, out);
}

// Parses one sample line; the error has no line number (the caller adds it).
absl::Status ParseLine(absl::string_view line, PromSample* out) {
  size_t i = 0;
  if (line.empty() || !IsNameStart(line[0])) return absl::InvalidArgumentError("bad metric name");
  while (i < line.size() && IsNameChar(line[i])) ++i;
  out->name = std::string(line.substr(0, i));
  size_t j = i;
  while (j < line.size() && (line[j] == ' ' || line[j] == '\t')) ++j;
  if (j < line.size() && line[j] == '{') {
    i = j;
    ++i;
    for (;;) {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      if (i < line.size() && line[i] == '}') {
        ++i;
        break;
      }
      const size_t start = i;
      if (i >= line.size() || !IsNameStart(line[i])) {
        return absl::InvalidArgumentError("bad label name");
      }
      while (i < line.size() && IsNameChar(line[i])) ++i;
      std::string key(line.substr(start, i - start));
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      if (i >= line.size() || line[i] != '=') return absl::InvalidArgumentError("expected '='");
      ++i;
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      if (i >= line.size() || line[i] != '"') return absl::InvalidArgumentError("expected '\"'");
      ++i;
      std::string value;
      bool closed = false;
      while (i < line.size()) {
        const char c = line[i++];
        if (c == '"') {
          closed = true;
          break;
        }
        if (c == '\\') {
          if (i >= line.size()) break;
          const char e = line[i++];
          value.push_back(e == 'n' ? '\n' : e);  // \\ and \" stand for themselves
        } else {
          value.push_back(c);
        }
      }
      if (!closed) return absl::InvalidArgumentError("unterminated label value");
      if (!out->labels.emplace(std::move(key), std::move(value)).second) {
        return absl::InvalidArgumentError("repeated label");
      }
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      if (i < line.size() && line[i] == ',') {
        ++i;
        continue;
      }
      if (i < line.size() && line[i] == '}') {
        ++i;
        break;
      }
      return absl::InvalidArgumentError("expected ',' or '}'");
    }
  }
  std::vector<absl::string_view> rest =
      absl::StrSplit(line.substr(i), absl::ByAnyChar(" \t"), absl::SkipEmpty());
  if (rest.empty() || rest.size() > 2) {
    return absl::InvalidArgumentError("expected a value (and an optional timestamp)");
  }
  if (!ParseValue(rest[0], &out->value)) {
    return absl::InvalidArgumentError(absl::StrCat("bad value \"", rest[0], "\""));
  }
  int64_t timestamp = 0;
  if (rest.size() == 2 && !absl::SimpleAtoi(rest[1], &timestamp)) {
    return absl::InvalidArgumentError(absl::StrCat("bad timestamp \"", rest[1], "\""));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PromSnapshot> PromSnapshot::Parse(absl::string_view text) {
  PromSnapshot snapshot;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    PromSample sample;
    if (absl::Status s = ParseLine(line, &sample); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("metrics line ", line_no, ": ", s.message(), ": \"", line, "\""));
    }
    snapshot.samples_.push_back(std::move(sample));
  }
  return snapshot;
}

double PromSnapshot::Sum(absl::string_view name,
                         const std::function<bool(const PromLabels&)>& filter) const {
  double sum = 0;
  for (const PromSample& s : samples_) {
    if (s.name == name && (filter == nullptr || filter(s.labels))) sum += s.value;
  }
  return sum;
}

std::map<double, double> PromSnapshot::Buckets(
    absl::string_view base, const std::function<bool(const PromLabels&)>& filter) const {
  const std::string name = absl::StrCat(base, "_bucket");
  std::map<double, double> out;
  for (const PromSample& s : samples_) {
    if (s.name != name || (filter != nullptr && !filter(s.labels))) continue;
    auto le = s.labels.find("le");
    double edge = 0;
    if (le == s.labels.end() || !ParseValue(le->second, &edge)) continue;
    out[edge] += s.value;
  }
  return out;
}

double HistogramQuantile(double q, const std::map<double, double>& cumulative) {
  if (cumulative.empty()) return std::nan("");
  const double total = cumulative.rbegin()->second;
  if (!(total > 0)) return std::nan("");
  const double rank = std::clamp(q, 0.0, 1.0) * total;
  double prev_edge = 0, prev_count = 0, last_finite = 0;
  for (const auto& [edge, count] : cumulative) {
    if (std::isinf(edge)) return last_finite;
    last_finite = edge;
    if (count >= rank && count > prev_count) {
      return prev_edge + (edge - prev_edge) * (rank - prev_count) / (count - prev_count);
    }
    prev_edge = edge;
    prev_count = count;
  }
  return last_finite;
}

ServerFigures ServerDelta(const PromSnapshot& before, const PromSnapshot& after,
                          const std::set<std::string>& models, double span_s) {
  ServerFigures f;
  f.available = true;
  f.span_s = span_s;
  const auto ours = [&models](const PromLabels& l) {
    auto m = l.find("model");
    return m != l.end() && (m->second.empty() || models.count(m->second) > 0);
  };
  const auto delta = [&](absl::string_view name) {
    return after.Sum(name, ours) - before.Sum(name, ours);
  };
  const auto mean_us = [&](absl::string_view base) {
    const double n = delta(absl::StrCat(base, "_count"));
    return n > 0 ? delta(absl::StrCat(base, "_sum")) / n * 1e6 : 0.0;
  };
  const auto quantile_us = [&](absl::string_view base, double q) {
    std::map<double, double> b = after.Buckets(base, ours);
    for (const auto& [edge, count] : before.Buckets(base, ours)) b[edge] -= count;
    const double v = HistogramQuantile(q, b);
    return std::isnan(v) ? 0.0 : v * 1e6;
  };

  std::set<std::string> codes;
  for (const PromSample& s : after.samples()) {
    if (s.name == "rankd_requests_total" && ours(s.labels) && s.labels.count("code")) {
      codes.insert(s.labels.at("code"));
    }
  }
  for (const std::string& code : codes) {
    const auto ours_with_code = [&](const PromLabels& l) {
      auto c = l.find("code");
      return ours(l) && c != l.end() && c->second == code;
    };
    const int64_t n = std::llround(after.Sum("rankd_requests_total", ours_with_code) -
                                   before.Sum("rankd_requests_total", ours_with_code));
    if (n != 0) f.requests_by_code[code] = n;
    f.requests += n;
  }
  f.candidates = std::llround(delta("rankd_candidates_total"));
  f.batches = std::llround(delta("rankd_batch_candidates_count"));
  f.mean_request_us = mean_us("rankd_request_duration_seconds");
  f.p50_request_us = quantile_us("rankd_request_duration_seconds", 0.5);
  f.p99_request_us = quantile_us("rankd_request_duration_seconds", 0.99);
  f.mean_queue_us = mean_us("rankd_queue_duration_seconds");
  f.p99_queue_us = quantile_us("rankd_queue_duration_seconds", 0.99);
  f.mean_compute_us = mean_us("rankd_compute_duration_seconds");
  {
    const double n = delta("rankd_batch_candidates_count");
    f.mean_batch_candidates = n > 0 ? delta("rankd_batch_candidates_sum") / n : 0;
    const double r = delta("rankd_batch_requests_count");
    f.mean_batch_requests = r > 0 ? delta("rankd_batch_requests_sum") / r : 0;
  }
  f.ids_missing = std::llround(delta("rankd_ids_missing_total"));
  f.ids_out_of_range = std::llround(delta("rankd_ids_out_of_range_total"));
  return f;
}

}  // namespace rankd::loadtest
