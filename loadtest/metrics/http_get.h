// An HTTP/1.1 GET with cpp-httplib's client, to read a Prometheus /metrics
// page: "http://host:port/path" only (no TLS, no redirects, no proxies).
// Blocking, thread-safe (no shared state). Connecting and each read wait at
// most `timeout`, and the whole body must arrive by then.
#ifndef RANKD_LOADTEST_METRICS_HTTP_GET_H_
#define RANKD_LOADTEST_METRICS_HTTP_GET_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace rankd::loadtest {

struct ParsedUrl {
  std::string host;
  std::string port;  // "80" when the URL has none
  std::string path;  // "/" when the URL has none
};

// INVALID_ARGUMENT unless `url` is http://HOST[:PORT][/PATH] (HOST may be [v6]).
absl::StatusOr<ParsedUrl> ParseHttpUrl(absl::string_view url);

// The body of a 200 answer. UNAVAILABLE when the host cannot be reached,
// DEADLINE_EXCEEDED past `timeout`, INTERNAL for another status or a
// malformed answer.
absl::StatusOr<std::string> HttpGet(absl::string_view url, absl::Duration timeout);

}  // namespace rankd::loadtest

#endif  // RANKD_LOADTEST_METRICS_HTTP_GET_H_
