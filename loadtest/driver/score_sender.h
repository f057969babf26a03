// How rankload sends one request of its pool: over rankd's own gRPC API
// (rankd.v1.Ranking/Score), the KServe v2 gRPC API (ModelInfer, raw tensor
// contents) or HTTP/JSON (the native :score endpoint; http_score_sender.h).
// The LoadDriver measures all three the same way through this interface, so
// the front ends can be compared on the same requests.
//
// A sender is made for one RequestPool and prepares every request's wire
// form before the first send (rankd's: serialized bytes; KServe's: raw
// tensors, serialized; HTTP's: JSON bodies), so encoding is not what the load
// measures. Thread-safe: Send() is called from the
// driver's sender threads and from completions.
#ifndef RANKD_LOADTEST_DRIVER_SCORE_SENDER_H_
#define RANKD_LOADTEST_DRIVER_SCORE_SENDER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/ranking_client.h"
#include "loadtest/traffic/request_generator.h"

namespace rankd::loadtest {

// The front end a run loads.
enum class Protocol { kRankd, kKServe, kHttp };

// "rankd" | "kserve" | "http"; INVALID_ARGUMENT naming --protocol otherwise.
absl::StatusOr<Protocol> ParseProtocol(absl::string_view text);
const char* ProtocolName(Protocol protocol);

// What the driver learns of one finished call: its status code (gRPC's
// canonical codes; HTTP statuses mapped back to them) and, when OK, the
// model version that answered.
struct SendResult {
  absl::StatusCode code = absl::StatusCode::kOk;
  int64_t version = 0;
};

class ScoreSender {
 public:
  using Done = std::function<void(const SendResult&)>;
  virtual ~ScoreSender() = default;

  // Sends request `index` of the pool (index < pool size) with `deadline`
  // from now. `done` runs exactly once when the call ends, on a thread of the
  // sender's transport, or inline inside Send() (gRPC may complete a call
  // that fails at once that way): it must not block.
  // Every `done` of a sender has returned once its destructor (and, for the
  // gRPC senders, the clients' destructors) have.
  virtual void Send(size_t index, absl::Duration deadline, Done done) = 0;
};

// rankd.v1.Ranking/Score, calls spread round-robin over `clients` (not
// owned, outliving the sender; non-empty), each request serialized once
// (client/serialized_request.h; the pool itself may go).
absl::StatusOr<std::unique_ptr<ScoreSender>> MakeRankdSender(
    std::vector<client::RankingClient*> clients, const RequestPool* pool);

// KServe v2 ModelInfer on the same connections, each request converted once
// to raw tensor contents (client/kserve_request.h) and serialized. INVALID_ARGUMENT naming
// the pool entry for a request KServe cannot carry (a version label).
absl::StatusOr<std::unique_ptr<ScoreSender>> MakeKServeSender(
    std::vector<client::RankingClient*> clients, const RequestPool* pool);

}  // namespace rankd::loadtest

#endif  // RANKD_LOADTEST_DRIVER_SCORE_SENDER_H_
