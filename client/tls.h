// Transport security of rankd's C++ clients (rankctl, rankload, programs
// using RankingClient / ModelControlClient): channel credentials from PEM
// files and a bearer token from a file, with errors that name the flag.
#ifndef RANKD_CLIENT_TLS_H_
#define RANKD_CLIENT_TLS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"

namespace rankd::client {

// The flags every client tool takes (each "" = not given).
struct SecurityFiles {
  std::string ca_file;     // --tls_ca_file: CAs that sign the server's certificate; TLS when set
  std::string cert_file;   // --tls_cert_file: this client's certificate (mTLS)
  std::string key_file;    // --tls_key_file: its private key
  std::string token_file;  // --token_file: bearer token for the admin API
};

struct Security {
  // Null = plaintext (the clients' default).
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // Sent as "authorization: Bearer <token>" on every call; "" = none.
  std::string bearer_token;
};

// Reads the files. INVALID_ARGUMENT naming the flag: a certificate without
// its key (or the reverse), a client certificate without --tls_ca_file, a
// file that is missing, not a regular file or over 1 MiB, an empty token or
// one with characters a header cannot carry.
absl::StatusOr<Security> LoadSecurity(const SecurityFiles& files);

}  // namespace rankd::client

#endif  // RANKD_CLIENT_TLS_H_
