#include "client/rankctl/model_table.h"

#include <algorithm>
#include <array>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/time.h"

namespace rankd::rankctl {
namespace {

constexpr int kColumns = 9;
using Row = std::array<std::string, kColumns>;

// Seconds with two decimals; "-" for 0 (not loaded or warmed up yet).
std::string Seconds(double s) { return s == 0 ? "-" : absl::StrFormat("%.2f", s); }

Row VersionRow(const std::string& model, const rankd::v1::VersionStatus& v) {
  return {model, absl::StrCat(v.version()), rankd::v1::VersionState_Name(v.state()),
          v.labels().empty() ? "-" : absl::StrJoin(v.labels(), ","), Seconds(v.load_seconds()),
          Seconds(v.warmup_seconds()), HumanBytes(v.device_bytes()), HumanBytes(v.host_bytes()),
          // One row per version, whatever the reason's text holds.
          absl::StrReplaceAll(v.reason(), {{"\n", " "}})};
}

std::string Table(const std::vector<const rankd::v1::ModelStatus*>& models) {
  std::vector<Row> rows = {
      {"MODEL", "VERSION", "STATE", "LABELS", "LOAD_S", "WARMUP_S", "HBM", "HOST", "REASON"}};
  for (const rankd::v1::ModelStatus* model : models) {
    if (model->versions().empty()) {
      rows.push_back({model->name(), "-", "-", "-", "-", "-", "-", "-", "no version loaded yet"});
    }
    for (const auto& version : model->versions())
      rows.push_back(VersionRow(model->name(), version));
  }
  std::array<size_t, kColumns> width{};
  for (const Row& row : rows) {
    for (int c = 0; c < kColumns; ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string text;
  for (const Row& row : rows) {
    std::string line;
    for (int c = 0; c < kColumns; ++c) {
      absl::StrAppend(&line, row[c]);
      if (c + 1 < kColumns) line.append(width[c] - row[c].size() + 2, ' ');
    }
    line.erase(line.find_last_not_of(' ') + 1);  // an empty REASON leaves padding
    absl::StrAppend(&text, line, "\n");
  }
  for (const rankd::v1::ModelStatus* model : models) {
    for (const auto& v : model->versions()) {
      for (const auto& d : v.dynamic_tables()) {
        absl::StrAppend(&text, "  ", model->name(), " ", v.version(), ": dynamic table ",
                        d.table(), ": ", d.keys(), " of ", d.max_keys(), " keys, ",
                        d.evictions(), " evicted\n");
      }
      for (const auto& p : v.update_positions()) {
        absl::StrAppend(&text, "  ", model->name(), " ", v.version(), ": updates from ",
                        p.producer_id(), " to ", p.table(), ": last sequence ", p.last_sequence());
        if (p.last_timestamp_unix_us() != 0) {
          absl::StrAppend(&text, " at ",
                          absl::FormatTime("%Y-%m-%dT%H:%M:%SZ",
                                           absl::FromUnixMicros(p.last_timestamp_unix_us()),
                                           absl::UTCTimeZone()));
        }
        absl::StrAppend(&text, "\n");
      }
      if (v.snapshot_of() != 0) {
        absl::StrAppend(&text, "  ", model->name(), " ", v.version(), ": snapshot of version ",
                        v.snapshot_of(), "\n");
      }
    }
  }
  for (const rankd::v1::ModelStatus* model : models) {
    if (model->config_error().empty()) continue;
    absl::StrAppend(&text, model->name(), ": serving.pbtxt: ", model->config_error(),
                    " (the last good version policy is kept)\n");
  }
  return text;
}

}  // namespace

std::string HumanBytes(int64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit + 1 < static_cast<int>(std::size(kUnits))) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

std::string ModelTable(const google::protobuf::RepeatedPtrField<rankd::v1::ModelStatus>& models) {
  return Table(
      std::vector<const rankd::v1::ModelStatus*>(models.pointer_begin(), models.pointer_end()));
}

std::string ModelTable(const rankd::v1::ModelStatus& model) { return Table({&model}); }

std::string UpdateSummaryTable(const rankd::v1::UpdateSummary& summary) {
  constexpr int kCols = 10;
  std::vector<std::array<std::string, kCols>> rows = {
      {"VERSION", "TABLE", "MESSAGES", "DUPLICATES", "ROWS", "INSERTED", "UPDATED", "DELETED",
       "NOT_FOUND", "EVICTED"}};
  for (const auto& t : summary.tables()) {
    rows.push_back({absl::StrCat(t.version()), t.table(), absl::StrCat(t.messages()),
                    absl::StrCat(t.duplicates()), absl::StrCat(t.rows_applied()),
                    absl::StrCat(t.keys_inserted()), absl::StrCat(t.keys_updated()),
                    absl::StrCat(t.keys_deleted()), absl::StrCat(t.keys_not_found()),
                    absl::StrCat(t.keys_evicted())});
  }
  std::array<size_t, kCols> width{};
  for (const auto& row : rows) {
    for (int c = 0; c < kCols; ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string text;
  for (const auto& row : rows) {
    std::string line = "  ";
    for (int c = 0; c < kCols; ++c) {
      absl::StrAppend(&line, row[c]);
      if (c + 1 < kCols) line.append(width[c] - row[c].size() + 2, ' ');
    }
    absl::StrAppend(&text, line, "\n");
  }
  return text;
}

}  // namespace rankd::rankctl
