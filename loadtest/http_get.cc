#include "loadtest/http_get.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace rankd::loadtest {
namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

int RemainingMs(absl::Time deadline) {
  const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
  return ms < 0 ? 0 : static_cast<int>(std::min<int64_t>(ms, 1 << 30));
}

// Waits for `events` on fd until the deadline: OK, or DEADLINE_EXCEEDED.
absl::Status Wait(int fd, short events, absl::Time deadline, absl::string_view what) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int r = poll(&p, 1, RemainingMs(deadline));
    if (r > 0) return absl::OkStatus();
    if (r == 0) return absl::DeadlineExceededError(absl::StrCat("timed out ", what));
    if (errno != EINTR) return absl::InternalError(absl::StrCat("poll: ", std::strerror(errno)));
  }
}

// Decodes a chunked body; false when malformed.
bool Dechunk(absl::string_view in, std::string* out) {
  for (;;) {
    const size_t eol = in.find("\r\n");
    if (eol == absl::string_view::npos) return false;
    absl::string_view size_text = in.substr(0, eol);
    size_text = size_text.substr(0, size_text.find(';'));
    uint64_t size = 0;
    if (!absl::SimpleHexAtoi(absl::StripAsciiWhitespace(size_text), &size)) return false;
    in.remove_prefix(eol + 2);
    if (size == 0) return true;
    if (in.size() < size + 2) return false;
    out->append(in.data(), size);
    in.remove_prefix(size + 2);
  }
}

}  // namespace

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

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addrs = nullptr;
  const int gai = getaddrinfo(parsed->host.c_str(), parsed->port.c_str(), &hints, &addrs);
  if (gai != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve ", parsed->host, ": ", gai_strerror(gai)));
  }
  std::string last_error = "no address";
  int connected = -1;
  for (addrinfo* a = addrs; a != nullptr && connected < 0; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      connected = fd;
      break;
    }
    if (errno == EINPROGRESS && Wait(fd, POLLOUT, deadline, "connecting").ok()) {
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err == 0) {
        connected = fd;
        break;
      }
      last_error = std::strerror(err);
    } else {
      last_error = errno == EINPROGRESS ? "timed out" : std::strerror(errno);
    }
    close(fd);
  }
  freeaddrinfo(addrs);
  if (connected < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot connect to ", parsed->host, ":", parsed->port, ": ", last_error));
  }
  Fd fd(connected);

  const std::string request = absl::StrCat("GET ", parsed->path, " HTTP/1.1\r\nHost: ", parsed->host,
                                           ":", parsed->port,
                                           "\r\nAccept: text/plain\r\nConnection: close\r\n\r\n");
  size_t sent = 0;
  while (sent < request.size()) {
    if (auto s = Wait(fd.get(), POLLOUT, deadline, "sending"); !s.ok()) return s;
    const ssize_t n = send(fd.get(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      return absl::UnavailableError(absl::StrCat("send: ", std::strerror(errno)));
    }
    if (n > 0) sent += n;
  }
  std::string answer;
  char buf[16384];
  for (;;) {
    if (auto s = Wait(fd.get(), POLLIN, deadline, "reading the answer"); !s.ok()) return s;
    const ssize_t n = recv(fd.get(), buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return absl::UnavailableError(absl::StrCat("recv: ", std::strerror(errno)));
    }
    answer.append(buf, n);
    if (answer.size() > (256u << 20)) return absl::InternalError("answer larger than 256 MiB");
  }

  const size_t head_end = answer.find("\r\n\r\n");
  if (head_end == std::string::npos) return absl::InternalError("malformed HTTP answer (no header end)");
  std::vector<absl::string_view> head = absl::StrSplit(absl::string_view(answer).substr(0, head_end), "\r\n");
  std::vector<absl::string_view> status_line = absl::StrSplit(head[0], absl::MaxSplits(' ', 2));
  int code = 0;
  if (status_line.size() < 2 || !absl::StartsWith(status_line[0], "HTTP/") ||
      !absl::SimpleAtoi(status_line[1], &code)) {
    return absl::InternalError(absl::StrCat("malformed HTTP status line \"", head[0], "\""));
  }
  if (code != 200) return absl::InternalError(absl::StrCat("HTTP status \"", head[0], "\""));
  bool chunked = false;
  int64_t length = -1;
  for (size_t i = 1; i < head.size(); ++i) {
    const size_t colon = head[i].find(':');
    if (colon == absl::string_view::npos) continue;
    const std::string key = absl::AsciiStrToLower(head[i].substr(0, colon));
    const absl::string_view value = absl::StripAsciiWhitespace(head[i].substr(colon + 1));
    if (key == "transfer-encoding" && absl::StrContains(absl::AsciiStrToLower(value), "chunked")) chunked = true;
    if (key == "content-length" && !absl::SimpleAtoi(value, &length)) {
      return absl::InternalError("malformed Content-Length");
    }
  }
  absl::string_view body = absl::string_view(answer).substr(head_end + 4);
  if (chunked) {
    std::string out;
    if (!Dechunk(body, &out)) return absl::InternalError("malformed chunked body");
    return out;
  }
  if (length >= 0) {
    if (static_cast<int64_t>(body.size()) < length) return absl::InternalError("truncated body");
    body = body.substr(0, length);
  }
  return std::string(body);
}

}  // namespace rankd::loadtest
