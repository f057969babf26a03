// Connection management of the public gRPC listener: how long a client
// connection lives, how the server checks that idle ones are alive, and
// which client keepalive pings it accepts. Applied as gRPC server channel
// arguments.
//
// Why connection age matters: gRPC clients keep one HTTP/2 connection and
// send every RPC over it. Behind a Kubernetes Service (kube-proxy balances
// connections, not RPCs), a replica added by a scale-up or a rollout gets no
// traffic from clients that are already connected, however long they run.
// With a maximum age, the server sends each connection a GOAWAY after
// max_connection_age_s (gRPC adds +-10% jitter so connections made together
// do not all reconnect together); the client opens a new connection, which
// the Service may route to any replica, and RPCs already in flight on the
// old one finish normally (up to max_connection_age_grace_s, after which the
// old connection is closed and what is left on it fails UNAVAILABLE).
// Clients see no errors: new RPCs go to the new connection.
#ifndef RANKD_SERVER_CONNECTION_OPTIONS_H_
#define RANKD_SERVER_CONNECTION_OPTIONS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "grpcpp/server_builder.h"

namespace rankd::server {

struct ConnectionOptions {
  // GOAWAY a client connection once it is this old (seconds); 0 = never.
  double max_connection_age_s = 300;
  // After that GOAWAY, how long RPCs in flight on the connection may still
  // take before it is closed (seconds). Longer than the slowest RPC's deadline.
  double max_connection_age_grace_s = 30;
  // The server pings a connection that has been quiet this long (seconds)
  // and closes it when no answer comes within keepalive_timeout_s: a client
  // whose machine vanished (no FIN, no RST) does not hold a connection and
  // its memory for hours (gRPC's default is 2 hours). 0 = gRPC's default.
  double keepalive_time_s = 60;
  double keepalive_timeout_s = 20;
  // Keepalive enforcement: the shortest interval between pings a client
  // may send when it has no RPC data to send (seconds). A client that pings
  // more often gets GOAWAY "too_many_pings" after 2 such pings (gRPC's ping
  // strikes). gRPC's default (300 s) refuses the 10-30 s keepalive common in
  // client configurations; this accepts those and still bounds ping floods.
  double keepalive_min_client_interval_s = 10;
  // Whether clients may send keepalive pings while they have no RPC in
  // flight (an idle client keeping its connection warm). Enforced with the
  // interval above.
  bool keepalive_permit_without_calls = true;
  // Calls one client connection may have open at once (HTTP/2
  // SETTINGS_MAX_CONCURRENT_STREAMS); 0 = gRPC's default (no limit). Under
  // overload a server whose gRPC threads cannot even read every request
  // (a host-bound one) otherwise queues the excess in its transport, before
  // any handler can refuse it, and answers everything late. With a limit the
  // excess waits in the clients' channels instead (and ends there with
  // DEADLINE_EXCEEDED if no stream frees up in time), and the server spends
  // its cores on the calls it can finish.
  int max_concurrent_streams = 0;
};

// Checks ranges: ages and intervals >= 0 (and at most a day: larger values
// overflow gRPC's int milliseconds or mean "never" anyway), timeouts > 0,
// max_concurrent_streams >= 0.
// Errors name the flag (--max_connection_age_s, ...).
absl::Status ValidateConnectionOptions(const ConnectionOptions& options);

// The gRPC channel arguments for `options` (name, integer value), in the
// order they are applied.
std::vector<std::pair<std::string, int>> ConnectionChannelArgs(const ConnectionOptions& options);

// Adds ConnectionChannelArgs to `builder`.
void ApplyConnectionOptions(const ConnectionOptions& options, grpc::ServerBuilder* builder);

}  // namespace rankd::server

#endif  // RANKD_SERVER_CONNECTION_OPTIONS_H_
