// The report as CSV (rankload --csv): a header, then one row per step (a
// single run has one row; a sweep or an SLO search one per probe). Latencies
// in us, rates per second; `errors_by_code` is "CODE=n;CODE=n"; `slo` is
// pass / fail / empty. Fields never contain commas, so no quoting is needed;
// ParseCsv still honours RFC 4180 quotes for files edited elsewhere.
#ifndef RANKD_LOADTEST_REPORT_REPORT_CSV_H_
#define RANKD_LOADTEST_REPORT_REPORT_CSV_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loadtest/report/report.h"

namespace rankd::loadtest {

std::string ReportToCsv(const Report& report);

// Rows of a CSV text as header -> value maps. INVALID_ARGUMENT on a row whose
// field count differs from the header's, or an unterminated quote.
absl::StatusOr<std::vector<std::map<std::string, std::string>>> ParseCsv(absl::string_view text);

// The step fields a CSV row holds (the rest stay default). Errors name the column.
absl::StatusOr<StepResult> StepFromCsvRow(const std::map<std::string, std::string>& row);

}  // namespace rankd::loadtest

#endif  // RANKD_LOADTEST_REPORT_REPORT_CSV_H_
