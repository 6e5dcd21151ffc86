// The first bytes a TLS 1.3 client sends (its ClientHello record), made by
// OpenSSL over memory, for tests of peers that stop half-way through a
// TLS set-up. Needs OpenSSL (tcp_dep brings it).
#pragma once

#include <openssl/bio.h>
#include <openssl/ssl.h>

#include <cstdint>
#include <vector>

namespace fjord::test {

inline std::vector<uint8_t> tls_client_hello() {
  std::vector<uint8_t> hello;
  SSL_CTX* context = SSL_CTX_new(TLS_client_method());
  if (context == nullptr) return hello;
  SSL_CTX_set_min_proto_version(context, TLS1_3_VERSION);
  SSL* ssl = SSL_new(context);
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  if (ssl != nullptr && in != nullptr && out != nullptr) {
    SSL_set_bio(ssl, in, out);  // the session owns both from here
    in = out = nullptr;
    SSL_set_connect_state(ssl);
    (void)SSL_do_handshake(ssl);  // writes the hello, then waits for the server's
    BIO* written = SSL_get_wbio(ssl);
    hello.resize(BIO_ctrl_pending(written));
    if (BIO_read(written, hello.data(), static_cast<int>(hello.size())) != static_cast<int>(hello.size()))
      hello.clear();
  }
  BIO_free(in);
  BIO_free(out);
  SSL_free(ssl);
  SSL_CTX_free(context);
  return hello;
}

}  // namespace fjord::test
