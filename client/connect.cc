#include "client/connect.h"

#include <chrono>

#include "absl/strings/str_cat.h"

namespace rankd::client {
namespace {

const char* ConnectivityName(grpc_connectivity_state state) {
  switch (state) {
    case GRPC_CHANNEL_IDLE:
      return "IDLE";
    case GRPC_CHANNEL_CONNECTING:
      return "CONNECTING";
    case GRPC_CHANNEL_READY:
      return "READY";
    case GRPC_CHANNEL_TRANSIENT_FAILURE:
      return "TRANSIENT_FAILURE";
    case GRPC_CHANNEL_SHUTDOWN:
      return "SHUTDOWN";
  }
  return "?";
}

}  // namespace

absl::Status WaitForConnection(grpc::Channel& channel, absl::string_view target,
                               int64_t timeout_ms) {
  const auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms);
  grpc_connectivity_state state = channel.GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY) {
    if (state == GRPC_CHANNEL_SHUTDOWN || !channel.WaitForStateChange(state, deadline)) {
      return absl::UnavailableError(absl::StrCat("cannot connect to ", target, " within ",
                                                 timeout_ms, " ms (channel ",
                                                 ConnectivityName(state), ")"));
    }
    state = channel.GetState(/*try_to_connect=*/true);
  }
  return absl::OkStatus();
}

}  // namespace rankd::client
