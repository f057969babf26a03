#include "loadtest/driver/score_sender.h"

#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/kserve_request.h"
#include "client/serialized_request.h"

namespace rankd::loadtest {
namespace {

absl::Status CheckClients(const std::vector<client::RankingClient*>& clients,
                          const RequestPool* pool) {
  if (clients.empty()) return absl::InvalidArgumentError("clients: none given");
  for (const auto* c : clients) {
    if (c == nullptr) return absl::InvalidArgumentError("clients: null client");
  }
  if (pool == nullptr || pool->empty()) return absl::InvalidArgumentError("pool: no requests");
  return absl::OkStatus();
}

// Round-robin over the connections, shared by both gRPC senders.
class ClientRing {
 public:
  explicit ClientRing(std::vector<client::RankingClient*> clients) : clients_(std::move(clients)) {}
  client::RankingClient* Next() {
    return clients_[next_.fetch_add(1, std::memory_order_relaxed) % clients_.size()];
  }

 private:
  const std::vector<client::RankingClient*> clients_;
  std::atomic<uint64_t> next_{0};
};

client::CallOptions WithDeadline(absl::Duration deadline) {
  client::CallOptions call;
  call.deadline = deadline;
  return call;
}

class RankdSender : public ScoreSender {
 public:
  RankdSender(std::vector<client::RankingClient*> clients,
              std::vector<std::shared_ptr<const client::SerializedScoreRequest>> requests)
      : ring_(std::move(clients)), requests_(std::move(requests)) {}

  void Send(size_t index, absl::Duration deadline, Done done) override {
    ring_.Next()->ScoreAsync(
        requests_[index],
        [done = std::move(done)](absl::StatusOr<rankd::v1::ScoreResponse> r) {
          done({r.status().code(), r.ok() ? r->version() : 0});
        },
        WithDeadline(deadline));
  }

 private:
  ClientRing ring_;
  // The pool's requests, serialized once.
  const std::vector<std::shared_ptr<const client::SerializedScoreRequest>> requests_;
};

class KServeSender : public ScoreSender {
 public:
  KServeSender(std::vector<client::RankingClient*> clients,
               std::vector<std::shared_ptr<const client::SerializedInferRequest>> requests)
      : ring_(std::move(clients)), requests_(std::move(requests)) {}

  void Send(size_t index, absl::Duration deadline, Done done) override {
    ring_.Next()->InferAsync(
        requests_[index],
        [done = std::move(done)](absl::StatusOr<inference::ModelInferResponse> r) {
          if (!r.ok()) return done({r.status().code(), 0});
          // An answer that is not one scores tensor is the server's fault.
          auto scores = client::FromModelInferResponse(*r);
          done({scores.ok() ? absl::StatusCode::kOk : absl::StatusCode::kInternal,
                scores.ok() ? scores->version : 0});
        },
        WithDeadline(deadline));
  }

 private:
  ClientRing ring_;
  // The pool's requests as raw tensors, serialized once.
  const std::vector<std::shared_ptr<const client::SerializedInferRequest>> requests_;
};

}  // namespace

absl::StatusOr<Protocol> ParseProtocol(absl::string_view text) {
  if (text == "rankd") return Protocol::kRankd;
  if (text == "kserve") return Protocol::kKServe;
  if (text == "http") return Protocol::kHttp;
  return absl::InvalidArgumentError(
      absl::StrCat("--protocol: \"", text, "\" is not rankd, kserve or http"));
}

const char* ProtocolName(Protocol protocol) {
  switch (protocol) {
    case Protocol::kRankd:
      return "rankd";
    case Protocol::kKServe:
      return "kserve";
    case Protocol::kHttp:
      return "http";
  }
  return "?";
}

absl::StatusOr<std::unique_ptr<ScoreSender>> MakeRankdSender(
    std::vector<client::RankingClient*> clients, const RequestPool* pool) {
  if (absl::Status s = CheckClients(clients, pool); !s.ok()) return s;
  std::vector<std::shared_ptr<const client::SerializedScoreRequest>> requests;
  requests.reserve(pool->size());
  for (size_t i = 0; i < pool->size(); ++i) {
    auto r = client::SerializedScoreRequest::From(*(*pool)[i]);
    if (!r.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("request ", i, ": ", r.status().message()));
    }
    requests.push_back(std::make_shared<const client::SerializedScoreRequest>(*std::move(r)));
  }
  return std::make_unique<RankdSender>(std::move(clients), std::move(requests));
}

absl::StatusOr<std::unique_ptr<ScoreSender>> MakeKServeSender(
    std::vector<client::RankingClient*> clients, const RequestPool* pool) {
  if (absl::Status s = CheckClients(clients, pool); !s.ok()) return s;
  std::vector<std::shared_ptr<const client::SerializedInferRequest>> requests;
  requests.reserve(pool->size());
  for (size_t i = 0; i < pool->size(); ++i) {
    auto r = client::ToModelInferRequest(*(*pool)[i], /*raw=*/true);
    if (!r.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("request ", i, " as KServe tensors: ", r.status().message()));
    }
    auto bytes = client::SerializedInferRequest::From(*r);
    if (!bytes.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("request ", i, ": ", bytes.status().message()));
    }
    requests.push_back(std::make_shared<const client::SerializedInferRequest>(*std::move(bytes)));
  }
  return std::make_unique<KServeSender>(std::move(clients), std::move(requests));
}

}  // namespace rankd::loadtest
