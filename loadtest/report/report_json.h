// The report as JSON (rankload --json): settings, every step (rates, latency
// summaries in us, errors by code, intervals, server-side figures) and the SLO
// answer. ReportFromJson reads it back (tests, and tools that post-process).
#ifndef RANKD_LOADTEST_REPORT_REPORT_JSON_H_
#define RANKD_LOADTEST_REPORT_REPORT_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loadtest/report/report.h"

namespace rankd::loadtest {

// Pretty-printed JSON text, ending with a newline.
std::string ReportToJson(const Report& report);
// INVALID_ARGUMENT naming the problem when `text` is not such a report.
absl::StatusOr<Report> ReportFromJson(absl::string_view text);

}  // namespace rankd::loadtest

#endif  // RANKD_LOADTEST_REPORT_REPORT_JSON_H_
