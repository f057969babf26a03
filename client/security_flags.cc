#include "client/security_flags.h"

#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, tls_ca_file, "",
          "PEM CAs that sign rankd's certificate: connect with TLS (default: plaintext)");
ABSL_FLAG(std::string, tls_cert_file, "",
          "PEM client certificate for a server that requires one (mTLS; with --tls_key_file)");
ABSL_FLAG(std::string, tls_key_file, "", "PEM private key of --tls_cert_file");
ABSL_FLAG(std::string, token_file, "",
          "file holding a bearer token sent with every call (the admin API's: rankd serve "
          "--admin_token_file)");

namespace rankd::client {

SecurityFiles SecurityFilesFromFlags() {
  SecurityFiles files;
  files.ca_file = absl::GetFlag(FLAGS_tls_ca_file);
  files.cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  files.key_file = absl::GetFlag(FLAGS_tls_key_file);
  files.token_file = absl::GetFlag(FLAGS_token_file);
  return files;
}

}  // namespace rankd::client
