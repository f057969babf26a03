#include "client/call_options.h"

#include <chrono>

namespace rankd::client {

void ApplyCallOptions(const CallOptions& call, absl::Duration default_deadline,
                      grpc::ClientContext* context, const std::string& bearer_token) {
  const absl::Duration deadline = call.deadline.has_value() ? *call.deadline : default_deadline;
  if (deadline != absl::InfiniteDuration()) {
    context->set_deadline(std::chrono::system_clock::now() + absl::ToChronoMicroseconds(deadline));
  }
  context->set_wait_for_ready(call.wait_for_ready);
  for (const auto& [key, value] : call.metadata) context->AddMetadata(key, value);
  if (!bearer_token.empty()) context->AddMetadata("authorization", "Bearer " + bearer_token);
}

}  // namespace rankd::client
