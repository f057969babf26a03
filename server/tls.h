// TLS for rankd's gRPC listeners: server credentials from PEM files, with
// certificate rotation and optional client-certificate verification (mTLS).
//
// The files are checked once at start (each a readable regular file, PEM,
// the key matching the certificate, the client CA a certificate bundle), so
// a typo fails `rankd serve` with the flag named instead of failing every
// handshake later. After that gRPC's FileWatcherCertificateProvider re-reads
// them every `reload_interval_s`: a renewed certificate written in place
// (cert-manager, a Kubernetes Secret volume) is served to new connections
// without a restart; an invalid pair written mid-rotation is ignored by the
// watcher (the last good pair keeps serving) until a valid one appears.
#ifndef RANKD_SERVER_TLS_H_
#define RANKD_SERVER_TLS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/security/server_credentials.h"

namespace rankd::server {

struct TlsFiles {
  std::string cert_file;       // --tls_cert_file: certificate chain (PEM); "" = plaintext
  std::string key_file;        // --tls_key_file: its private key (PEM)
  std::string client_ca_file;  // --tls_client_ca_file: CAs of client certificates; "" = no mTLS
  int reload_interval_s = 10;  // --tls_reload_s: how often the files are re-read
  bool enabled() const { return !cert_file.empty(); }
  bool mutual() const { return !client_ca_file.empty(); }
};

// INVALID_ARGUMENT naming the flag: cert and key given together, a client
// CA only with them, each file a readable regular file holding PEM, the key
// the certificate's, reload interval in [1, 86400].
absl::Status ValidateTlsFiles(const TlsFiles& files);

// Plaintext credentials when !files.enabled(); else TLS whose identity is
// watched for rotation, requiring and verifying a client certificate when
// files.mutual(). Call ValidateTlsFiles first.
std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const TlsFiles& files);

// "plaintext", "TLS" or "mTLS", for the start-up log.
std::string DescribeTls(const TlsFiles& files);

}  // namespace rankd::server

#endif  // RANKD_SERVER_TLS_H_
