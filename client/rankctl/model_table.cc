#include "client/rankctl/model_table.h"

#include <algorithm>
#include <array>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

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

}  // namespace rankd::rankctl
