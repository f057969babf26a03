// Silences protobuf's log lines in a fuzz target. Hostile bytes make the
// parser log a line for every string field that is not UTF-8, on nearly
// every input, which slows the target and buries libFuzzer's own report in
// its log. The parse result is unchanged: an unparseable input is
// still refused. Call at the start of LLVMFuzzerTestOneInput (the first call
// installs the handler; fuzz targets are single-threaded).
#ifndef RANKD_TESTS_FUZZ_QUIET_PROTOBUF_H_
#define RANKD_TESTS_FUZZ_QUIET_PROTOBUF_H_

#include "google/protobuf/stubs/logging.h"

namespace rankd::fuzz {

inline void QuietProtobufLogs() {
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
}

}  // namespace rankd::fuzz

#endif  // RANKD_TESTS_FUZZ_QUIET_PROTOBUF_H_
