#include "server/http/http_server.h"

#include <sys/socket.h>

#include <chrono>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/model/error_text.h"
#include "inference/grpc_predict_v2.pb.h"
#include "server/build_info.h"
#include "server/http/connection_threads.h"
#include "server/http/http_tls.h"
#include "server/http/kserve_json.h"
#include "server/kserve_queries.h"

namespace rankd::server {
namespace {

constexpr char kJson[] = "application/json";

// "{model}[/versions/{v}]" as a regex: groups 1 (model) and 2 (version).
constexpr char kModelPath[] = R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)";

// The text of an answer with no body of its own (the error handler's).
const char* DefaultErrorText(int status) {
  switch (status) {
    case 400:
      return "malformed HTTP request";
    case 404:
      return "no such endpoint";
    case 405:
      return "method not allowed on this endpoint";
    case 413:
      return "request too large";
    case 414:
      return "request URI too long";
    default:
      return "request failed";
  }
}

// Readiness as KServe REST answers it: 200 true, 400 false.
void SetReady(bool ready, const char* field, httplib::Response& res) {
  res.status = ready ? 200 : 400;
  res.set_content(absl::StrCat("{\"", field, "\":", ready ? "true" : "false", "}"), kJson);
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(Options options,
                                                              const ModelManager* models,
                                                              Metrics* metrics,
                                                              RequestBudget* budget) {
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http_port: must be in [-1, 65535], got ", options.port));
  }
  if (options.max_threads < 1 || options.max_threads > 65536) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http_max_connections: must be in [1, 65536], got ", options.max_threads));
  }
  if (options.read_timeout_ms < 1 || options.keep_alive_timeout_s < 1) {
    return absl::InvalidArgumentError(
        "--http_read_timeout_ms and --http_keep_alive_s: must be >= 1");
  }
  std::unique_ptr<HttpServer> server(
      new HttpServer(std::move(options), models, metrics, budget));
  if (absl::Status s = server->Listen(); !s.ok()) return s;
  return server;
}

HttpServer::HttpServer(Options options, const ModelManager* models, Metrics* metrics,
                       RequestBudget* budget)
    : options_(std::move(options)),
      models_(models),
      budget_(budget),
      inference_(models, metrics, budget, options_.inference) {}

HttpServer::~HttpServer() { Stop(); }

absl::Status HttpServer::Listen() {
  const std::string address = absl::StrCat(options_.host, ":", options_.port);
  if (options_.tls.enabled()) {
    absl::StatusOr<std::unique_ptr<httplib::Server>> https = MakeHttpsServer(options_.tls);
    if (!https.ok()) return https.status();
    server_ = *std::move(https);
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  const int max_threads = options_.max_threads;
  server_->new_task_queue = [max_threads] { return new ConnectionThreads(max_threads); };
  server_->set_read_timeout(options_.read_timeout_ms / 1000,
                            (options_.read_timeout_ms % 1000) * 1000);
  server_->set_write_timeout(options_.read_timeout_ms / 1000,
                             (options_.read_timeout_ms % 1000) * 1000);
  server_->set_keep_alive_timeout(options_.keep_alive_timeout_s);
  server_->set_keep_alive_max_count(static_cast<size_t>(options_.keep_alive_max_requests));
  server_->set_tcp_nodelay(true);
  // SO_REUSEADDR only: cpp-httplib's default also sets SO_REUSEPORT, which
  // would let a second server bind the same port without an error. The
  // socket is kept to raise the listen backlog (cpp-httplib listens with 5).
  int listen_fd = -1;
  server_->set_socket_options([&listen_fd](socket_t fd) {
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_fd = fd;
  });
  AddRoutes();
  if (options_.port == 0) {
    port_ = server_->bind_to_any_port(options_.host);
  } else {
    port_ = server_->bind_to_port(options_.host, options_.port) ? options_.port : 0;
  }
  if (port_ <= 0) {
    port_ = 0;
    return absl::UnavailableError(absl::StrCat("--http_port: cannot listen on ", address));
  }
  if (listen_fd >= 0) ::listen(listen_fd, SOMAXCONN);
  listener_ = std::thread([this] { server_->listen_after_bind(); });
  // Stop() only stops a server that is running: wait until the accept loop
  // has started, so a Stop right after Start (a later listener failing to
  // start) cannot miss it and leave join() waiting forever.
  for (int i = 0; i < 10000 && !server_->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  return absl::OkStatus();
}

void HttpServer::Stop() {
  if (server_ == nullptr) return;
  server_->stop();
  if (listener_.joinable()) listener_.join();
}

void HttpServer::AddRoutes() {
  AddHealthRoutes();
  AddModelRoutes();
  // Every answer without a body of its own gets a JSON one.
  server_->set_error_handler(httplib::Server::HandlerWithResponse(
      [](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string text = DefaultErrorText(res.status);
    if (res.status == 404) {
      absl::StrAppend(&text, ": ", req.method, " ", engine::TruncateForError(req.path));
    }
    res.set_content(ErrorJson(text), kJson);
    return httplib::Server::HandlerResponse::Handled;
  }));
  server_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        SetErrorAnswer(absl::InternalError(absl::StrCat("internal error: ", what)), res);
      });
  // A client that announces a body over the limit (Expect: 100-continue)
  // is told 413 before it sends it.
  const int64_t max_body = options_.inference.max_body_bytes;
  server_->set_expect_100_continue_handler(
      [max_body](const httplib::Request& req, httplib::Response& res) {
        int64_t length = 0;
        if (absl::SimpleAtoi(req.get_header_value("Content-Length"), &length) &&
            length > max_body) {
          res.set_content(ErrorJson(absl::StrCat("request body of ", length,
                                                 " bytes is over the limit of ", max_body,
                                                 " bytes (--max_message_bytes)")),
                          kJson);
          res.status = 413;
          return 413;
        }
        return 100;
      });
}

void HttpServer::AddHealthRoutes() {
  server_->Get("/v2/health/live", [](const httplib::Request&, httplib::Response& res) {
    SetReady(true, "live", res);
  });
  server_->Get("/v2/health/ready", [this](const httplib::Request&, httplib::Response& res) {
    SetReady(KServeServerReady(*models_, *budget_), "ready", res);
  });
  server_->Get("/v2", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(absl::StrCat("{\"name\":\"rankd\",\"version\":", JsonString(kRankdVersion),
                                 ",\"extensions\":[]}"),
                    kJson);
  });
}

void HttpServer::AddModelRoutes() {
  server_->Get(kModelPath, [this](const httplib::Request& req, httplib::Response& res) {
    inference::ModelMetadataResponse metadata;
    absl::Status s =
        KServeModelMetadata(*models_, options_.platform, req.matches[1], req.matches[2], &metadata);
    if (!s.ok()) return SetErrorAnswer(s, res);
    res.set_content(KServeModelMetadataJson(metadata), kJson);
  });
  server_->Get(absl::StrCat(kModelPath, "/ready"),
               [this](const httplib::Request& req, httplib::Response& res) {
                 absl::StatusOr<bool> ready =
                     KServeModelReady(*models_, *budget_, req.matches[1], req.matches[2]);
                 if (!ready.ok()) return SetErrorAnswer(ready.status(), res);
                 SetReady(*ready, "ready", res);
               });
  server_->Post(absl::StrCat(kModelPath, "/infer"),
                [this](const httplib::Request& req, httplib::Response& res,
                       const httplib::ContentReader& reader) {
                  inference_.KServeInfer(req, res, reader, req.matches[1], req.matches[2]);
                });
  server_->Post(R"(/v1/models/([^/:]+)(?:/versions/([^/:]+)|/labels/([^/:]+))?:score)",
                [this](const httplib::Request& req, httplib::Response& res,
                       const httplib::ContentReader& reader) {
                  inference_.NativeScore(req, res, reader, req.matches[1], req.matches[2],
                                         req.matches[3]);
                });
}

}  // namespace rankd::server
