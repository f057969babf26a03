// Waiting for a gRPC channel to connect, shared by rankd's C++ clients for
// their Options::connect_timeout_ms (fail at start-up, not on the first call).
#ifndef RANKD_CLIENT_CONNECT_H_
#define RANKD_CLIENT_CONNECT_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/channel.h"

namespace rankd::client {

// Asks `channel` to connect and waits up to `timeout_ms` for it to be READY.
// UNAVAILABLE naming `target`, the timeout and the channel's last state
// otherwise.
absl::Status WaitForConnection(grpc::Channel& channel, absl::string_view target,
                               int64_t timeout_ms);

}  // namespace rankd::client

#endif  // RANKD_CLIENT_CONNECT_H_
