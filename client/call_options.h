// Per-call settings shared by rankd's C++ clients (RankingClient,
// ModelControlClient), and how they apply to a gRPC call.
#ifndef RANKD_CLIENT_CALL_OPTIONS_H_
#define RANKD_CLIENT_CALL_OPTIONS_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "grpcpp/client_context.h"

namespace rankd::client {

// Per-call settings; the defaults come from the client's Options.
// (Outside the clients: GCC cannot use a nested struct's member initializers
// in default arguments of the enclosing class.)
struct CallOptions {
  // Unset: the client's default (its Options::deadline_ms, or for
  // ModelControlClient's LoadModel / UnloadModel its load_deadline_ms).
  // absl::InfiniteDuration(): no deadline.
  std::optional<absl::Duration> deadline;
  // true: a call made while the channel is not connected waits (up to its
  // deadline) for a connection instead of failing with UNAVAILABLE at once.
  bool wait_for_ready = false;
  // Metadata (headers) sent with the call, e.g. a trace id. Keys lower-case.
  std::vector<std::pair<std::string, std::string>> metadata;
};

// Applies `call`'s deadline (or `default_deadline` when it has none),
// wait_for_ready and metadata to `context`, and `bearer_token` (when not
// empty) as "authorization: Bearer <token>".
void ApplyCallOptions(const CallOptions& call, absl::Duration default_deadline,
                      grpc::ClientContext* context, const std::string& bearer_token = "");

}  // namespace rankd::client

#endif  // RANKD_CLIENT_CALL_OPTIONS_H_
