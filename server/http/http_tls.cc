#include "server/http/http_tls.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "spdlog/spdlog.h"

namespace rankd::server {
namespace {

// A certificate (leaf and chain), its private key and, with mTLS, the
// store of client CAs that verifies client certificates.
struct KeyPair {
  X509* leaf = nullptr;
  STACK_OF(X509)* chain = nullptr;
  EVP_PKEY* key = nullptr;
  X509_STORE* client_cas = nullptr;  // null without --tls_client_ca_file
  ~KeyPair() {
    X509_free(leaf);
    sk_X509_pop_free(chain, X509_free);
    EVP_PKEY_free(key);
    X509_STORE_free(client_cas);
  }
};

// The client CAs of `files` (files.mutual()) as a verification store; null
// when the file does not load (a rotation half written).
X509_STORE* ReadClientCas(const TlsFiles& files) {
  X509_STORE* store = X509_STORE_new();
  if (store != nullptr && X509_STORE_load_file(store, files.client_ca_file.c_str()) != 1) {
    X509_STORE_free(store);
    store = nullptr;
  }
  ERR_clear_error();
  return store;
}

absl::StatusOr<std::shared_ptr<KeyPair>> ReadKeyPair(const TlsFiles& files) {
  if (absl::Status s = ValidateTlsFiles(files); !s.ok()) return s;
  auto pair = std::make_shared<KeyPair>();
  BIO* cert = BIO_new_file(files.cert_file.c_str(), "r");
  if (cert != nullptr) {
    pair->leaf = PEM_read_bio_X509(cert, nullptr, nullptr, nullptr);
    pair->chain = sk_X509_new_null();
    while (X509* c = PEM_read_bio_X509(cert, nullptr, nullptr, nullptr)) {
      sk_X509_push(pair->chain, c);
    }
    BIO_free(cert);
  }
  BIO* key = BIO_new_file(files.key_file.c_str(), "r");
  if (key != nullptr) {
    pair->key = PEM_read_bio_PrivateKey(key, nullptr, nullptr, nullptr);
    BIO_free(key);
  }
  ERR_clear_error();  // the end of the chain reads as an error
  if (pair->leaf == nullptr || pair->key == nullptr ||
      X509_check_private_key(pair->leaf, pair->key) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls_cert_file, --tls_key_file: ", files.cert_file, " and ", files.key_file,
        " changed while being read, or do not match"));
  }
  if (files.mutual()) {
    pair->client_cas = ReadClientCas(files);
    if (pair->client_cas == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tls_client_ca_file: ", files.client_ca_file,
          ": changed while being read, or cannot be loaded as a CA bundle"));
    }
  }
  return pair;
}

// The pair (and client CAs) in use, re-read when one of their files changes.
class CertificateWatcher {
 public:
  CertificateWatcher(TlsFiles files, std::shared_ptr<KeyPair> pair)
      : files_(std::move(files)), pair_(std::move(pair)), stamp_(Stamp()) {}

  // SSL_CTX_set_cert_cb's callback, at each handshake before the client's
  // certificate is asked for: installs the current pair on `ssl` and, with
  // mTLS, the current client CAs as the store that verifies the client.
  static int Install(SSL* ssl, void* self) {
    std::shared_ptr<KeyPair> pair = static_cast<CertificateWatcher*>(self)->Current();
    if (SSL_use_cert_and_key(ssl, pair->leaf, pair->key, pair->chain, 1) != 1) return 0;
    if (pair->client_cas != nullptr && SSL_set1_verify_cert_store(ssl, pair->client_cas) != 1) {
      return 0;
    }
    return 1;
  }

 private:
  // The files' modification times and sizes: a change means re-read.
  std::string Stamp() const {
    std::string out;
    for (const std::string* path :
         {&files_.cert_file, &files_.key_file, &files_.client_ca_file}) {
      if (path->empty()) continue;
      struct stat st;
      if (stat(path->c_str(), &st) == 0) {
        absl::StrAppend(&out, st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec, ":", st.st_size, ";");
      }
    }
    return out;
  }

  std::shared_ptr<KeyPair> Current() {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    if (now < next_check_) return pair_;
    next_check_ = now + absl::Seconds(files_.reload_interval_s);
    const std::string stamp = Stamp();
    if (stamp == stamp_) return pair_;
    absl::StatusOr<std::shared_ptr<KeyPair>> fresh = ReadKeyPair(files_);
    if (!fresh.ok()) {
      spdlog::warn("HTTP TLS: keeping the current certificate: {}",
                   std::string(fresh.status().message()));
      return pair_;
    }
    stamp_ = stamp;
    pair_ = *std::move(fresh);
    spdlog::info("HTTP TLS: certificate re-read from {}", files_.cert_file);
    return pair_;
  }

  const TlsFiles files_;
  absl::Mutex mu_;
  std::shared_ptr<KeyPair> pair_ ABSL_GUARDED_BY(mu_);
  std::string stamp_ ABSL_GUARDED_BY(mu_);
  absl::Time next_check_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

// The SSL server that owns its watcher (the SSL_CTX's callback uses it).
class HttpsServer final : public httplib::SSLServer {
 public:
  HttpsServer(std::unique_ptr<CertificateWatcher> watcher, const TlsFiles& files)
      : httplib::SSLServer([w = watcher.get(), &files](SSL_CTX& ctx) {
          return Setup(ctx, w, files);
        }),
        watcher_(std::move(watcher)) {}

 private:
  static bool Setup(SSL_CTX& ctx, CertificateWatcher* watcher, const TlsFiles& files) {
    SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(&ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_cert_cb(&ctx, &CertificateWatcher::Install, watcher);
    if (files.mutual()) {
      if (SSL_CTX_load_verify_locations(&ctx, files.client_ca_file.c_str(), nullptr) != 1) {
        return false;
      }
      SSL_CTX_set_verify(&ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    }
    return true;
  }

  std::unique_ptr<CertificateWatcher> watcher_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<httplib::Server>> MakeHttpsServer(const TlsFiles& files) {
  absl::StatusOr<std::shared_ptr<KeyPair>> pair = ReadKeyPair(files);
  if (!pair.ok()) return pair.status();
  auto server = std::make_unique<HttpsServer>(
      std::make_unique<CertificateWatcher>(files, *std::move(pair)), files);
  if (!server->is_valid()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls_client_ca_file: ", files.client_ca_file, ": cannot be loaded as a CA bundle"));
  }
  return server;
}

}  // namespace rankd::server
