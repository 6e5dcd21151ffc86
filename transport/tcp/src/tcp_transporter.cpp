// TcpTransporter and TlsTcpTransporter data paths. Hot path: no allocation,
// one syscall per flush (with TLS too) and one per empty receive poll.
#include "tcp_transporter.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "fjord/base/log.h"

namespace fjord::tcp {

using transport::FlushStatus;
using transport::ReceiveBatch;

inline uint64_t TcpTransporter::restart_point(HotWindow& hot, uint64_t position, std::size_t ring_bytes) noexcept {
  if (!hot.due(position)) return position;
  const uint64_t offset = position % ring_bytes;
  if (!hot.go_back_now(position, offset, [] { return uint64_t{0}; })) return position;  // empty: nothing unread
  const uint64_t lap_start = HotWindow::lap_end(position, offset, ring_bytes);
  hot.went_back(lap_start);
  return lap_start;
}

TcpTransporter::TcpTransporter(transport::LinkConfig config, NodeId self, UniqueFd socket, MirroredMap send_ring,
                               MirroredMap receive_ring)
    : Transporter(std::move(config), self),
      socket_(std::move(socket)),
      send_ring_(std::move(send_ring)),
      receive_ring_(std::move(receive_ring)),
      send_hot_(send_ring_.size(), kHotWindowBytes),
      receive_hot_(receive_ring_.size(), kHotWindowBytes) {
  FJORD_ASSERT(socket_.valid());
  FJORD_ASSERT(send_ring_.size() >= 2 * frame::kMaxFrameBytes);
  FJORD_ASSERT(receive_ring_.size() >= 2 * frame::kMaxFrameBytes);
  note_connect();
}

TcpTransporter::~TcpTransporter() = default;

std::span<std::byte> TcpTransporter::reserve(std::size_t min_bytes) {
  FJORD_ASSERT(min_bytes > 0);
  FJORD_ASSERT(min_bytes <= frame::kMaxFrameBytes);
  if (!is_up()) return {};
  std::size_t free_bytes = send_ring_.size() - send_buffer_used();
  if (free_bytes < min_bytes) {
    (void)flush();  // the kernel may take some; cheap compared with failing
    free_bytes = send_ring_.size() - send_buffer_used();
    if (free_bytes < min_bytes || !is_up()) return {};
  }
  reserved_ = free_bytes;
  return {send_ring_.data() + committed_ % send_ring_.size(), free_bytes};
}

void TcpTransporter::commit(std::size_t bytes, uint32_t frames) {
  FJORD_ASSERT_MSG(bytes <= reserved_, "commit beyond the reservation");
  committed_ += bytes;
  reserved_ = 0;
  note_commit(bytes, frames);
  note_send_buffer_level();
}

FlushStatus TcpTransporter::flush() {
  if (!is_up()) return FlushStatus::kDown;
  while (sent_ < committed_) {
    const ssize_t n = ::send(socket_.get(), send_ring_.data() + sent_ % send_ring_.size(),
                             static_cast<std::size_t>(committed_ - sent_), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      sent_ += static_cast<uint64_t>(n);
      note_send(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      note_send_buffer_level();
      return FlushStatus::kPending;
    }
    declare_down(Status(StatusCode::kLinkDown, std::string("send to node ") + std::to_string(remote_node()) +
                                                   " failed: " + std::strerror(errno)));
    return FlushStatus::kDown;
  }
  // All sent and nothing reserved: the ring is empty and may go back to its start.
  if (reserved_ == 0) committed_ = sent_ = restart_point(send_hot_, committed_, send_ring_.size());
  note_send_buffer_level();
  return FlushStatus::kFlushed;
}

void TcpTransporter::fill_receive_ring() {
  const std::size_t size = receive_ring_.size();
  while (!eof_) {
    const std::size_t free_bytes = size - static_cast<std::size_t>(filled_ - released_);
    if (free_bytes == 0) return;
    const ssize_t n = ::recv(socket_.get(), receive_ring_.data() + filled_ % size, free_bytes, MSG_DONTWAIT);
    if (n > 0) {
      filled_ += static_cast<uint64_t>(n);
      if (static_cast<std::size_t>(n) < free_bytes) return;  // drained the socket
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    end_of_stream(n == 0, n == 0 ? std::string() : std::strerror(errno));
  }
}

void TcpTransporter::end_of_stream(bool closed, const std::string& why) {
  eof_ = true;
  if (!closed) {
    declare_down(
        Status(StatusCode::kLinkDown, "receive from node " + std::to_string(remote_node()) + " failed: " + why));
    return;
  }
  // The whole frames before the end are delivered; bytes after them are
  // a frame the peer never finished (it died or broke mid-send), lost
  // with the link: say so, or it reads like an orderly close.
  scan_received();
  const uint64_t partial = filled_ - scanned_;
  declare_down(
      Status(StatusCode::kLinkDown,
             "node " + std::to_string(remote_node()) + " closed the connection" +
                 (partial == 0 ? std::string()
                               : " in the middle of a frame (" + std::to_string(partial) + " bytes of it received)")));
}

void TcpTransporter::scan_received() {
  if (scanned_ == filled_) return;
  const std::span<const std::byte> fresh(receive_ring_.data() + scanned_ % receive_ring_.size(),
                                         static_cast<std::size_t>(filled_ - scanned_));
  const frame::ScanResult scan = frame::scan_frames(fresh, config().checksum);
  if (scan.whole_bytes > 0) {
    scanned_ += scan.whole_bytes;
    scanned_frames_ += scan.frames;
    note_receive(scan.whole_bytes, scan.frames);
  }
  if (scan.error != frame::FrameError::kNone && scan.error != frame::FrameError::kIncomplete) {
    eof_ = true;  // nothing after a malformed frame can be trusted
    declare_down(Status(StatusCode::kProtocolError, "malformed frame from node " + std::to_string(remote_node()) +
                                                        " at stream offset " + std::to_string(scanned_) + ": " +
                                                        frame::frame_error_name(scan.error)));
  }
}

ReceiveBatch TcpTransporter::receive() {
  if (scanned_ == released_ && !eof_) {
    // All taken, no partial frame: the ring is empty and may go back to its start.
    if (filled_ == released_)
      filled_ = scanned_ = released_ = restart_point(receive_hot_, filled_, receive_ring_.size());
    fill_receive_ring();
    scan_received();
  }
  return {{receive_ring_.data() + released_ % receive_ring_.size(), static_cast<std::size_t>(scanned_ - released_)},
          scanned_frames_};
}

void TcpTransporter::release(std::size_t bytes) {
  FJORD_ASSERT_MSG(bytes <= scanned_ - released_, "release beyond the received frames");
  if (bytes == scanned_ - released_) {
    scanned_frames_ = 0;
  } else {
    // A partial release: count the frames given back (their lengths are valid).
    frame::FrameCursor cursor({receive_ring_.data() + released_ % receive_ring_.size(), bytes});
    frame::SignalView view;
    while (cursor.next(view)) --scanned_frames_;
  }
  released_ += bytes;
}

bool TcpTransporter::arm_wakeup() {
  if (scanned_ != released_ || !is_up()) return false;
  // Whole frames may already sit in our ring behind a partial one: scan first.
  scan_received();
  return scanned_ == released_ && is_up();
}

void TcpTransporter::on_down() {
  // shutdown(2) is safe while the other side's thread is inside send/recv on
  // this socket; close waits for the destructor.
  ::shutdown(socket_.get(), SHUT_RDWR);
}

// ---- TLS ------------------------------------------------------------------

TlsTcpTransporter::TlsTcpTransporter(transport::LinkConfig config, NodeId self, UniqueFd socket, MirroredMap send_ring,
                                     MirroredMap receive_ring, std::unique_ptr<TlsSession> tls)
    : TcpTransporter(std::move(config), self, std::move(socket), std::move(send_ring), std::move(receive_ring)),
      tls_(std::move(tls)) {
  FJORD_ASSERT(tls_ != nullptr);
}

FlushStatus TlsTcpTransporter::flush() {
  if (!is_up()) return FlushStatus::kDown;
  while (sent_ < committed_) {
    const TlsIo io =
        tls_->write({send_ring_.data() + sent_ % send_ring_.size(), static_cast<std::size_t>(committed_ - sent_)});
    if (io.state == TlsIoState::kOk) {
      sent_ += io.bytes;
      note_send(io.bytes);
      continue;
    }
    if (io.state == TlsIoState::kWouldBlock) {
      note_send_buffer_level();
      return FlushStatus::kPending;
    }
    declare_down(Status(StatusCode::kLinkDown,
                        "send to node " + std::to_string(remote_node()) + " failed: " + tls_->write_error()));
    return FlushStatus::kDown;
  }
  if (reserved_ == 0) committed_ = sent_ = restart_point(send_hot_, committed_, send_ring_.size());
  note_send_buffer_level();
  return FlushStatus::kFlushed;
}

// Reads until the session holds nothing more (or the ring is full): bytes
// left inside it would not make wait_fd() readable.
void TlsTcpTransporter::fill_receive_ring_tls() {
  const std::size_t size = receive_ring_.size();
  while (!eof_) {
    const std::size_t free_bytes = size - static_cast<std::size_t>(filled_ - released_);
    if (free_bytes == 0) return;
    const TlsIo io = tls_->read({receive_ring_.data() + filled_ % size, free_bytes});
    if (io.state == TlsIoState::kOk) {
      filled_ += io.bytes;
      if (!tls_->holds_data()) return;
      continue;
    }
    if (io.state == TlsIoState::kWouldBlock) return;
    end_of_stream(io.state == TlsIoState::kClosed, tls_->read_error());
  }
}

ReceiveBatch TlsTcpTransporter::receive() {
  if (scanned_ == released_ && !eof_) {
    if (filled_ == released_)
      filled_ = scanned_ = released_ = restart_point(receive_hot_, filled_, receive_ring_.size());
    fill_receive_ring_tls();
    scan_received();
  }
  return {{receive_ring_.data() + released_ % receive_ring_.size(), static_cast<std::size_t>(scanned_ - released_)},
          scanned_frames_};
}

bool TlsTcpTransporter::arm_wakeup() {
  if (tls_->holds_data()) return false;  // receive() reads it; the socket would not say
  return TcpTransporter::arm_wakeup();
}

}  // namespace fjord::tcp
