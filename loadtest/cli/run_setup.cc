#include "loadtest/cli/run_setup.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "google/protobuf/text_format.h"
#include "loadtest/driver/http_score_sender.h"
#include "loadtest/traffic/request_file.h"
#include "rankd/v1/model_config.pb.h"

namespace rankd::loadtest {
namespace {

// `status` with its message replaced (the code is kept).
absl::Status WithMessage(const absl::Status& status, absl::string_view message) {
  return absl::Status(status.code(), message);
}

// GetModelInfo of the version the generated requests will name: --model_version,
// or the one --version_label points at.
absl::StatusOr<rankd::v1::ModelInfo> DescribeModel(const client::RankingClient& client,
                                                   const Config& c) {
  client::CallOptions call;
  call.deadline = absl::FromChrono(std::chrono::seconds(10));
  rankd::v1::GetModelInfoRequest request;
  request.set_model(c.model);
  request.set_version(c.model_version);
  request.set_version_label(c.version_label);
  return client.GetModelInfo(request, call);
}

}  // namespace

absl::StatusOr<std::map<std::string, int>> BagSizesFromModelConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("--model_config: cannot read ", path));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  rankd::v1::ModelConfig config;
  if (!google::protobuf::TextFormat::ParseFromString(text, &config)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model_config: ", path, " is not a text-format rankd.v1.ModelConfig"));
  }
  std::map<std::string, int> out;
  for (const auto& f : config.sparse_features()) {
    out[f.name()] = std::max(1, f.typical_ids_per_bag());
  }
  return out;
}

namespace {

// The sender of --protocol for the prepared pool.
absl::StatusOr<std::unique_ptr<ScoreSender>> MakeSender(const Config& c, const RunSetup& s) {
  std::vector<client::RankingClient*> clients;
  for (const auto& client : s.clients) clients.push_back(client.get());
  absl::StatusOr<std::unique_ptr<ScoreSender>> sender;
  switch (c.protocol) {
    case Protocol::kRankd:
      return MakeRankdSender(clients, &s.pool);
    case Protocol::kKServe:
      sender = MakeKServeSender(clients, &s.pool);
      break;
    case Protocol::kHttp: {
      HttpScoreSender::Options o;
      o.target = c.http_target;
      o.connections = c.http_connections;
      o.tls_ca_file = c.security.ca_file;
      o.tls_cert_file = c.security.cert_file;
      o.tls_key_file = c.security.key_file;
      o.connect_timeout = absl::Milliseconds(std::max<int64_t>(1, c.connect_timeout_ms));
      auto http = HttpScoreSender::Create(o, &s.pool);
      if (!http.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--http_target / --http_connections: ", http.status().message()));
      }
      return std::unique_ptr<ScoreSender>(std::move(*http));
    }
  }
  if (!sender.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--protocol ", ProtocolName(c.protocol), ": ", sender.status().message()));
  }
  return sender;
}

}  // namespace

absl::StatusOr<RunSetup> PrepareRun(const Config& c) {
  RunSetup s;
  absl::StatusOr<client::Security> security = client::LoadSecurity(c.security);
  if (!security.ok()) return security.status();
  for (int i = 0; i < c.connections; ++i) {
    client::RankingClient::Options o;
    o.target = c.target;
    o.credentials = security->credentials;
    o.bearer_token = security->bearer_token;
    o.dedicated_connection = true;
    o.connect_timeout_ms = c.connect_timeout_ms;
    o.deadline_ms = std::max<int64_t>(1, static_cast<int64_t>(c.deadline_ms));
    auto client = client::RankingClient::Create(o);
    if (!client.ok()) {
      return WithMessage(client.status(),
                         absl::StrCat("--target: ", client.status().message(),
                                      " (is rankd serving at ", c.target, "?)"));
    }
    s.clients.push_back(std::move(*client));
  }
  if (!c.request_files.empty()) {
    auto pool = ReadRequestFiles(c.request_files);
    if (!pool.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--requests: ", pool.status().message()));
    }
    s.pool = std::move(*pool);
    s.traffic = absl::StrCat("replay of ", s.pool.size(), " requests from ",
                             absl::StrJoin(c.request_files, ","));
  } else {
    auto info = DescribeModel(*s.clients[0], c);
    if (!info.ok()) {
      const std::string which =
          c.version_label.empty() ? absl::StrCat("version ", c.model_version)
                                  : absl::StrCat("version_label \"", c.version_label, "\"");
      return WithMessage(info.status(),
                         absl::StrCat(c.version_label.empty() ? "--model" : "--version_label",
                                      ": GetModelInfo(\"", c.model, "\", ", which, "): ",
                                      absl::StatusCodeToString(info.status().code()), ": ",
                                      info.status().message()));
    }
    GeneratorOptions g;
    g.version = c.model_version;
    g.version_label = c.version_label;
    g.candidates = c.candidates;
    g.zipf_alpha = c.zipf_alpha;
    g.ids_per_bag = c.ids_per_bag > 0 ? c.ids_per_bag : 1;
    if (!c.model_config.empty() && c.ids_per_bag == 0) {
      auto sizes = BagSizesFromModelConfig(c.model_config);
      if (!sizes.ok()) return sizes.status();
      g.ids_per_bag_by_feature = *sizes;
    }
    g.shared_features = c.shared_features;
    g.pool_size = c.pool_size;
    g.seed = c.seed;
    auto pool = GenerateRequests(*info, g);
    if (!pool.ok()) {
      const std::string msg(pool.status().message());
      return absl::InvalidArgumentError(absl::StartsWith(msg, "shared_features")
                                            ? absl::StrCat("--", msg)
                                            : absl::StrCat("--model: ", msg));
    }
    s.pool = std::move(*pool);
    s.traffic = absl::StrCat(
        "generated for model ", info->name(), " v", info->version(), " (",
        c.version_label.empty() ? "" : absl::StrCat("version_label \"", c.version_label, "\", "),
        info->backend(),
        " backend): ", s.pool.size(), " distinct requests, candidates ", c.candidates.ToString(),
        ", Zipf alpha ", c.zipf_alpha,
        c.shared_features.empty() ? ""
                                  : absl::StrCat(", shared ", absl::StrJoin(c.shared_features, ",")));
  }
  for (const auto& r : s.pool) s.models.insert(r->model());
  auto sender = MakeSender(c, s);
  if (!sender.ok()) return sender.status();
  s.sender = std::move(*sender);
  return s;
}

}  // namespace rankd::loadtest
