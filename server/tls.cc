#include "server/tls.h"

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace rankd::server {
namespace {

absl::Status Bad(const std::string& flag, const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, ": ", why));
}

// The file's bytes; INVALID_ARGUMENT unless it is a readable regular file of
// at most 1 MiB (certificate bundles are kilobytes; a FIFO or a device would
// block or never end).
absl::StatusOr<std::string> ReadPemFile(const std::string& flag, const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return Bad(flag, path, "cannot stat (missing?)");
  if (!S_ISREG(st.st_mode)) return Bad(flag, path, "not a regular file");
  if (st.st_size > (1 << 20)) return Bad(flag, path, "larger than 1 MiB");
  std::ifstream f(path, std::ios::binary);
  if (!f) return Bad(flag, path, "cannot open for reading");
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioDeleter>;

BioPtr MemBio(const std::string& pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// Number of certificates in a PEM bundle (0 = none parse).
int CountCertificates(const std::string& pem) {
  BioPtr bio = MemBio(pem);
  int n = 0;
  while (bio != nullptr) {
    std::unique_ptr<X509, X509Deleter> cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
    if (cert == nullptr) break;
    ++n;
  }
  return n;
}

}  // namespace

absl::Status ValidateTlsFiles(const TlsFiles& files) {
  if (files.cert_file.empty() != files.key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert_file and --tls_key_file: give both (TLS) or neither (plaintext)");
  }
  if (!files.enabled()) {
    if (files.mutual()) {
      return absl::InvalidArgumentError(
          "--tls_client_ca_file: needs --tls_cert_file and --tls_key_file (mTLS is TLS first)");
    }
    return absl::OkStatus();
  }
  if (files.reload_interval_s < 1 || files.reload_interval_s > 86400) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls_reload_s: must be in [1, 86400] seconds, got ", files.reload_interval_s));
  }
  absl::StatusOr<std::string> cert_pem = ReadPemFile("--tls_cert_file", files.cert_file);
  if (!cert_pem.ok()) return cert_pem.status();
  absl::StatusOr<std::string> key_pem = ReadPemFile("--tls_key_file", files.key_file);
  if (!key_pem.ok()) return key_pem.status();
  BioPtr cert_bio = MemBio(*cert_pem);
  std::unique_ptr<X509, X509Deleter> cert(
      PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) {
    return Bad("--tls_cert_file", files.cert_file, "no PEM certificate in it");
  }
  BioPtr key_bio = MemBio(*key_pem);
  std::unique_ptr<EVP_PKEY, KeyDeleter> key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (key == nullptr) {
    return Bad("--tls_key_file", files.key_file,
               "no unencrypted PEM private key in it (a passphrase-protected key cannot be used)");
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    return Bad("--tls_key_file", files.key_file,
               absl::StrCat("is not the private key of the certificate in --tls_cert_file (",
                            files.cert_file, ")"));
  }
  if (files.mutual()) {
    absl::StatusOr<std::string> ca_pem = ReadPemFile("--tls_client_ca_file", files.client_ca_file);
    if (!ca_pem.ok()) return ca_pem.status();
    if (CountCertificates(*ca_pem) == 0) {
      return Bad("--tls_client_ca_file", files.client_ca_file, "no PEM certificate in it");
    }
  }
  return absl::OkStatus();
}

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const TlsFiles& files) {
  if (!files.enabled()) return grpc::InsecureServerCredentials();
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      files.key_file, files.cert_file, files.client_ca_file,
      static_cast<unsigned int>(files.reload_interval_s));
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (files.mutual()) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

std::string DescribeTls(const TlsFiles& files) {
  if (!files.enabled()) return "plaintext";
  return files.mutual() ? "mTLS" : "TLS";
}

}  // namespace rankd::server
