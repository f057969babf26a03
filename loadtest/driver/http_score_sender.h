// rankload's HTTP/JSON sender: POST /v1/models/{model}:score with the
// request's proto3 JSON (the body `curl -d @req.json` sends), over
// `connections` keep-alive HTTP/1.1 connections (cpp-httplib's client), each
// owned by one worker thread. HTTP/1.1 carries one request at a time per
// connection, so at most `connections` calls are on the wire; further sends
// wait in the sender's queue, and that wait counts in their latency (an
// honest client with a connection pool of that size sees the same).
//
// The deadline travels as the Request-Timeout-Ms header (the server's own
// deadline) and bounds the client's reads; a call whose deadline passes in
// the queue ends DEADLINE_EXCEEDED unsent. HTTP statuses map back to gRPC
// codes (HttpStatusToCode); a 200 whose body is not a ScoreResponse with
// one score per candidate is INTERNAL.
//
// Threads: the workers run `done`. The destructor stops taking work, fails
// what is still queued with CANCELLED, and joins the workers (each ends
// within its call's deadline).
#ifndef RANKD_LOADTEST_DRIVER_HTTP_SCORE_SENDER_H_
#define RANKD_LOADTEST_DRIVER_HTTP_SCORE_SENDER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "loadtest/driver/score_sender.h"
#include "loadtest/traffic/request_generator.h"

namespace httplib {
class Client;
}  // namespace httplib

namespace rankd::loadtest {

// The gRPC code of an HTTP status from rankd (server/status_mapping.h's
// ToHttpStatus backwards; 413 and 429 are RESOURCE_EXHAUSTED, 415 is
// INVALID_ARGUMENT, any other status UNKNOWN).
absl::StatusCode HttpStatusToCode(int status);

class HttpScoreSender : public ScoreSender {
 public:
  struct Options {
    // rankd's HTTP listener (--http_port), "host:port" ([v6]:port for IPv6).
    std::string target = "localhost:8501";
    // Keep-alive connections (and worker threads); in [1, 4096].
    int connections = 64;
    // HTTPS when set: CAs that sign the server's certificate (PEM file),
    // and optionally this client's certificate and key (mTLS).
    std::string tls_ca_file;
    std::string tls_cert_file;
    std::string tls_key_file;
    // How long a connection may take to open; > 0.
    absl::Duration connect_timeout = absl::Seconds(5);
  };

  // INVALID_ARGUMENT naming the option. The pool (non-empty) is serialized
  // here and not kept. Connects lazily.
  static absl::StatusOr<std::unique_ptr<HttpScoreSender>> Create(const Options& options,
                                                                 const RequestPool* pool);
  ~HttpScoreSender() override;

  void Send(size_t index, absl::Duration deadline, Done done) override;

 private:
  struct Prepared {
    std::string path;  // /v1/models/{model}:score
    std::string body;  // ScoreRequest JSON
    int candidates = 0;
  };
  struct Job {
    size_t index;
    absl::Time deadline;
    Done done;
  };

  HttpScoreSender(const Options& options, std::string base_url,
                  std::vector<Prepared> prepared);
  void Worker();
  SendResult Post(httplib::Client* client, const Prepared& request, absl::Time deadline) const;

  const Options options_;
  const std::string base_url_;  // http[s]://host:port
  const std::vector<Prepared> prepared_;

  absl::Mutex mu_;
  std::deque<Job> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace rankd::loadtest

#endif  // RANKD_LOADTEST_DRIVER_HTTP_SCORE_SENDER_H_
