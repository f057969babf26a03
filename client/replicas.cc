#include "client/replicas.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"

namespace rankd::client {

absl::StatusOr<std::vector<std::string>> ResolveReplicas(absl::string_view target) {
  absl::string_view rest = target;
  // gRPC's dns scheme, as "dns:///host:port" or "dns:host:port".
  if (!absl::ConsumePrefix(&rest, "dns:///")) absl::ConsumePrefix(&rest, "dns:");
  std::string host, port;
  if (absl::StartsWith(rest, "[")) {
    const size_t close = rest.find(']');
    if (close == absl::string_view::npos || close + 1 >= rest.size() || rest[close + 1] != ':') {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", target, "\": want [ipv6]:port"));
    }
    host = std::string(rest.substr(1, close - 1));
    port = std::string(rest.substr(close + 2));
  } else {
    const size_t colon = rest.rfind(':');
    if (colon == absl::string_view::npos || rest.find(':') != colon) {
      return absl::InvalidArgumentError(absl::StrCat(
          "\"", target, "\": want host:port (e.g. rankd-headless.ns.svc.cluster.local:8503)"));
    }
    host = std::string(rest.substr(0, colon));
    port = std::string(rest.substr(colon + 1));
  }
  int port_number = 0;
  if (host.empty() || !absl::SimpleAtoi(port, &port_number) || port_number < 1 ||
      port_number > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", target, "\": want host:port with a port in [1, 65535]"));
  }
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &result);
  if (rc != 0) {
    const std::string why = absl::StrCat("cannot resolve \"", host, "\": ", gai_strerror(rc));
    return rc == EAI_AGAIN ? absl::UnavailableError(why) : absl::NotFoundError(why);
  }
  std::vector<std::string> targets;
  for (const addrinfo* a = result; a != nullptr; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    if (a->ai_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr, text,
                sizeof(text));
      targets.push_back(absl::StrCat(text, ":", port_number));
    } else if (a->ai_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr, text,
                sizeof(text));
      targets.push_back(absl::StrCat("[", text, "]:", port_number));
    }
  }
  freeaddrinfo(result);
  std::sort(targets.begin(), targets.end());
  targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
  if (targets.empty()) {
    return absl::NotFoundError(absl::StrCat("\"", host, "\" has no IPv4 or IPv6 address"));
  }
  return targets;
}

std::vector<ReplicaResult> ForEachReplica(
    const std::vector<std::string>& targets,
    const std::function<absl::Status(const std::string& target)>& fn) {
  std::vector<ReplicaResult> results(targets.size());
  std::vector<std::thread> threads;
  threads.reserve(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    results[i].target = targets[i];
    threads.emplace_back([&, i] { results[i].status = fn(targets[i]); });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

}  // namespace rankd::client
