#include "server/http/http_inference.h"

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "engine/model/error_text.h"
#include "google/protobuf/util/json_util.h"
#include "inference/grpc_predict_v2.pb.h"
#include "rankd/v1/ranking.pb.h"
#include "server/budget_admission.h"
#include "server/http/kserve_json.h"
#include "server/kserve_conversion.h"
#include "server/request_conversion.h"
#include "server/status_mapping.h"

namespace rankd::server {

// One request, from its arrival to its answer. The engine request views
// the parsed message, and the workers write into `scores`: both live here,
// on the handler's stack, until the engine has called back.
struct HttpInference::Call {
  Call(Metrics::Protocol protocol, absl::Time arrival) : protocol(protocol), arrival(arrival) {}

  const Metrics::Protocol protocol;
  const absl::Time arrival;
  std::optional<RequestBudget::Hold> hold;
  std::string body;
  std::shared_ptr<ServedVersion> served;
  std::string model;  // for the metrics: "" until a model was found
  int64_t version = 0;
  engine::Request request;
  std::vector<float> scores;
};

namespace {

constexpr char kJson[] = "application/json";

}  // namespace

void SetErrorAnswer(const absl::Status& status, httplib::Response& res) {
  res.status = ToHttpStatus(status.code());
  res.set_content(ErrorJson(engine::TruncateForError(status.message(), kMaxStatusMessageBytes)),
                  kJson);
}

bool IsJsonContentType(const std::string& content_type) {
  absl::string_view type = content_type;
  if (const size_t semicolon = type.find(';'); semicolon != absl::string_view::npos) {
    type = type.substr(0, semicolon);
  }
  type = absl::StripAsciiWhitespace(type);
  const std::string lower = absl::AsciiStrToLower(type);
  return lower.empty() || lower == "application/json" || absl::EndsWith(lower, "+json") ||
         lower == "application/x-www-form-urlencoded";
}

HttpInference::HttpInference(const ModelManager* models, Metrics* metrics,
                             RequestBudget* budget, Options options)
    : models_(models), metrics_(metrics), budget_(budget), options_(std::move(options)) {}

void HttpInference::Finish(Call* call, const absl::Status& status, httplib::Response& res) {
  metrics_->RecordRequest(call->model, call->version, status.code(),
                          absl::Now() - call->arrival, call->protocol);
  if (!status.ok()) SetErrorAnswer(status, res);
}

bool HttpInference::Admit(const httplib::Request& req, httplib::Response& res,
                          const httplib::ContentReader& reader, Call* call) {
  const std::string content_type = req.get_header_value("Content-Type");
  if (!IsJsonContentType(content_type)) {
    Finish(call,
           absl::InvalidArgumentError(absl::StrCat(
               "Content-Type \"", engine::TruncateForError(content_type),
               "\" is not supported: send the body as application/json")),
           res);
    res.status = 415;
    res.set_header("Connection", "close");  // the body was not read
    return false;
  }
  int64_t length = 0;  // 0 for a chunked body: charged once it is read
  if (req.has_header("Content-Length") &&
      (!absl::SimpleAtoi(req.get_header_value("Content-Length"), &length) || length < 0)) {
    Finish(call, absl::InvalidArgumentError("Content-Length is not a byte count"), res);
    res.set_header("Connection", "close");
    return false;
  }
  auto too_large = [&](int64_t bytes) {
    Finish(call,
           absl::InvalidArgumentError(absl::StrCat(
               "request body of ", bytes, " bytes is over the limit of ",
               options_.max_body_bytes, " bytes (--max_message_bytes)")),
           res);
    res.status = 413;
    res.set_header("Connection", "close");
    return false;
  };
  if (length > options_.max_body_bytes) return too_large(length);
  absl::StatusOr<RequestBudget::Hold> hold = AcquireBytes(budget_, metrics_, length);
  if (!hold.ok()) {
    Finish(call, hold.status(), res);
    res.set_header("Connection", "close");
    return false;
  }
  call->hold.emplace(*std::move(hold));
  call->body.reserve(static_cast<size_t>(length));
  bool over = false;
  const bool read = reader([&](const char* data, size_t n) {
    if (static_cast<int64_t>(call->body.size() + n) > options_.max_body_bytes) {
      over = true;
      return false;
    }
    call->body.append(data, n);
    return true;
  });
  if (over) return too_large(options_.max_body_bytes + 1);
  if (!read) {
    Finish(call, absl::InvalidArgumentError("the request body could not be read whole"), res);
    res.set_header("Connection", "close");
    return false;
  }
  if (absl::Status s = GrowBytes(&*call->hold, static_cast<int64_t>(call->body.size()),
                                 budget_->max_bytes(), metrics_);
      !s.ok()) {
    Finish(call, s, res);
    return false;
  }
  return true;
}

absl::Time HttpInference::Deadline(const httplib::Request& req, absl::Time arrival) const {
  absl::Duration timeout = options_.request_timeout;
  int64_t ms = 0;
  if (req.has_header("Request-Timeout-Ms") &&
      absl::SimpleAtoi(req.get_header_value("Request-Timeout-Ms"), &ms) && ms > 0) {
    const absl::Duration asked = absl::Milliseconds(ms);
    if (timeout == absl::ZeroDuration() || asked < timeout) timeout = asked;
  }
  return timeout == absl::ZeroDuration() ? absl::InfiniteFuture() : arrival + timeout;
}

absl::Status HttpInference::SubmitAndWait(const httplib::Request& req, Call* call) {
  // The scores (and the version's name, for the answer) count too.
  const int32_t n = call->request.num_candidates;
  if (absl::Status s = GrowBytes(&*call->hold, call->hold->bytes() + int64_t{4} * n,
                                 budget_->max_bytes(), metrics_);
      !s.ok()) {
    return s;
  }
  call->scores.assign(n, 0.0f);
  absl::Notification done;
  absl::Status result;
  engine::QueuedRequest item;
  item.request = std::move(call->request);
  item.scores = absl::MakeSpan(call->scores);
  item.deadline = Deadline(req, call->arrival);
  item.done = [&done, &result](absl::Status status, const engine::RequestTiming&) {
    result = std::move(status);
    done.Notify();
  };
  absl::Status submitted = call->served->instance().Submit(std::move(item));
  if (!submitted.ok()) return submitted;
  done.WaitForNotification();  // the engine calls back by the deadline
  return result;
}

void HttpInference::KServeInfer(const httplib::Request& req, httplib::Response& res,
                                const httplib::ContentReader& reader, const std::string& model,
                                const std::string& version) {
  Call call(Metrics::Protocol::kKServeHttp, absl::Now());
  if (!Admit(req, res, reader, &call)) return;
  inference::ModelInferRequest infer;
  absl::Status s = ParseKServeInferJson(call.body, &infer);
  call.body = std::string();  // parsed: the text goes
  if (!s.ok()) return Finish(&call, s, res);
  s = GrowBytes(&*call.hold, static_cast<int64_t>(infer.SpaceUsedLong()), budget_->max_bytes(),
                metrics_);
  if (!s.ok()) return Finish(&call, s, res);
  absl::StatusOr<int64_t> number = ParseKServeVersion(version);
  if (!number.ok()) return Finish(&call, number.status(), res);
  auto found = models_->Find(model, *number, "");
  if (!found.ok()) return Finish(&call, found.status(), res);
  call.served = *std::move(found);
  call.model = call.served->name();
  call.version = call.served->version();
  KServeRequest view;
  {
    auto tables = engine::LiveTables::ValidationScope(call.served->live_tables());
    s = ToEngineRequest(call.served->instance().model(), infer, options_.limits, &view);
  }
  if (!s.ok()) return Finish(&call, s, res);
  call.request = std::move(view.request);
  s = SubmitAndWait(req, &call);
  if (!s.ok()) return Finish(&call, s, res);
  res.set_content(KServeInferResponseJson(call.model, call.version, infer.id(), call.scores),
                  kJson);
  Finish(&call, absl::OkStatus(), res);
}

void HttpInference::NativeScore(const httplib::Request& req, httplib::Response& res,
                                const httplib::ContentReader& reader, const std::string& model,
                                const std::string& version, const std::string& label) {
  Call call(Metrics::Protocol::kHttp, absl::Now());
  if (!Admit(req, res, reader, &call)) return;
  rankd::v1::ScoreRequest score;
  google::protobuf::util::JsonParseOptions parse_options;
  parse_options.ignore_unknown_fields = false;
  const auto parsed = google::protobuf::util::JsonStringToMessage(call.body, &score, parse_options);
  call.body = std::string();
  if (!parsed.ok()) {
    return Finish(&call,
                  absl::InvalidArgumentError(absl::StrCat(
                      "request body is not a rankd.v1.ScoreRequest in JSON: ",
                      engine::TruncateForError(std::string(parsed.message()),
                                               2 * engine::kMaxQuotedBytes))),
                  res);
  }
  absl::Status s = GrowBytes(&*call.hold, static_cast<int64_t>(score.SpaceUsedLong()),
                             budget_->max_bytes(), metrics_);
  if (!s.ok()) return Finish(&call, s, res);
  // The URL names the model (and version or label); the body may repeat
  // them, not contradict them.
  absl::StatusOr<int64_t> number = ParseKServeVersion(version);
  if (!number.ok()) return Finish(&call, number.status(), res);
  auto conflict = [&](const char* field, const std::string& body, const std::string& url) {
    Finish(&call,
           absl::InvalidArgumentError(absl::StrCat(
               "the body's ", field, " \"", engine::TruncateForError(body),
               "\" differs from the URL's \"", engine::TruncateForError(url), "\"")),
           res);
  };
  if (!score.model().empty() && score.model() != model) {
    return conflict("model", score.model(), model);
  }
  score.set_model(model);
  if (*number != 0) {
    if (score.version() != 0 && score.version() != *number) {
      return conflict("version", absl::StrCat(score.version()), version);
    }
    score.set_version(*number);
  }
  if (!label.empty()) {
    if (!score.version_label().empty() && score.version_label() != label) {
      return conflict("versionLabel", score.version_label(), label);
    }
    score.set_version_label(label);
  }
  auto found = models_->Find(score.model(), score.version(), score.version_label());
  if (!found.ok()) return Finish(&call, found.status(), res);
  call.served = *std::move(found);
  call.model = call.served->name();
  call.version = call.served->version();
  absl::StatusOr<engine::Request> view;
  {
    auto tables = engine::LiveTables::ValidationScope(call.served->live_tables());
    view = ToEngineRequest(call.served->instance().model(), score, options_.limits);
  }
  if (!view.ok()) return Finish(&call, view.status(), res);
  call.request = *std::move(view);
  s = SubmitAndWait(req, &call);
  if (!s.ok()) return Finish(&call, s, res);
  rankd::v1::ScoreResponse response;
  response.set_model(call.model);
  response.set_version(call.version);
  response.mutable_scores()->Add(call.scores.begin(), call.scores.end());
  std::string body;
  google::protobuf::util::JsonPrintOptions print_options;
  print_options.always_print_primitive_fields = true;
  const auto printed = google::protobuf::util::MessageToJsonString(response, &body, print_options);
  if (!printed.ok()) {
    return Finish(&call, absl::InternalError(std::string(printed.message())), res);
  }
  res.set_content(std::move(body), kJson);
  Finish(&call, absl::OkStatus(), res);
}

}  // namespace rankd::server
