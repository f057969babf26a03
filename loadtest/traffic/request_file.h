// Reads ScoreRequests to replay: proto3 JSON, one per line (the format of
// `rankd gen-requests`, `rankd score` and `rankctl score`); blank lines are
// skipped. Errors name the file and line ("req.jsonl:12: ...").
#ifndef RANKD_LOADTEST_TRAFFIC_REQUEST_FILE_H_
#define RANKD_LOADTEST_TRAFFIC_REQUEST_FILE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "loadtest/traffic/request_generator.h"

namespace rankd::loadtest {

// Every request of every file, in order. NOT_FOUND for a file that cannot be
// opened, INVALID_ARGUMENT for a bad line or when no request at all is read.
absl::StatusOr<RequestPool> ReadRequestFiles(const std::vector<std::string>& paths);

}  // namespace rankd::loadtest

#endif  // RANKD_LOADTEST_TRAFFIC_REQUEST_FILE_H_
