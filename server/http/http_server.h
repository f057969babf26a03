// The public HTTP listener (--http_port, default 8501): the KServe v2 REST
// endpoints and the native JSON endpoint, served with cpp-httplib (Debian's
// libcpp-httplib).
//
//   GET  /v2/health/live                      200 while the process serves
//   GET  /v2/health/ready                     200 ready, 400 not (KServe: 4xx = false)
//   GET  /v2                                  server metadata
//   GET  /v2/models/{m}[/versions/{v}]        model metadata (tensors, shapes)
//   GET  /v2/models/{m}[/versions/{v}]/ready  200 ready, 400 not, 404 unknown model
//   POST /v2/models/{m}[/versions/{v}]/infer  KServe v2 JSON tensors
//   POST /v1/models/{m}[/versions/{v}|/labels/{l}]:score
//                                             rankd.v1.ScoreRequest JSON
// Inference: server/http/http_inference.h. Every error answer is JSON,
// {"error": "..."}, also for unknown paths (404) and malformed HTTP (400).
//
// Connections: each open connection holds one of up to `max_threads`
// threads (server/http/connection_threads.h); a connection idle for
// `keep_alive_timeout_s` between requests is closed, and so is one that
// sends nothing for `read_timeout_ms` while a request is being read, or
// reads nothing of the answer for as long. HTTP/1.1 keep-alive serves up to
// `keep_alive_max_requests` requests per connection.
//
// TLS: with `tls` set, the listener is HTTPS with the gRPC port's
// certificate, key and client CA (mTLS), re-read when the files change
// (server/http/http_tls.h).
//
// Borrows the manager, metrics and budget (they outlive it). Start once,
// then Stop (or destroy) once; port() is safe from any thread.
#ifndef RANKD_SERVER_HTTP_HTTP_SERVER_H_
#define RANKD_SERVER_HTTP_HTTP_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "httplib.h"
#include "server/http/http_inference.h"
#include "server/lifecycle/model_manager.h"
#include "server/metrics.h"
#include "server/request_budget.h"
#include "server/tls.h"

namespace rankd::server {

class HttpServer {
 public:
  struct Options {
    std::string host = "0.0.0.0";
    int port = 8501;  // 0 = any free port (see port())
    // Most connections served at once (one thread each); more wait for one
    // to close. --http_max_connections.
    int max_threads = 256;
    // Longest wait for a request's next bytes, or for the client to take
    // the answer's. --http_read_timeout_ms.
    int read_timeout_ms = 5000;
    // Longest idle time between two requests of a kept-alive connection.
    int keep_alive_timeout_s = 5;
    int keep_alive_max_requests = 1000;
    // ModelMetadata's platform ("rankd_cpu" or "rankd_cuda").
    std::string platform = "rankd_cpu";
    HttpInference::Options inference;
    // The gRPC port's TLS files; plaintext when !tls.enabled().
    TlsFiles tls;
  };

  // INVALID_ARGUMENT naming the flag for a bad option; UNAVAILABLE naming
  // the address when it cannot listen there.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(Options options,
                                                           const ModelManager* models,
                                                           Metrics* metrics,
                                                           RequestBudget* budget);
  ~HttpServer();  // Stop()

  int port() const { return port_; }
  // Stops accepting, lets each open connection finish the request it is
  // answering (idle ones close at once), joins every thread. Idempotent.
  void Stop();

 private:
  HttpServer(Options options, const ModelManager* models, Metrics* metrics,
             RequestBudget* budget);
  absl::Status Listen();
  void AddRoutes();
  void AddHealthRoutes();
  void AddModelRoutes();

  const Options options_;
  const ModelManager* models_;
  RequestBudget* budget_;
  HttpInference inference_;
  std::unique_ptr<httplib::Server> server_;
  std::thread listener_;
  int port_ = 0;
};

}  // namespace rankd::server

#endif  // RANKD_SERVER_HTTP_HTTP_SERVER_H_
