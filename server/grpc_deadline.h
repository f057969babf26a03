// A gRPC call's deadline as an absl::Time, for the batcher.
#ifndef RANKD_SERVER_GRPC_DEADLINE_H_
#define RANKD_SERVER_GRPC_DEADLINE_H_

#include <chrono>

#include "absl/time/time.h"

namespace rankd::server {

// gRPC's "no deadline" is the far end of system_clock: InfiniteFuture then.
inline absl::Time ToAbslDeadline(std::chrono::system_clock::time_point deadline) {
  if (deadline >= std::chrono::system_clock::time_point::max() - std::chrono::hours(24 * 365)) {
    return absl::InfiniteFuture();
  }
  return absl::FromChrono(deadline);
}

}  // namespace rankd::server

#endif  // RANKD_SERVER_GRPC_DEADLINE_H_
