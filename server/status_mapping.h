// The one place where engine statuses become gRPC statuses (DESIGN.md), and
// HTTP statuses for the REST front end.
#ifndef RANKD_SERVER_STATUS_MAPPING_H_
#define RANKD_SERVER_STATUS_MAPPING_H_

#include <cstddef>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace rankd::server {

// Most bytes of a message sent to a client. The message travels in the
// grpc-message trailer (percent-encoded, up to 3 bytes per byte), and a
// default gRPC client refuses trailers over 8 KiB: a longer message would
// reach the client as an unreadable error, or none. Every place that quotes
// a client's text cuts it to engine::kMaxQuotedBytes already; this is the
// backstop for lists (served models, features) and anything missed.
inline constexpr size_t kMaxStatusMessageBytes = 1024;

// Same code (absl and gRPC share the canonical code numbers) and message,
// cut to kMaxStatusMessageBytes.
grpc::Status ToGrpcStatus(const absl::Status& status);

// The HTTP status of an answer with this code, as gRPC's HTTP mapping and
// KServe's REST servers do: OK 200; INVALID_ARGUMENT, FAILED_PRECONDITION,
// OUT_OF_RANGE 400; UNAUTHENTICATED 401; PERMISSION_DENIED 403; NOT_FOUND
// 404; ALREADY_EXISTS, ABORTED 409; RESOURCE_EXHAUSTED 429; CANCELLED 499;
// UNIMPLEMENTED 501; UNAVAILABLE 503; DEADLINE_EXCEEDED 504; else 500.
int ToHttpStatus(absl::StatusCode code);

}  // namespace rankd::server

#endif  // RANKD_SERVER_STATUS_MAPPING_H_
