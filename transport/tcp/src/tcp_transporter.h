// TcpTransporter: the data path of one TCP link (internal header).
//
// Send: a private ring of SendBufferMemory bytes, mapped twice so reserve()
// always returns a contiguous span; flush() is one send() of everything
// committed. Receive: a private ring of ReceiveBufferMemory bytes; recv()
// appends, scan_frames() advances over whole valid frames.
//
// TlsTcpTransporter, a link with TLS (RequireTls), keeps the same rings of
// plaintext and puts a TlsSession between them and the socket: flush()
// encrypts committed bytes into records (a full socket is back-pressure,
// kPending, as without TLS), and the receive ring fills with decrypted
// bytes. Records already read from the socket may wait inside the session,
// where wait_fd() does not show them: the receive side reads until the
// session holds nothing, and arm_wakeup() refuses to sleep while it might.
// A subclass rather than a flag, so that plain TCP's path has no TLS test.
//
// Indices are monotonically increasing byte counters (position = counter
// modulo ring size); they are plain integers because each is touched by one
// thread only (send side or receive side).
//
// A ring that empties kHotWindowBytes or more into a lap goes back to its
// start (its counters move on to the next lap: fjord/base/hot_window.h), so
// a link that keeps up works in the same window of lines instead of walking
// megabytes of lines that left the cache.
#pragma once

#include "fjord/base/fd.h"
#include "fjord/base/hot_window.h"
#include "fjord/base/mirrored_map.h"
#include "fjord/base/tuning.h"
#include "fjord/transport/transporter.h"
#include "tls_session.h"

namespace fjord::tcp {

class TcpTransporter : public transport::Transporter {
 public:
  TcpTransporter(transport::LinkConfig config, NodeId self, UniqueFd socket, MirroredMap send_ring,
                 MirroredMap receive_ring);
  ~TcpTransporter() override;

  std::span<std::byte> reserve(std::size_t min_bytes) override;
  void commit(std::size_t bytes, uint32_t frames) override;
  transport::FlushStatus flush() override;
  std::size_t send_buffer_used() const override { return static_cast<std::size_t>(committed_ - sent_); }
  std::size_t send_buffer_capacity() const override { return send_ring_.size(); }

  transport::ReceiveBatch receive() override;
  void release(std::size_t bytes) override;

  int wait_fd() const override { return socket_.get(); }
  bool arm_wakeup() override;
  void disarm_wakeup() override {}

 protected:
  void on_down() override;
  // Reads what the socket has into the receive ring; false on EOF or error
  // (the link is then declared down).
  void fill_receive_ring();
  void scan_received();
  // The link goes down at the end of the stream: `closed` (an orderly end,
  // after whole frames) or an error, described by `why`.
  [[gnu::cold]] void end_of_stream(bool closed, const std::string& why);

  // For a ring empty at `position`: where it goes on, the next lap's start
  // once past the hot window, else `position`.
  // Declared inline: on every empty poll, in both transporters' paths.
  static inline uint64_t restart_point(HotWindow& hot, uint64_t position, std::size_t ring_bytes) noexcept;
  static constexpr std::size_t kHotWindowBytes = tuning::kTcpHotWindowBytes;

  UniqueFd socket_;
  MirroredMap send_ring_;
  MirroredMap receive_ring_;
  // Send side: sent_ <= committed_ <= sent_ + ring size.
  uint64_t sent_ = 0;
  uint64_t committed_ = 0;
  std::size_t reserved_ = 0;  // size of the outstanding reservation, for commit's check
  HotWindow send_hot_;
  // Receive side: released_ <= scanned_ <= filled_ <= released_ + ring size.
  uint64_t released_ = 0;
  uint64_t scanned_ = 0;
  uint64_t filled_ = 0;
  uint32_t scanned_frames_ = 0;  // frames in [released_, scanned_)
  HotWindow receive_hot_;
  bool eof_ = false;
};

class TlsTcpTransporter final : public TcpTransporter {
 public:
  TlsTcpTransporter(transport::LinkConfig config, NodeId self, UniqueFd socket, MirroredMap send_ring,
                    MirroredMap receive_ring, std::unique_ptr<TlsSession> tls);

  transport::FlushStatus flush() override;
  transport::ReceiveBatch receive() override;
  bool arm_wakeup() override;

 private:
  // Reads decrypted bytes into the receive ring until the session holds
  // nothing more or the ring is full.
  void fill_receive_ring_tls();

  std::unique_ptr<TlsSession> tls_;
};

}  // namespace fjord::tcp
