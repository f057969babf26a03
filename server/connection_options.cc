#include "server/connection_options.h"

#include <cmath>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "grpc/grpc.h"

namespace rankd::server {
namespace {

constexpr double kMaxSeconds = 86400;

int Millis(double seconds) { return static_cast<int>(std::llround(seconds * 1000)); }

absl::Status CheckRange(const char* flag, double value, bool zero_ok) {
  const bool ok = zero_ok ? value >= 0 : value > 0;
  if (!ok || !(value <= kMaxSeconds)) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": must be in ", zero_ok ? "[" : "(",
                                                   "0, ", kMaxSeconds, "] seconds, got ", value));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateConnectionOptions(const ConnectionOptions& o) {
  for (auto [flag, value, zero_ok] :
       {std::make_tuple("max_connection_age_s", o.max_connection_age_s, true),
        std::make_tuple("max_connection_age_grace_s", o.max_connection_age_grace_s, true),
        std::make_tuple("keepalive_time_s", o.keepalive_time_s, true),
        std::make_tuple("keepalive_timeout_s", o.keepalive_timeout_s, false),
        std::make_tuple("keepalive_min_client_interval_s", o.keepalive_min_client_interval_s,
                        true)}) {
    if (absl::Status s = CheckRange(flag, value, zero_ok); !s.ok()) return s;
  }
  if (o.max_concurrent_streams < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_concurrent_streams: must be >= 0 (0 = no limit), got ",
                     o.max_concurrent_streams));
  }
  return absl::OkStatus();
}

std::vector<std::pair<std::string, int>> ConnectionChannelArgs(const ConnectionOptions& o) {
  std::vector<std::pair<std::string, int>> args;
  if (o.max_connection_age_s > 0) {
    args.emplace_back(GRPC_ARG_MAX_CONNECTION_AGE_MS, Millis(o.max_connection_age_s));
    args.emplace_back(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, Millis(o.max_connection_age_grace_s));
  }
  if (o.keepalive_time_s > 0) {
    args.emplace_back(GRPC_ARG_KEEPALIVE_TIME_MS, Millis(o.keepalive_time_s));
    args.emplace_back(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, Millis(o.keepalive_timeout_s));
    // The server's own keepalive pings go out on idle connections too, and
    // are not limited to 2 without data (the client-side default).
    args.emplace_back(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  }
  args.emplace_back(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                    Millis(o.keepalive_min_client_interval_s));
  args.emplace_back(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS,
                    o.keepalive_permit_without_calls ? 1 : 0);
  args.emplace_back(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 2);
  if (o.max_concurrent_streams > 0) {
    args.emplace_back(GRPC_ARG_MAX_CONCURRENT_STREAMS, o.max_concurrent_streams);
  }
  return args;
}

void ApplyConnectionOptions(const ConnectionOptions& options, grpc::ServerBuilder* builder) {
  for (const auto& [name, value] : ConnectionChannelArgs(options)) {
    builder->AddChannelArgument(name, value);
  }
}

}  // namespace rankd::server
