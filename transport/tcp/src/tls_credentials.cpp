// Writing a cluster CA and node certificates with OpenSSL's API. Slow path.
#include "fjord/tcp/tls_credentials.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>

#include "fjord/base/assert.h"

namespace fjord::tcp {
namespace {

struct PkeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using Cert = std::unique_ptr<X509, X509Free>;

Status openssl_failure(const std::string& what) {
  const unsigned long code = ERR_get_error();
  const char* reason = code != 0 ? ERR_reason_error_string(code) : nullptr;
  ERR_clear_error();
  return Status(StatusCode::kInternal, what + ": " + (reason ? reason : "no detail from OpenSSL"));
}

Status add_extension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) return openssl_failure(std::string("certificate extension ") + value);
  const int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  return ok == 1 ? Status::ok() : openssl_failure(std::string("certificate extension ") + value);
}

// A certificate for `common_name` holding `key`'s public half, signed by
// `issuer_key` (issuer nullptr: self-signed, a CA).
Result<Cert> make_certificate(const std::string& common_name, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key,
                              long serial, int valid_days) {
  Cert cert(X509_new());
  if (!cert) return openssl_failure("X509_new");
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(valid_days) * 86400);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(common_name.c_str()), -1,
                             -1, 0);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  const bool is_ca = issuer == nullptr;
  if (Status s = add_extension(cert.get(), signer, NID_basic_constraints, is_ca ? "critical,CA:TRUE" : "CA:FALSE"); !s)
    return s;
  if (Status s = add_extension(cert.get(), signer, NID_key_usage,
                               is_ca ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature");
      !s)
    return s;
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0) return openssl_failure("signing " + common_name);
  return cert;
}

// Writes through a new file of `mode` (replacing any), closing it on all paths.
template <typename Write>
Status write_pem(const std::string& path, mode_t mode, Write&& write) {
  ::unlink(path.c_str());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return io_error("create " + path, errno);
  FILE* file = ::fdopen(fd, "w");
  if (file == nullptr) {
    ::close(fd);
    return io_error("fdopen " + path, errno);
  }
  const bool written = write(file) == 1;
  const bool closed = std::fclose(file) == 0;
  if (!written) return openssl_failure("writing " + path);
  if (!closed) return io_error("close " + path, errno);
  return Status::ok();
}

Status write_pair(const std::string& dir, const std::string& cert_file, const std::string& key_file, X509* cert,
                  EVP_PKEY* key) {
  if (Status s =
          write_pem(dir + "/" + key_file, 0600,
                    [&](FILE* f) { return PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr); });
      !s)
    return s;
  return write_pem(dir + "/" + cert_file, 0644, [&](FILE* f) { return PEM_write_X509(f, cert); });
}

}  // namespace

std::string tls_node_certificate_file(NodeId node) { return "node-" + std::to_string(node) + ".crt"; }
std::string tls_node_key_file(NodeId node) { return "node-" + std::to_string(node) + ".key"; }

Status write_tls_credentials(const std::string& dir, std::span<const NodeId> nodes, int valid_days) {
  FJORD_ASSERT(valid_days > 0);
  ERR_clear_error();
  Pkey ca_key(EVP_EC_gen("P-256"));
  if (!ca_key) return openssl_failure("generating the cluster CA key");
  auto ca = make_certificate("fjord cluster CA", ca_key.get(), nullptr, ca_key.get(), 1, valid_days);
  if (!ca) return ca.status();
  if (Status s =
          write_pair(dir, std::string(kTlsCaCertificateFile), std::string(kTlsCaKeyFile), ca->get(), ca_key.get());
      !s)
    return s;
  long serial = 2;
  for (const NodeId node : nodes) {
    FJORD_ASSERT(node != kNoNode);
    Pkey key(EVP_EC_gen("P-256"));
    if (!key) return openssl_failure("generating the key of node " + std::to_string(node));
    auto cert = make_certificate(std::string(kTlsNodeNamePrefix) + std::to_string(node), key.get(), ca->get(),
                                 ca_key.get(), serial++, valid_days);
    if (!cert) return cert.status();
    if (Status s = write_pair(dir, tls_node_certificate_file(node), tls_node_key_file(node), cert->get(), key.get());
        !s)
      return s;
  }
  return Status::ok();
}

}  // namespace fjord::tcp
