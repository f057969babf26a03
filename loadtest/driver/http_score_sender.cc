#include "loadtest/driver/http_score_sender.h"

#include <chrono>
#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "httplib.h"
#include "loadtest/metrics/http_get.h"

namespace rankd::loadtest {
namespace {

// `text` with every byte outside RFC 3986's unreserved set percent-encoded.
std::string EscapePathSegment(absl::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppend(&out, "%", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
}

}  // namespace

absl::StatusCode HttpStatusToCode(int status) {
  switch (status) {
    case 200:
      return absl::StatusCode::kOk;
    case 400:
    case 415:
      return absl::StatusCode::kInvalidArgument;
    case 401:
      return absl::StatusCode::kUnauthenticated;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    case 409:
      return absl::StatusCode::kAborted;
    case 413:
    case 429:
      return absl::StatusCode::kResourceExhausted;
    case 499:
      return absl::StatusCode::kCancelled;
    case 500:
      return absl::StatusCode::kInternal;
    case 501:
      return absl::StatusCode::kUnimplemented;
    case 503:
      return absl::StatusCode::kUnavailable;
    case 504:
      return absl::StatusCode::kDeadlineExceeded;
    default:
      return absl::StatusCode::kUnknown;
  }
}

absl::StatusOr<std::unique_ptr<HttpScoreSender>> HttpScoreSender::Create(const Options& options,
                                                                         const RequestPool* pool) {
  if (pool == nullptr || pool->empty()) return absl::InvalidArgumentError("pool: no requests");
  if (options.connections < 1 || options.connections > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("connections: must be in [1, 4096], got ", options.connections));
  }
  if (options.connect_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("connect_timeout: must be > 0");
  }
  if (options.tls_ca_file.empty() &&
      (!options.tls_cert_file.empty() || !options.tls_key_file.empty())) {
    return absl::InvalidArgumentError("tls_cert_file / tls_key_file: need tls_ca_file (HTTPS)");
  }
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError("tls_cert_file and tls_key_file: give both or neither");
  }
  auto url = ParseHttpUrl(absl::StrCat("http://", options.target));
  if (!url.ok() || url->path != "/") {
    return absl::InvalidArgumentError(
        absl::StrCat("target: \"", options.target, "\" is not HOST:PORT"));
  }
  const bool v6 = url->host.find(':') != std::string::npos;
  std::string base_url = absl::StrCat(options.tls_ca_file.empty() ? "http" : "https", "://",
                                      v6 ? "[" : "", url->host, v6 ? "]" : "", ":", url->port);
  std::vector<Prepared> prepared;
  prepared.reserve(pool->size());
  for (size_t i = 0; i < pool->size(); ++i) {
    const rankd::v1::ScoreRequest& r = *(*pool)[i];
    Prepared p;
    p.path = absl::StrCat("/v1/models/", EscapePathSegment(r.model()), ":score");
    p.candidates = r.num_candidates();
    const auto s = google::protobuf::util::MessageToJsonString(r, &p.body);
    if (!s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("request ", i, " as JSON: ", s.ToString()));
    }
    prepared.push_back(std::move(p));
  }
  return std::unique_ptr<HttpScoreSender>(
      new HttpScoreSender(options, std::move(base_url), std::move(prepared)));
}

HttpScoreSender::HttpScoreSender(const Options& options, std::string base_url,
                                 std::vector<Prepared> prepared)
    : options_(options), base_url_(std::move(base_url)), prepared_(std::move(prepared)) {
  workers_.reserve(options_.connections);
  for (int i = 0; i < options_.connections; ++i) workers_.emplace_back([this] { Worker(); });
}

HttpScoreSender::~HttpScoreSender() {
  std::deque<Job> unsent;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    unsent.swap(queue_);
  }
  for (Job& job : unsent) job.done({absl::StatusCode::kCancelled, 0});
  for (auto& t : workers_) t.join();
}

void HttpScoreSender::Send(size_t index, absl::Duration deadline, Done done) {
  Job job{index, absl::Now() + deadline, std::move(done)};
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      queue_.push_back(std::move(job));
      return;
    }
  }
  job.done({absl::StatusCode::kCancelled, 0});
}

void HttpScoreSender::Worker() {
  httplib::Client client(base_url_, options_.tls_cert_file, options_.tls_key_file);
  if (!options_.tls_ca_file.empty()) {
    client.set_ca_cert_path(options_.tls_ca_file.c_str());
    client.enable_server_certificate_verification(true);
  }
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);
  client.set_connection_timeout(absl::ToChronoMicroseconds(options_.connect_timeout));
  for (;;) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](HttpScoreSender* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu_) {
            return !s->queue_.empty() || s->stopping_;
          },
          this));
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job.done(Post(&client, prepared_[job.index], job.deadline));
  }
}

SendResult HttpScoreSender::Post(httplib::Client* client, const Prepared& request,
                                 absl::Time deadline) const {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return {absl::StatusCode::kDeadlineExceeded, 0};
  // httplib waits in whole milliseconds, rounded down: round up, and one
  // more, so a read that times out ends past the deadline.
  const auto wait = absl::ToChronoMicroseconds(absl::Ceil(left, absl::Milliseconds(1)) +
                                               absl::Milliseconds(1));
  client->set_read_timeout(wait);
  client->set_write_timeout(wait);
  const int64_t ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(left));
  const httplib::Headers headers = {{"Request-Timeout-Ms", absl::StrCat(ms)}};
  httplib::Result res = client->Post(request.path, headers, request.body, "application/json");
  if (!res) {
    // No answer: a read that ran out the deadline, else a transport failure.
    return {absl::Now() >= deadline ? absl::StatusCode::kDeadlineExceeded
                                    : absl::StatusCode::kUnavailable,
            0};
  }
  if (res->status != 200) return {HttpStatusToCode(res->status), 0};
  rankd::v1::ScoreResponse response;
  google::protobuf::util::JsonParseOptions parse;
  parse.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(res->body, &response, parse).ok() ||
      response.scores_size() != request.candidates) {
    return {absl::StatusCode::kInternal, 0};
  }
  return {absl::StatusCode::kOk, response.version()};
}

}  // namespace rankd::loadtest
