// Every replica of a rankd deployment behind one DNS name: a Kubernetes
// headless Service ("rankd-headless.ns.svc.cluster.local:8503") resolves to
// one A/AAAA record per ready pod. Embedding updates go to every replica
// (each pod holds its own copy of the tables); a plain gRPC channel to the
// name would reach only one of them.
#ifndef RANKD_CLIENT_REPLICAS_H_
#define RANKD_CLIENT_REPLICAS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rankd::client {

// The gRPC targets of every address `target` ("host:port", "[v6]:port",
// optionally "dns:///host:port") resolves to, through getaddrinfo (every A
// and AAAA record): "10.0.0.7:8503", "[fd00::7]:8503". Sorted, without
// duplicates. INVALID_ARGUMENT for a target without a port; NOT_FOUND (or
// UNAVAILABLE for a temporary DNS failure) naming the host when it does not
// resolve.
absl::StatusOr<std::vector<std::string>> ResolveReplicas(absl::string_view target);

// The result of `fn` for one replica.
struct ReplicaResult {
  std::string target;
  absl::Status status;
};

// Runs `fn(target)` for each of `targets` on a thread of its own, all at
// once, and returns their results in the order of `targets`.
std::vector<ReplicaResult> ForEachReplica(
    const std::vector<std::string>& targets,
    const std::function<absl::Status(const std::string& target)>& fn);

}  // namespace rankd::client

#endif  // RANKD_CLIENT_REPLICAS_H_
