// TLS on a TCP link: credentials, handshake and record I/O over OpenSSL.
// Set-up is the slow path (a client's handshake blocks with a deadline, a
// listener's never blocks); read()/write() are the data path.
#include "tls_session.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "fjord/base/assert.h"
#include "fjord/base/clock.h"
#include "fjord/tcp/tls_credentials.h"

namespace fjord::tcp {
namespace {

int poll_ms_until(DeadlineNs deadline) {
  const uint64_t now = monotonic_ns();
  return now >= deadline ? 0 : static_cast<int>(std::min<uint64_t>((deadline - now) / 1'000'000 + 1, 1000));
}

// The first directory of `search_path` holding `file`, joined; empty if none.
std::string find_in_search_path(const std::string& search_path, const std::string& file) {
  std::size_t start = 0;
  while (start <= search_path.size()) {
    const std::size_t end = std::min(search_path.find(':', start), search_path.size());
    const std::string dir = search_path.substr(start, end - start);
    if (!dir.empty()) {
      std::string path = dir;
      path.append("/").append(file);
      struct stat st {};
      if (::stat(path.c_str(), &st) == 0) return path;
    }
    start = end + 1;
  }
  return {};
}

Status credential_error(const std::string& what) { return Status(StatusCode::kInvalidArgument, what); }

Result<std::string> find_file(const std::string& search_path, const std::string& file, const std::string& role) {
  std::string path = find_in_search_path(search_path, file);
  if (path.empty()) return credential_error("no " + role + " " + file + " in TlsSearchPath=" + search_path);
  return path;
}

// A private key others can read is not a secret: refuse it as ssh does.
Status check_key_mode(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return io_error("stat " + path, errno);
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return credential_error("private key " + path + " is readable by others (mode " + mode +
                            "); it must be readable by its owner only (chmod 600)");
  }
  return Status::ok();
}

Status configure_context(SSL_CTX* ctx, const std::string& ca, const std::string& cert, const std::string& key) {
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  // AES-128-GCM first (OpenSSL's default order starts with AES-256-GCM):
  // TLS 1.3's mandatory suite, ten AES rounds per block instead of fourteen.
  // The server follows the client's order, and both ends set the same.
  if (SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256") != 1)
    return Status(StatusCode::kInternal, "SSL_CTX_set_ciphersuites: " + openssl_errors());
  if (SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr) != 1)
    return credential_error("cluster CA certificate " + ca + ": " + openssl_errors());
  if (SSL_CTX_use_certificate_chain_file(ctx, cert.c_str()) != 1)
    return credential_error("node certificate " + cert + ": " + openssl_errors());
  if (SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) != 1)
    return credential_error("private key " + key + ": " + openssl_errors());
  if (SSL_CTX_check_private_key(ctx) != 1)
    return credential_error("private key " + key + " does not belong to certificate " + cert + ": " + openssl_errors());
  // No session tickets or renegotiation: after the handshake neither side
  // sends anything but application records unless the peer asks for a key
  // update, so a read never has to write.
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF);
  // Partial writes: flush() counts whole records sent and retries the rest;
  // the retry passes the same bytes from the same ring offset.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // No read-ahead: the handshake takes only its own records from memory,
  // so what follows them is there for the record layer (start_records).
  SSL_CTX_set_read_ahead(ctx, 0);
  SSL_CTX_set_keylog_callback(ctx, TlsSession::note_traffic_secret);
  return Status::ok();
}

// The node id in a certificate's common name "fjord-node-<id>"; kNoNode if none.
NodeId certificate_node(X509* cert) {
  if (cert == nullptr) return kNoNode;
  char name[128] = {};
  if (X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, name, sizeof name) <= 0) return kNoNode;
  const std::string_view text(name);
  const std::string_view prefix = kTlsNodeNamePrefix;
  if (text.substr(0, prefix.size()) != prefix) return kNoNode;
  unsigned id = 0;
  const auto digits = text.substr(prefix.size());
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
  if (ec != std::errc() || end != digits.data() + digits.size() || id == 0 || id > kMaxNodeId) return kNoNode;
  return static_cast<NodeId>(id);
}

Status handshake_failure(const std::string& peer, const std::string& why) {
  return Status(StatusCode::kRejected, "TLS handshake with " + peer + " failed: " + why);
}

// A listener without TLS answers a ClientHello with a plain handshake
// refusal: its magic where a TLS record should start.
bool plain_reply_waiting(int fd) {
  // A TLS record starts with its content type (20..24); the reply's magic
  // starts with 'F'. The session has read nothing of the socket itself.
  std::byte first{};
  if (::recv(fd, &first, 1, MSG_PEEK | MSG_DONTWAIT) != 1) return false;
  return first == static_cast<std::byte>(transport::kHandshakeReplyMagic & 0xff);
}

Status plain_refusal(int fd, DeadlineNs deadline, const std::string& peer) {
  auto bytes = transport::recv_handshake_message(fd, transport::kHandshakeReplyMagic, deadline);
  if (!bytes) return bytes.status();
  auto reply = transport::decode_reply(*bytes);
  if (!reply) return reply.status();
  return Status(StatusCode::kRejected, peer + " answered the TLS handshake without TLS: " +
                                           (reply->accepted ? std::string("it accepted in plain") : reply->reason));
}

}  // namespace

TlsContext::TlsContext(SSL_CTX* ctx, std::string certificate_path)
    : ctx_(ctx), certificate_path_(std::move(certificate_path)) {}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

Result<std::shared_ptr<TlsContext>> TlsContext::load(NodeId self, const std::string& search_path) {
  FJORD_ASSERT(self != kNoNode);
  if (search_path.empty()) return credential_error("TlsSearchPath is not set");
  auto ca = find_file(search_path, std::string(kTlsCaCertificateFile), "cluster CA certificate");
  if (!ca) return ca.status();
  auto cert = find_file(search_path, tls_node_certificate_file(self), "certificate for node " + std::to_string(self));
  if (!cert) return cert.status();
  auto key = find_file(search_path, tls_node_key_file(self), "private key for node " + std::to_string(self));
  if (!key) return key.status();
  if (Status s = check_key_mode(*key); !s) return s;
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_method());
  if (ctx == nullptr) return Status(StatusCode::kInternal, "SSL_CTX_new: " + openssl_errors());
  std::shared_ptr<TlsContext> context(new TlsContext(ctx, *cert));
  if (Status s = configure_context(ctx, *ca, *cert, *key); !s) return s;
  return context;
}

TlsSession::TlsSession(SSL* ssl, int fd)
    : ssl_(ssl), fd_(fd), ciphertext_(std::make_unique<std::byte[]>(kCiphertextBytes)) {
  SSL_set_app_data(ssl_, this);  // for note_traffic_secret
}

// Lines "CLIENT_TRAFFIC_SECRET_0 <client random> <secret>" and the SERVER_
// one, in hex (the NSS key log format); other secrets are not kept.
void TlsSession::note_traffic_secret(const SSL* ssl, const char* line) {
  auto* session = static_cast<TlsSession*>(SSL_get_app_data(ssl));
  if (session == nullptr) return;
  const std::string_view text(line);
  const bool client = text.starts_with("CLIENT_TRAFFIC_SECRET_0 ");
  if (!client && !text.starts_with("SERVER_TRAFFIC_SECRET_0 ")) return;
  const std::size_t at = text.rfind(' ');
  const std::string_view hex = text.substr(at + 1);
  std::array<uint8_t, 48>& secret = client ? session->client_secret_ : session->server_secret_;
  std::size_t& bytes = client ? session->client_secret_bytes_ : session->server_secret_bytes_;
  bytes = 0;
  if (hex.size() % 2 != 0 || hex.size() / 2 > secret.size()) return;
  for (std::size_t i = 0; i < hex.size() / 2; ++i) {
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(hex.data() + 2 * i, hex.data() + 2 * i + 2, value, 16);
    if (ec != std::errc() || end != hex.data() + 2 * i + 2) return;
    secret[i] = static_cast<uint8_t>(value);
  }
  bytes = hex.size() / 2;
}

// After the handshake, the session's bytes go through TlsRecordSender and
// TlsRecordReceiver with keys derived from the traffic secrets. Without
// read-ahead OpenSSL holds nothing beyond its last handshake record; what
// the handshake read from the socket after it waits in the memory BIO and
// moves to the receiver.
Status TlsSession::start_records() {
  const auto wipe = [this] {
    OPENSSL_cleanse(client_secret_.data(), client_secret_.size());
    OPENSSL_cleanse(server_secret_.data(), server_secret_.size());
    client_secret_bytes_ = server_secret_bytes_ = 0;
  };
  const SSL_CIPHER* cipher = SSL_get_current_cipher(ssl_);
  const uint16_t id = cipher ? SSL_CIPHER_get_protocol_id(cipher) : 0;
  if (id != 0x1301 && id != 0x1302 && id != 0x1303) {
    wipe();
    return Status(StatusCode::kInternal, "the TLS handshake agreed a cipher suite the record layer does not know");
  }
  const bool client = SSL_is_server(ssl_) == 0;
  const std::span<const uint8_t> mine(client ? client_secret_.data() : server_secret_.data(),
                                      client ? client_secret_bytes_ : server_secret_bytes_);
  const std::span<const uint8_t> theirs(client ? server_secret_.data() : client_secret_.data(),
                                        client ? server_secret_bytes_ : client_secret_bytes_);
  auto send_keys = derive_traffic_keys(static_cast<TlsSuite>(id), mine);
  auto receive_keys = derive_traffic_keys(static_cast<TlsSuite>(id), theirs);
  wipe();
  if (!send_keys) return send_keys.status();
  if (!receive_keys) return receive_keys.status();
  if (SSL_has_pending(ssl_) == 1)
    return Status(StatusCode::kInternal,
                  "OpenSSL holds bytes past the TLS handshake; the record layer cannot take over");
  BIO* rbio = SSL_get_rbio(ssl_);
  const std::size_t waiting = rbio ? BIO_ctrl_pending(rbio) : 0;
  if (waiting > kCiphertextBytes)
    return Status(StatusCode::kProtocolError, "more than a TLS record arrived with the end of the handshake");
  const int read = waiting > 0 ? BIO_read(rbio, ciphertext_.get(), static_cast<int>(waiting)) : 0;
  if (read != static_cast<int>(waiting)) return Status(StatusCode::kInternal, "reading the handshake's memory BIO");
  if (Status s = sender_.start(*send_keys); !s) return s;
  return receiver_.start(*receive_keys, {ciphertext_.get(), waiting});
}

// The session reads from memory that this class fills from the socket
// (take_socket_bytes), never from the socket itself: an idle poll costs one
// recv(), and during the handshake the client can look at the server's
// first bytes before OpenSSL does.
//
// It writes to memory too, which send_handshake_output() hands to the
// socket with MSG_NOSIGNAL: a peer that resets the connection mid-handshake
// is an error for that set-up, never a SIGPIPE that ends the process.
Status TlsSession::read_through_memory() {
  BIO* memory = BIO_new(BIO_s_mem());
  if (memory == nullptr) return Status(StatusCode::kInternal, "BIO_new: " + openssl_errors());
  BIO_set_mem_eof_return(memory, -1);  // empty means "wait", not end of stream
  SSL_set0_rbio(ssl_, memory);
  receive_bio_ = memory;
  BIO* output = BIO_new(BIO_s_mem());
  if (output == nullptr) return Status(StatusCode::kInternal, "BIO_new: " + openssl_errors());
  SSL_set0_wbio(ssl_, output);
  send_bio_ = output;
  return Status::ok();
}

// Sends what the handshake wrote to memory: kOk once all of it has left,
// kWouldBlock while the socket has no room for the rest, kFailed
// (last_error_) if the socket fails.
TlsIoState TlsSession::send_handshake_output() {
  for (;;) {
    char* data = nullptr;
    const long held = BIO_get_mem_data(send_bio_, &data);
    if (held <= 0) return TlsIoState::kOk;
    const ssize_t n = ::send(fd_, data, static_cast<std::size_t>(held), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return TlsIoState::kWouldBlock;
      last_error_ = std::string("send failed: ") + std::strerror(errno);
      return TlsIoState::kFailed;
    }
    std::array<char, 4096> sent{};  // the sent bytes leave the BIO through here
    for (long left = n; left > 0;) {
      const int chunk = static_cast<int>(std::min<long>(left, static_cast<long>(sent.size())));
      const int taken = BIO_read(send_bio_, sent.data(), chunk);
      FJORD_ASSERT(taken == chunk);
      left -= chunk;
    }
  }
}

// One recv() into the session's memory: kOk (bytes taken), kWouldBlock,
// kClosed or kFailed (last_error_).
TlsIoState TlsSession::take_socket_bytes() {
  const ssize_t n = ::recv(fd_, ciphertext_.get(), kCiphertextBytes, MSG_DONTWAIT);
  if (n > 0) {
    const int written = BIO_write(receive_bio_, ciphertext_.get(), static_cast<int>(n));
    FJORD_ASSERT(written == static_cast<int>(n));
    return TlsIoState::kOk;
  }
  if (n == 0) {
    last_error_ = "the peer closed the connection";
    return TlsIoState::kClosed;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return TlsIoState::kWouldBlock;
  last_error_ = std::string("receive failed: ") + std::strerror(errno);
  return TlsIoState::kFailed;
}

TlsSession::~TlsSession() {
  OPENSSL_cleanse(client_secret_.data(), client_secret_.size());  // a handshake that failed midway
  OPENSSL_cleanse(server_secret_.data(), server_secret_.size());
  SSL_free(ssl_);  // the socket stays open: the transporter owns it
}

Result<std::unique_ptr<TlsSession>> TlsSession::connect(const TlsContext& context, int fd, NodeId server,
                                                        DeadlineNs deadline, const std::string& peer) {
  ERR_clear_error();
  SSL* ssl = SSL_new(context.get());
  if (ssl == nullptr) return Status(StatusCode::kInternal, "SSL_new: " + openssl_errors());
  std::unique_ptr<TlsSession> session(new TlsSession(ssl, fd));
  if (Status s = session->read_through_memory(); !s) return s;
  if (Status s = session->connect_handshake(deadline, peer); !s) return s;
  if (Status s = session->check_peer(server); !s) return s;
  return session;
}

Result<std::unique_ptr<TlsSession>> TlsSession::start_accept(const TlsContext& context, int fd) {
  ERR_clear_error();
  SSL* ssl = SSL_new(context.get());
  if (ssl == nullptr) return Status(StatusCode::kInternal, "SSL_new: " + openssl_errors());
  std::unique_ptr<TlsSession> session(new TlsSession(ssl, fd));
  if (Status s = session->read_through_memory(); !s) return s;
  return session;
}

Result<TlsHandshakeWait> TlsSession::handshake_step(bool client, const std::string& peer) {
  ERR_clear_error();
  const int rc = client ? SSL_connect(ssl_) : SSL_accept(ssl_);
  // A finished handshake's SSL_connect()/SSL_accept() returns 1 again, so
  // output that did not fit the socket is sent by a later step.
  const TlsIoState sent = send_handshake_output();
  if (sent == TlsIoState::kFailed) return handshake_failure(peer, last_error_);
  if (sent == TlsIoState::kWouldBlock) return TlsHandshakeWait::kWantWrite;
  if (rc == 1) {
    peer_node_ = certificate_node(SSL_get0_peer_certificate(ssl_));
    if (Status s = start_records(); !s) return s;
    return TlsHandshakeWait::kDone;
  }
  const int err = SSL_get_error(ssl_, rc);
  if (err == SSL_ERROR_WANT_READ) return TlsHandshakeWait::kWantRead;
  if (err == SSL_ERROR_WANT_WRITE) return TlsHandshakeWait::kWantWrite;
  std::string why = openssl_errors();
  const long verify = SSL_get_verify_result(ssl_);
  if (verify != X509_V_OK) why += " (" + std::string(X509_verify_cert_error_string(verify)) + ")";
  if (err == SSL_ERROR_SYSCALL) why = errno != 0 ? std::strerror(errno) : "the peer closed the connection";
  return handshake_failure(peer, why);
}

Status TlsSession::connect_handshake(DeadlineNs deadline, const std::string& peer) {
  for (;;) {
    auto wait = handshake_step(true, peer);
    if (!wait) return wait.status();
    if (*wait == TlsHandshakeWait::kDone) return Status::ok();
    if (monotonic_ns() >= deadline) return Status(StatusCode::kTimeout, "TLS handshake with " + peer + " timed out");
    const bool want_read = *wait == TlsHandshakeWait::kWantRead;
    pollfd p{fd_, static_cast<short>(want_read ? POLLIN : POLLOUT), 0};
    if (::poll(&p, 1, poll_ms_until(deadline)) <= 0 || !want_read) continue;
    if (plain_reply_waiting(fd_)) return plain_refusal(fd_, deadline, peer);
    const TlsIoState taken = take_socket_bytes();
    if (taken == TlsIoState::kClosed || taken == TlsIoState::kFailed) return handshake_failure(peer, last_error_);
  }
}

TlsIoState TlsSession::take_setup_bytes() {
  const std::size_t held = BIO_ctrl_pending(receive_bio_);
  const TlsIoState taken = take_socket_bytes();
  if (taken != TlsIoState::kOk) return taken;
  setup_bytes_ += BIO_ctrl_pending(receive_bio_) - held;
  if (setup_bytes_ <= kMaxSetupBytes) return TlsIoState::kOk;
  last_error_ = "it sent more than " + std::to_string(kMaxSetupBytes / 1024) + " KiB of TLS handshake";
  return TlsIoState::kFailed;
}

// Every round takes bytes from the socket or returns, and a peer gets
// kMaxSetupBytes in all: the loop ends, and an edge-triggered poller sees
// the socket drained whenever this says kWantRead.
Result<TlsHandshakeWait> TlsSession::advance_accept(const std::string& peer) {
  FJORD_ASSERT(!SSL_is_init_finished(ssl_));
  for (;;) {
    auto wait = handshake_step(false, peer);
    if (!wait || *wait != TlsHandshakeWait::kWantRead) return wait;
    const TlsIoState taken = take_setup_bytes();
    if (taken == TlsIoState::kWouldBlock) return TlsHandshakeWait::kWantRead;
    if (taken != TlsIoState::kOk) return handshake_failure(peer, last_error_);
  }
}

Status TlsSession::check_peer(NodeId claimed) const {
  if (peer_node_ == claimed) return Status::ok();
  const std::string named = peer_node_ == kNoNode ? std::string("names no node (its common name is not ") +
                                                        std::string(kTlsNodeNamePrefix) + "<id>)"
                                                  : "names node " + std::to_string(peer_node_);
  return Status(StatusCode::kRejected, "the TLS certificate node " + std::to_string(claimed) + " presented " + named +
                                           "; a certificate is good only for the node it names");
}

Status TlsSession::send_all(std::span<const std::byte> bytes, DeadlineNs deadline) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const TlsIo io = write(bytes.subspan(done));
    if (io.state == TlsIoState::kOk) {
      done += io.bytes;
      continue;
    }
    if (io.state != TlsIoState::kWouldBlock)
      return Status(StatusCode::kLinkDown, "during the handshake: " + write_error());
    if (monotonic_ns() >= deadline) return Status(StatusCode::kTimeout, "handshake send timed out");
    pollfd p{fd_, POLLOUT, 0};
    ::poll(&p, 1, poll_ms_until(deadline));
  }
  return Status::ok();
}

Status TlsSession::recv_exact(std::span<std::byte> bytes, DeadlineNs deadline) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const TlsIo io = read(bytes.subspan(done));
    if (io.state == TlsIoState::kOk) {
      done += io.bytes;
      continue;
    }
    if (io.state == TlsIoState::kClosed)
      return Status(StatusCode::kLinkDown, "peer closed the connection during the handshake");
    if (io.state == TlsIoState::kFailed) return Status(StatusCode::kLinkDown, "during the handshake: " + read_error());
    if (monotonic_ns() >= deadline) return Status(StatusCode::kTimeout, "handshake receive timed out");
    pollfd p{fd_, POLLIN, 0};
    ::poll(&p, 1, poll_ms_until(deadline));
  }
  return Status::ok();
}

bool starts_with_tls_record(int fd) {
  // A TLS record header: content type 22 (handshake), version 3.x.
  std::byte prefix[2];
  if (::recv(fd, prefix, sizeof prefix, MSG_PEEK | MSG_DONTWAIT) != static_cast<ssize_t>(sizeof prefix)) return false;
  return prefix[0] == std::byte{0x16} && prefix[1] == std::byte{0x03};
}

}  // namespace fjord::tcp
