// The inference endpoints of the HTTP listener: KServe v2 REST
// (POST /v2/models/{m}[/versions/{v}]/infer, JSON tensors) and the native
// POST /v1/models/{m}[/versions/{v}|/labels/{l}]:score (the ScoreRequest /
// ScoreResponse proto3 JSON that rankctl uses).
//
// They take the gRPC front ends' path: the admission budget shared with
// them (one --max_inflight_request_bytes, one SIGTERM drain), the same
// routing, limits, conversion and validation (server/kserve_conversion.h,
// server/request_conversion.h), the model version's batcher, and
// rankd_requests_total with protocol="kserve_http" or "http".
//
// Before a byte of the body is read: a Content-Type that is not JSON gets
// 415, a Content-Length over `max_body_bytes` 413, a full budget 429 and a
// draining server 503. A chunked body is cut off (413) as soon as it passes
// the limit. Errors are {"error": "..."} with the HTTP status of the gRPC
// code (server/status_mapping.h).
//
// The handler thread (one of the HTTP listener's) waits for the batch that
// scores its request; the engine calls back exactly once for every
// request it accepted, by its deadline at the latest.
//
// Borrows the manager, metrics and budget (they outlive the listener).
// Thread-safe.
#ifndef RANKD_SERVER_HTTP_HTTP_INFERENCE_H_
#define RANKD_SERVER_HTTP_HTTP_INFERENCE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/request_validation.h"
#include "httplib.h"
#include "server/lifecycle/model_manager.h"
#include "server/metrics.h"
#include "server/request_budget.h"

namespace rankd::server {

class HttpInference {
 public:
  struct Options {
    // Server limits on top of the model's (--max_candidates, ...).
    engine::RequestLimits limits;
    // Largest request body read (--max_message_bytes, as for gRPC).
    int64_t max_body_bytes = int64_t{64} << 20;
    // Time a request may wait and compute before it is answered
    // DEADLINE_EXCEEDED (504); 0 = the batcher's default timeout. HTTP has
    // no standard deadline header; a client may lower this one with
    // `Request-Timeout-Ms: N`.
    absl::Duration request_timeout = absl::Seconds(10);
  };

  HttpInference(const ModelManager* models, Metrics* metrics, RequestBudget* budget,
                Options options);

  // POST /v2/models/{model}[/versions/{version}]/infer.
  void KServeInfer(const httplib::Request& req, httplib::Response& res,
                   const httplib::ContentReader& reader, const std::string& model,
                   const std::string& version);
  // POST /v1/models/{model}[/versions/{version}|/labels/{label}]:score
  // (`version` "" and `label` "" when the URL has none).
  void NativeScore(const httplib::Request& req, httplib::Response& res,
                   const httplib::ContentReader& reader, const std::string& model,
                   const std::string& version, const std::string& label);

 private:
  struct Call;

  // Content type, size and budget checks, then the body: false (with the
  // answer in `res`) when the request is refused.
  bool Admit(const httplib::Request& req, httplib::Response& res,
             const httplib::ContentReader& reader, Call* call);
  // Queues `call`'s engine request on its version, waits for its scores.
  absl::Status SubmitAndWait(const httplib::Request& req, Call* call);
  // Counts the request and writes an error answer (for a non-OK status).
  void Finish(Call* call, const absl::Status& status, httplib::Response& res);
  absl::Time Deadline(const httplib::Request& req, absl::Time arrival) const;

  const ModelManager* models_;
  Metrics* metrics_;
  RequestBudget* budget_;
  const Options options_;
};

// The answer for an error status: {"error": message} (cut to
// kMaxStatusMessageBytes) with the status's HTTP code.
void SetErrorAnswer(const absl::Status& status, httplib::Response& res);

// Whether a Content-Type header names JSON: absent, application/json,
// anything ending in +json (all with parameters), or
// application/x-www-form-urlencoded (what `curl -d` sends by default).
bool IsJsonContentType(const std::string& content_type);

}  // namespace rankd::server

#endif  // RANKD_SERVER_HTTP_HTTP_INFERENCE_H_
