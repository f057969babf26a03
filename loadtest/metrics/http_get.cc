#include "loadtest/metrics/http_get.h"

#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "httplib.h"

namespace rankd::loadtest {

absl::StatusOr<ParsedUrl> ParseHttpUrl(absl::string_view url) {
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", url, "\": ", why, " (want http://HOST[:PORT][/PATH])"));
  };
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, "http://")) return bad("not an http:// URL");
  ParsedUrl out;
  const size_t slash = rest.find('/');
  absl::string_view authority = rest.substr(0, slash);
  out.path = slash == absl::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (authority.empty()) return bad("no host");
  if (authority[0] == '[') {
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) return bad("unterminated [IPv6] host");
    out.host = std::string(authority.substr(1, close - 1));
    authority.remove_prefix(close + 1);
    if (!authority.empty() && !absl::ConsumePrefix(&authority, ":")) return bad("junk after host");
    out.port = std::string(authority);
  } else {
    const size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != absl::string_view::npos) out.port = std::string(authority.substr(colon + 1));
  }
  if (out.host.empty()) return bad("no host");
  if (out.port.empty()) out.port = "80";
  int port = 0;
  if (!absl::SimpleAtoi(out.port, &port) || port < 1 || port > 65535) return bad("bad port");
  return out;
}

absl::StatusOr<std::string> HttpGet(absl::string_view url, absl::Duration timeout) {
  auto parsed = ParseHttpUrl(url);
  if (!parsed.ok()) return parsed.status();
  const absl::Time deadline = absl::Now() + timeout;
  int port = 80;
  (void)absl::SimpleAtoi(parsed->port, &port);  // checked by ParseHttpUrl
  httplib::Client client(parsed->host, port);
  const auto step = absl::ToChronoMicroseconds(timeout);
  client.set_connection_timeout(step);
  client.set_read_timeout(step);
  client.set_write_timeout(step);
  client.set_keep_alive(false);
  std::string body;
  bool late = false;
  // The body arrives in pieces; each read waits at most `timeout`, and the
  // whole answer must be in by the deadline.
  httplib::Result res = client.Get(
      parsed->path,
      [&](const httplib::Response&) { return true; },
      [&](const char* data, size_t n) {
        if (absl::Now() > deadline) {
          late = true;
          return false;
        }
        body.append(data, n);
        return true;
      });
  const std::string what = absl::StrCat("GET ", url);
  if (!res) {
    const httplib::Error e = res.error();
    if (late || e == httplib::Error::ConnectionTimeout ||
        (e == httplib::Error::Read && absl::Now() >= deadline)) {
      return absl::DeadlineExceededError(
          absl::StrCat(what, ": timed out after ", absl::FormatDuration(timeout)));
    }
    if (e == httplib::Error::Connection) {
      return absl::UnavailableError(absl::StrCat(what, ": cannot connect"));
    }
    return absl::InternalError(absl::StrCat(what, ": ", httplib::to_string(e)));
  }
  if (res->status != 200) {
    return absl::InternalError(absl::StrCat(what, ": HTTP status ", res->status));
  }
  return body;
}

}  // namespace rankd::loadtest
