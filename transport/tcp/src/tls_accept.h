// A listener's TLS set-up (internal header), as the steps of a connection
// waiting in its PendingHandshakes (fjord/transport/pending_handshakes.h):
// the peer's first bytes say TLS or plain; a TLS peer's handshake runs as
// its bytes arrive, then the handshake request it sends through TLS is
// decrypted until it is whole. Nothing here waits for the peer, so a peer
// that stalls at any step holds only its own slot, under the bounds and the
// one deadline of every waiting set-up.
//
// Thread: the listener's. Slow path: allocates (the session, the request).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fjord/base/status.h"
#include "fjord/transport/handshake.h"
#include "fjord/transport/pending_handshakes.h"
#include "tls_session.h"

namespace fjord::tcp {

class TlsAcceptSetup final : public transport::PendingSetup, public transport::HandshakeStream {
 public:
  // On accepted socket `fd` of a listener holding `context`; `peer` names
  // the other end in messages.
  TlsAcceptSetup(std::shared_ptr<TlsContext> context, int fd, std::string peer);

  Progress advance() override;

  // Once advance() said kReady: the TLS handshake's failure, if it failed
  // (the connection is then closed unanswered), and the session of a peer
  // that opened with TLS (nullptr for a plain one).
  const Status& handshake_failure() const { return handshake_failure_; }
  TlsSession* session() const { return session_.get(); }
  std::unique_ptr<TlsSession> take_session() { return std::move(session_); }

  // The handshake's stream through TLS (transport::HandshakeStreamScope):
  // the request already decrypted, then the session. A read of the request
  // that failed fails here at the same point, in the same words.
  Status send_all(std::span<const std::byte> bytes, DeadlineNs deadline) override;
  Status recv_exact(std::span<std::byte> bytes, DeadlineNs deadline) override;

 private:
  enum class Step : uint8_t { kFirstBytes, kPlain, kHandshake, kRequest, kDone };
  Progress look_at_first_bytes();
  Progress shake_hands();
  Progress read_request();
  // Decrypts into `into` what has arrived, never waiting; how many bytes.
  Result<std::size_t> read_arrived(std::span<std::byte> into);
  Progress done();
  // Reads that bring nothing while the socket still has bytes: a TLS
  // record split across recv()s costs one, a whole request a few at most.
  static constexpr uint32_t kMaxEmptyReads = 64;

  std::shared_ptr<TlsContext> context_;
  int fd_;
  std::string peer_;
  Step step_ = Step::kFirstBytes;
  std::unique_ptr<TlsSession> session_;
  Status handshake_failure_;
  std::vector<std::byte> request_;  // its prefix, then the whole request (the prefix's total_bytes)
  std::size_t request_read_ = 0;    // of request_, decrypted so far
  std::size_t request_served_ = 0;  // of those, handed to recv_exact()
  uint32_t empty_reads_ = 0;        // read_arrived()'s retries (kMaxEmptyReads)
  Status read_failure_;             // why the request stopped short
};

}  // namespace fjord::tcp
