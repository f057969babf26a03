#include "client/connect.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"

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

absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenChannel(
    const std::string& target, std::shared_ptr<grpc::ChannelCredentials> credentials,
    const grpc::ChannelArguments& args, int64_t connect_timeout_ms) {
  if (credentials == nullptr) credentials = grpc::InsecureChannelCredentials();
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(target, credentials, args);
  if (channel == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("target: cannot create a channel to \"", target, "\""));
  }
  if (connect_timeout_ms > 0) {
    if (absl::Status s = WaitForConnection(*channel, target, connect_timeout_ms); !s.ok()) {
      return s;
    }
  }
  return channel;
}

}  // namespace rankd::client
