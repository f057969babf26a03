// The one place where the client turns gRPC statuses into absl::Status.
//
// The server maps absl::Status -> grpc::Status (server/); this is the inverse,
// so an error keeps its canonical code and exact message end to end. gRPC and
// absl share the canonical code space, but the mapping is spelled out so a
// code neither side knows becomes UNKNOWN instead of an out-of-range enum.
#ifndef RANKD_CLIENT_STATUS_CONVERSION_H_
#define RANKD_CLIENT_STATUS_CONVERSION_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"

namespace rankd::client {

// Payload URL under which the binary `grpc::Status::error_details()` (a
// serialized google.rpc.Status, when the server sends one) is kept.
inline constexpr absl::string_view kGrpcErrorDetailsUrl =
    "type.googleapis.com/google.rpc.Status";

// `code` is a grpc::StatusCode as an int: grpc::StatusCode has no fixed
// underlying type, so a value outside its enumerators (a code from a newer
// peer) is undefined behaviour as that enum (UBSan: "load of value 42,
// which is not a valid value for type 'grpc::StatusCode'"). Unknown codes
// and DO_NOT_USE give UNKNOWN.
absl::StatusCode FromGrpcCode(int code);

// Same code and message; error details, if any, become a payload under
// kGrpcErrorDetailsUrl. OK maps to OkStatus() (absl drops messages on OK).
absl::Status FromGrpcStatus(const grpc::Status& status);

// Runs the unary call `method` (a generated Stub's method) of `stub` on
// `request` with `context` (deadline and metadata already applied): the
// response, or the failure as FromGrpcStatus gives it.
template <typename Stub, typename Request, typename Response>
absl::StatusOr<Response> CallUnary(Stub& stub,
                                   grpc::Status (Stub::*method)(grpc::ClientContext*,
                                                                const Request&, Response*),
                                   grpc::ClientContext* context, const Request& request) {
  Response response;
  const grpc::Status status = (stub.*method)(context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

}  // namespace rankd::client

#endif  // RANKD_CLIENT_STATUS_CONVERSION_H_
