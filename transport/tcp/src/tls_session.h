// TLS on a TCP link (internal header): the node's credentials (TlsContext),
// the TLS handshake right after connect/accept, and the record layer the
// data path reads and writes through (TlsSession). OpenSSL, TLS 1.3 only.
//
// Both ends present a certificate signed by the cluster's CA and verify the
// other's. A node certificate names its node in its common name
// ("fjord-node-<id>"); the client checks that the server's names the node it
// dialled, the server that the client's names the node its handshake
// request claims (check_peer), so a certificate lends no other node's id.
//
// Files, looked up in the directories of TlsSearchPath (colon-separated,
// the first directory that holds a file wins; fjord/tcp/tls_credentials.h):
//   cluster-ca.crt   the cluster's CA certificate (PEM)
//   node-<id>.crt    this node's certificate, signed by that CA (PEM)
//   node-<id>.key    its private key (PEM), readable by its owner only
//
// Threads: set-up runs on the connecting or accepting thread. Afterwards the
// link's sender thread calls write() and its receiver thread read() and
// holds_data(), possibly at the same time: after the handshake the session's
// bytes go through its own record layer (tls_records.h), whose two
// directions share nothing, so no lock. Hot path: read(), write(),
// holds_data(); no allocation except when a call fails.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "fjord/base/status.h"
#include "fjord/transport/handshake.h"
#include "fjord/transport/types.h"
#include "tls_records.h"

struct ssl_st;
struct ssl_ctx_st;
struct bio_st;

namespace fjord::tcp {

// A node's TLS credentials, loaded once; shared by the sessions made from it.
class TlsContext {
 public:
  // Loads node `self`'s certificate and key and the cluster CA from
  // `search_path`. Errors name the file and what is wrong with it.
  static Result<std::shared_ptr<TlsContext>> load(NodeId self, const std::string& search_path);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  ssl_ctx_st* get() const { return ctx_; }
  const std::string& certificate_path() const { return certificate_path_; }

 private:
  TlsContext(ssl_ctx_st* ctx, std::string certificate_path);
  ssl_ctx_st* ctx_;
  std::string certificate_path_;
};

// What a handshake driven without blocking waits for.
enum class TlsHandshakeWait : uint8_t {
  kDone,       // the handshake has finished
  kWantRead,   // the peer's next bytes (the socket had no more)
  kWantWrite,  // room in the socket to send
};

class TlsSession final : public transport::HandshakeStream {
 public:
  // The TLS handshake as the client on connected socket `fd`, checking that
  // the server's certificate names node `server`. A peer that answers with
  // a plain handshake refusal (a listener without TLS) is reported with its
  // reason. `peer`: how messages name the other end.
  static Result<std::unique_ptr<TlsSession>> connect(const TlsContext& context, int fd, NodeId server,
                                                     DeadlineNs deadline, const std::string& peer);
  // The server half, driven without blocking by a listener that serves many
  // set-ups from one poll loop. start_accept() makes the session on an
  // accepted socket whose first bytes are a TLS ClientHello
  // (starts_with_tls_record); each advance_accept() takes what the socket
  // holds and moves the handshake on as far as that lets it, never waiting:
  // kDone once it has finished, else what it waits for. A failure names
  // `peer` and what went wrong.
  static Result<std::unique_ptr<TlsSession>> start_accept(const TlsContext& context, int fd);
  Result<TlsHandshakeWait> advance_accept(const std::string& peer);
  ~TlsSession() override;
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  // The node the peer's certificate names, or kNoNode if it names none.
  NodeId peer_node() const { return peer_node_; }
  // Refuses unless the peer's certificate names node `claimed`.
  Status check_peer(NodeId claimed) const;

  // The set-up's byte stream (transport::HandshakeStreamScope).
  Status send_all(std::span<const std::byte> bytes, DeadlineNs deadline) override;
  Status recv_exact(std::span<std::byte> bytes, DeadlineNs deadline) override;

  // Data path. read() decrypts into `into`: every whole record received
  // that fits, after one recv() if none was waiting. write() seals a prefix
  // of `bytes` into records and sends them in one send(): the bytes whose
  // records all left; a partial send is kWouldBlock, and the next write()
  // passes the same bytes again (TlsRecordSender).
  TlsIo read(std::span<std::byte> into) { return receiver_.read(fd_, into); }
  TlsIo write(std::span<const std::byte> bytes) { return sender_.write(fd_, bytes); }
  // True if the last read() returned bytes and more wait inside the
  // session, where wait_fd() does not show them. After a read() that said
  // kWouldBlock, anything more must come through the socket, which then
  // becomes readable.
  bool holds_data() const { return receiver_.holds_data(); }
  // Why the last read() said kFailed or kClosed, or write() said kFailed.
  const std::string& read_error() const { return receiver_.error(); }
  const std::string& write_error() const { return sender_.error(); }

  // OpenSSL's key-log callback (the context sets it): keeps the session's
  // application traffic secrets for start_records().
  static void note_traffic_secret(const ssl_st* ssl, const char* line);

 private:
  TlsSession(ssl_st* ssl, int fd);
  // One SSL_connect() or SSL_accept(): kDone, or what it waits for.
  Result<TlsHandshakeWait> handshake_step(bool client, const std::string& peer);
  Status connect_handshake(DeadlineNs deadline, const std::string& peer);
  // take_socket_bytes() for advance_accept(), counted against
  // kMaxSetupBytes: a peer past it is kFailed.
  TlsIoState take_setup_bytes();
  Status read_through_memory();
  TlsIoState take_socket_bytes();
  TlsIoState send_handshake_output();
  // After the handshake: the record layer takes over with the application
  // traffic keys, and the bytes read beyond the handshake's records.
  Status start_records();
  // One recv() of ciphertext at most during the handshake: a little over
  // one whole TLS record.
  static constexpr std::size_t kCiphertextBytes = 16 * 1024 + 512;
  // What a peer may send in a handshake driven by advance_accept(): far
  // past any handshake of the cluster's (a certificate chain fits OpenSSL's
  // own limit of 100 KiB), and a bound on what one call takes from the
  // socket.
  static constexpr std::size_t kMaxSetupBytes = 256 * 1024;

  ssl_st* ssl_;
  int fd_;
  bio_st* receive_bio_ = nullptr;  // owned by ssl_; the handshake fills it from fd_
  bio_st* send_bio_ = nullptr;     // owned by ssl_; send_handshake_output() empties it into fd_
  std::unique_ptr<std::byte[]> ciphertext_;
  NodeId peer_node_ = kNoNode;
  std::string last_error_;  // the handshake's: why take_socket_bytes() failed
  // The application traffic secrets, from OpenSSL's key log during the
  // handshake (their size is the suite's hash size); wiped once used.
  std::array<uint8_t, 48> client_secret_{};
  std::array<uint8_t, 48> server_secret_{};
  std::size_t client_secret_bytes_ = 0;
  std::size_t server_secret_bytes_ = 0;
  TlsRecordSender sender_;
  TlsRecordReceiver receiver_;

  std::size_t setup_bytes_ = 0;  // ciphertext advance_accept() took (kMaxSetupBytes)
};

// Whether the first bytes waiting on `fd` are a TLS handshake record (a
// ClientHello), read without taking them.
bool starts_with_tls_record(int fd);

}  // namespace fjord::tcp
