// HTTPS for the HTTP listener, from the same files as the gRPC port
// (--tls_cert_file, --tls_key_file, --tls_client_ca_file; server/tls.h).
//
// TLS 1.2 or later. The certificate and key are re-read when either file
// changes (checked at most every --tls_reload_s, at a handshake), so a
// renewed certificate written in place is served to new connections
// without a restart, as on the gRPC port; a pair that does not load or does
// not match (a rotation half written) is ignored, and the last good pair
// keeps serving. With a client CA, every client must present a certificate
// it signed (mTLS); the CA file is re-read like the pair (a new bundle
// verifies the clients of new connections; one that does not load is
// ignored), as gRPC's certificate provider does on the gRPC port.
#ifndef RANKD_SERVER_HTTP_HTTP_TLS_H_
#define RANKD_SERVER_HTTP_HTTP_TLS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "httplib.h"
#include "server/tls.h"

namespace rankd::server {

// An httplib::SSLServer serving `files` (files.enabled()); INVALID_ARGUMENT
// naming the flag when they do not load.
absl::StatusOr<std::unique_ptr<httplib::Server>> MakeHttpsServer(const TlsFiles& files);

}  // namespace rankd::server

#endif  // RANKD_SERVER_HTTP_HTTP_TLS_H_
