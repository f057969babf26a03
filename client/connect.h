// Opening a gRPC channel and waiting for it to connect, shared by rankd's C++
// clients for their Options::connect_timeout_ms (fail at start-up, not on the
// first call).
#ifndef RANKD_CLIENT_CONNECT_H_
#define RANKD_CLIENT_CONNECT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace rankd::client {

// Asks `channel` to connect and waits up to `timeout_ms` for it to be READY.
// UNAVAILABLE naming `target`, the timeout and the channel's last state
// otherwise.
absl::Status WaitForConnection(grpc::Channel& channel, absl::string_view target,
                               int64_t timeout_ms);

// The channel of a client: to `target` with `credentials` (null =
// plaintext) and `args`; with connect_timeout_ms > 0, connected
// (WaitForConnection). INVALID_ARGUMENT naming the target when gRPC cannot
// make a channel to it.
absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenChannel(
    const std::string& target, std::shared_ptr<grpc::ChannelCredentials> credentials,
    const grpc::ChannelArguments& args, int64_t connect_timeout_ms);

}  // namespace rankd::client

#endif  // RANKD_CLIENT_CONNECT_H_
