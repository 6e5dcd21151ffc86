#include "tls_accept.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "fjord/base/assert.h"

namespace fjord::tcp {

using transport::kHandshakePrefixBytes;
using transport::kHandshakeRequestMagic;

TlsAcceptSetup::TlsAcceptSetup(std::shared_ptr<TlsContext> context, int fd, std::string peer)
    : context_(std::move(context)), fd_(fd), peer_(std::move(peer)), request_(kHandshakePrefixBytes) {
  FJORD_ASSERT(context_ != nullptr);
  FJORD_ASSERT(fd_ >= 0);
}

transport::PendingSetup::Progress TlsAcceptSetup::advance() {
  switch (step_) {
    case Step::kFirstBytes: return look_at_first_bytes();
    case Step::kPlain:
      return transport::handshake_message_waiting(fd_, kHandshakeRequestMagic) ? Progress::kReady : Progress::kWantRead;
    case Step::kHandshake: return shake_hands();
    case Step::kRequest: return read_request();
    case Step::kDone: return Progress::kReady;
  }
  return Progress::kReady;
}

transport::PendingSetup::Progress TlsAcceptSetup::done() {
  step_ = Step::kDone;
  return Progress::kReady;
}

// Two bytes tell a ClientHello from the plain request's magic; a peer that
// failed or left is ready at once (the plain handshake reports it).
transport::PendingSetup::Progress TlsAcceptSetup::look_at_first_bytes() {
  std::byte first[2];
  const ssize_t n = ::recv(fd_, first, sizeof first, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Progress::kWantRead;
  if (n == 1) return Progress::kWantRead;
  if (n <= 0 || !starts_with_tls_record(fd_)) {
    step_ = Step::kPlain;
    return advance();
  }
  auto session = TlsSession::start_accept(*context_, fd_);
  if (!session) {
    handshake_failure_ = session.status();
    return done();
  }
  session_ = std::move(session).value();
  step_ = Step::kHandshake;
  return shake_hands();
}

transport::PendingSetup::Progress TlsAcceptSetup::shake_hands() {
  auto wait = session_->advance_accept(peer_);
  if (!wait) {
    handshake_failure_ = wait.status();
    return done();
  }
  if (*wait == TlsHandshakeWait::kWantRead) return Progress::kWantRead;
  if (*wait == TlsHandshakeWait::kWantWrite) return Progress::kWantWrite;
  step_ = Step::kRequest;
  return read_request();
}

// The prefix first, then as much more as its total_bytes says: the session
// keeps anything the peer sent past the request. A prefix that is no
// request ends the step; the handshake refuses it as it would a plain one.
transport::PendingSetup::Progress TlsAcceptSetup::read_request() {
  for (;;) {
    auto read = read_arrived(std::span(request_).subspan(request_read_));
    if (!read) {
      read_failure_ = read.status();
      return done();
    }
    request_read_ += *read;
    if (request_read_ < request_.size()) return Progress::kWantRead;
    if (request_.size() != kHandshakePrefixBytes) return done();
    auto total = transport::handshake_message_bytes(request_, kHandshakeRequestMagic);
    if (!total || *total <= kHandshakePrefixBytes) return done();
    request_.resize(*total);
    FJORD_ASSERT(request_.size() <= transport::kMaxHandshakeBytes);
  }
}

// The session's read() takes one recv() and returns what whole records
// hold; one that gave nothing while the socket still has bytes (a record
// split across recv()s) is tried again, so that kWantRead means drained.
// Those retries are bounded (kMaxEmptyReads), so a peer that keeps sending
// records without request bytes in them is refused rather than read for
// ever in one call. Failures read as recv_exact()'s through the session
// do, so that a request read here is refused in the same words as one read
// blocking.
Result<std::size_t> TlsAcceptSetup::read_arrived(std::span<std::byte> into) {
  std::size_t done = 0;
  while (done < into.size()) {
    const TlsIo io = session_->read(into.subspan(done));
    if (io.state == TlsIoState::kClosed)
      return Status(StatusCode::kLinkDown, "peer closed the connection during the handshake");
    if (io.state == TlsIoState::kFailed)
      return Status(StatusCode::kLinkDown, "during the handshake: " + session_->read_error());
    done += io.bytes;
    if (io.bytes > 0) continue;
    std::byte next;
    if (::recv(fd_, &next, 1, MSG_PEEK | MSG_DONTWAIT) != 1) break;  // drained: an edge comes with more
    if (++empty_reads_ > kMaxEmptyReads)
      return Status(StatusCode::kLinkDown, "during the handshake: " + std::to_string(kMaxEmptyReads) +
                                               " reads through TLS brought no request bytes");
  }
  return done;
}

Status TlsAcceptSetup::send_all(std::span<const std::byte> bytes, DeadlineNs deadline) {
  FJORD_ASSERT(session_ != nullptr);
  return session_->send_all(bytes, deadline);
}

Status TlsAcceptSetup::recv_exact(std::span<std::byte> bytes, DeadlineNs deadline) {
  FJORD_ASSERT(session_ != nullptr);
  FJORD_ASSERT(request_served_ <= request_read_);
  const std::size_t from_request = std::min(bytes.size(), request_read_ - request_served_);
  std::copy_n(request_.begin() + static_cast<std::ptrdiff_t>(request_served_), from_request, bytes.begin());
  request_served_ += from_request;
  if (from_request == bytes.size()) return Status::ok();
  if (!read_failure_) return read_failure_;
  return session_->recv_exact(bytes.subspan(from_request), deadline);
}

}  // namespace fjord::tcp
