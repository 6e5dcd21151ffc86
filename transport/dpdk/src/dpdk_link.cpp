// LinkChannel (engine thread) and DpdkTransporter (the link's threads).
// Hot path: the transporter's calls touch only the rings and the indices
// (no system call but the eventfd write of a wake-up); the engine copies
// each packet's payload once, from the send ring into the packet buffer and
// from the received buffer into the receive ring.
#include "dpdk_link.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "fjord/base/clock.h"

namespace fjord::dpdk {

using transport::FlushStatus;
using transport::ReceiveBatch;

// ---- LinkChannel: set-up ----------------------------------------------------

Result<std::shared_ptr<LinkChannel>> LinkChannel::create(const LinkSettings& settings, const ChannelSetup& setup) {
  std::shared_ptr<LinkChannel> channel(new LinkChannel(settings, setup));
  auto send = MirroredMap::anonymous(settings.send_ring_bytes, "fjord-dpdk-send");
  if (!send) return send.status();
  auto receive = MirroredMap::anonymous(settings.receive_ring_bytes, "fjord-dpdk-receive");
  if (!receive) return receive.status();
  channel->send_ring = std::move(send).value();
  channel->receive_ring = std::move(receive).value();
  channel->event.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!channel->event.valid()) return io_error("eventfd", errno);
  channel->advertised_limit_ = channel->receive_ring.size();
  return channel;
}

LinkChannel::LinkChannel(const LinkSettings& settings, const ChannelSetup& setup)
    : settings_(settings),
      setup_(setup),
      max_payload_(wire::max_payload_bytes(settings.mtu)),
      faults_(settings.faults) {
  FJORD_ASSERT(setup.connection != 0);
  FJORD_ASSERT(max_payload_ > 0);
  const uint64_t now = monotonic_ns();
  last_heard_ns_ = now;
  last_ack_progress_ns_ = now;
  ack_due_ = true;  // tell the peer our window at once: it sends nothing before
}

// ---- LinkChannel: receiving ---------------------------------------------------

bool LinkChannel::from_peer(const wire::Packet& packet) const {
  const wire::Addressing& a = packet.addressing;
  return packet.header.connection == setup_.connection && a.source_ip == setup_.addressing.destination_ip &&
         a.source_port == setup_.addressing.destination_port && a.destination_ip == setup_.addressing.source_ip;
}

void LinkChannel::on_packet(const wire::Packet& packet, PortIo& io, uint64_t now_ns) {
  const wire::PacketType type = packet.header.type;
  if (!from_peer(packet)) {
    // A new connection attempt to this end's port: the listener's business.
    const bool handshake = type == wire::PacketType::kHello || type == wire::PacketType::kRequest;
    if (handshake && packet.header.connection != setup_.connection)
      if (auto listener = fallback_.lock()) listener->on_packet(packet, io, now_ns);
    return;
  }
  if (stopped_) return;
  last_heard_ns_ = now_ns;
  switch (type) {
    case wire::PacketType::kRequest:  // the client missed our reply
      if (!reply_.empty()) {
        wire::Header h = header_of(wire::PacketType::kReply);
        (void)io.send(setup_.addressing, h, reply_, &faults_);
      }
      return;
    case wire::PacketType::kClose: {
      std::string reason(reinterpret_cast<const char*>(packet.payload.data()),
                         std::min(packet.payload.size(), kMaxCloseReasonBytes));
      for (char& c : reason)
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
      fail(Status(StatusCode::kLinkDown,
                  "node " + std::to_string(setup_.peer_node) + " closed the dpdk link: " + reason),
           false);
      return;
    }
    case wire::PacketType::kAck:
      take_ack(packet.header, true, now_ns);
      if ((packet.header.flags & wire::kFlagProbe) != 0) ack_due_ = true;
      return;
    case wire::PacketType::kData:
      take_ack(packet.header, false, now_ns);
      if (!stopped_) take_data(packet, io, now_ns);
      return;
    default: return;  // repeated handshake packets
  }
}

void LinkChannel::take_ack(const wire::Header& h, bool pure_ack, uint64_t now_ns) {
  if (h.ack > send_max_) {
    fail(Status(StatusCode::kProtocolError, "node " + std::to_string(setup_.peer_node) +
                                                " acknowledged stream offset " + std::to_string(h.ack) + " but only " +
                                                std::to_string(send_max_) + " bytes were sent"),
         true);
    return;
  }
  const bool window_grew = h.ack + h.window > peer_limit_;
  if (window_grew) peer_limit_ = h.ack + h.window;
  if (h.ack > send_unacked_) {
    FJORD_ASSERT(h.ack <= send_max_);  // checked above: a peer's ack beyond it is an error, not a bug
    send_unacked_ = h.ack;
    acked.store(h.ack, std::memory_order_release);  // the sender may reuse the bytes
    send_next_ = std::max(send_next_, send_unacked_);
    duplicate_acks_ = 0;
    retransmit_ns_ = kRetransmitNs;
    retransmit_deadline_ns_ = now_ns + retransmit_ns_;
    last_ack_progress_ns_ = now_ns;
    return;
  }
  // A duplicate: the peer saw a gap. Three send again from the first
  // unacknowledged byte, once per such byte (the timer covers a second loss).
  if (!pure_ack || window_grew || h.ack != send_unacked_ || send_unacked_ == send_max_) return;
  if (++duplicate_acks_ < kDuplicateAcksForRetransmit || fast_retransmit_at_ == send_unacked_) return;
  fast_retransmit_at_ = send_unacked_;
  send_next_ = send_unacked_;
  duplicate_acks_ = 0;
  retransmit_deadline_ns_ = now_ns + retransmit_ns_;
}

void LinkChannel::take_data(const wire::Packet& packet, PortIo& io, uint64_t now_ns) {
  FJORD_ASSERT(receive_next_ == written.load(std::memory_order_relaxed));  // the engine is its only writer
  const uint64_t begin = packet.header.sequence;
  const uint64_t end = begin + packet.payload.size();
  const std::size_t capacity = receive_ring.size();
  const uint64_t limit = released.load(std::memory_order_acquire) + capacity;
  const uint64_t take_end = std::min(end, limit);
  if (begin > receive_next_ || take_end <= receive_next_) {
    // A gap (a packet was lost or overtaken), a repeat, or beyond the
    // window: say at once where we are.
    send_control(io, wire::PacketType::kAck, 0, now_ns);
    return;
  }
  const std::byte* from = packet.payload.data() + (receive_next_ - begin);
  std::memcpy(receive_ring.data() + receive_next_ % capacity, from, take_end - receive_next_);
  receive_next_ = take_end;
  FJORD_ASSERT(receive_next_ <= limit);                     // never past the space the receiver gave back
  written.store(receive_next_, std::memory_order_release);  // W1: pairs with the receiver's acquire
  ack_due_ = true;
  wake_receiver();
}

void LinkChannel::wake_receiver() {
  // After W1 (or the down flag), then the armed flag: with the receiver's
  // store of `receiver_armed` followed by its load of `written` (both
  // seq_cst), one of the two sides sees the other's store.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!receiver_armed.load(std::memory_order_relaxed) || !receiver_armed.exchange(false)) return;
  const uint64_t one = 1;
  (void)!::write(event.get(), &one, sizeof one);
}

void LinkChannel::fail(Status reason, bool tell_peer) {
  stopped_ = true;
  if (!tell_peer) close_sent_ = true;
  if (owner_ != nullptr) owner_->engine_down(std::move(reason));
  receiver_armed.store(true, std::memory_order_relaxed);
  wake_receiver();
}

// ---- LinkChannel: sending ------------------------------------------------------

wire::Header LinkChannel::header_of(wire::PacketType type) const {
  wire::Header h;
  h.type = type;
  h.connection = setup_.connection;
  h.sequence = send_next_;
  h.ack = receive_next_;
  return h;
}

void LinkChannel::send_control(PortIo& io, wire::PacketType type, uint8_t flags, uint64_t now_ns) {
  wire::Header h = header_of(type);
  h.flags = flags;
  const uint64_t limit = released.load(std::memory_order_acquire) + receive_ring.size();
  h.window = static_cast<uint32_t>(limit - receive_next_);
  advertised_limit_ = limit;
  (void)io.send(setup_.addressing, h, {}, &faults_);
  last_sent_ns_ = now_ns;
  if (type == wire::PacketType::kAck) ack_due_ = false;
}

void LinkChannel::send_close_now(PortIo& io) {
  if (close_sent_ || !close_requested.load(std::memory_order_acquire)) return;
  close_sent_ = true;
  stopped_ = true;
  const std::string_view reason(close_reason.data(), std::min(close_reason.size(), kMaxCloseReasonBytes));
  const wire::Header h = header_of(wire::PacketType::kClose);
  for (int i = 0; i < kCloseCopies; ++i) (void)io.send(setup_.addressing, h, std::as_bytes(std::span(reason)));
}

bool LinkChannel::check_timeouts(uint64_t now_ns) {
  const uint64_t timeout = settings_.link_timeout_ns;
  // Every poll passes here: the reasons' text is made only when one holds.
  const auto peer = [this] { return "node " + std::to_string(setup_.peer_node); };
  // `now_ns` was read at the start of the engine's iteration: it may be
  // older than a time this iteration recorded.
  if (now_ns > last_heard_ns_ && now_ns - last_heard_ns_ > timeout) {
    fail(Status(StatusCode::kLinkDown,
                "no packet from " + peer() + " for " + std::to_string(timeout / 1'000'000) + " ms (LinkTimeout)"),
         true);
    return true;
  }
  if (send_unacked_ < send_max_ && now_ns > last_ack_progress_ns_ && now_ns - last_ack_progress_ns_ > timeout) {
    fail(Status(StatusCode::kLinkDown, peer() + " acknowledged none of " + std::to_string(send_max_ - send_unacked_) +
                                           " bytes sent for " + std::to_string(timeout / 1'000'000) +
                                           " ms (LinkTimeout)"),
         true);
    return true;
  }
  return false;
}

bool LinkChannel::send_data(PortIo& io, uint64_t now_ns) {
  const uint64_t ready = published.load(std::memory_order_acquire);  // pairs with the sender's release
  const std::size_t capacity = send_ring.size();
  FJORD_ASSERT(send_unacked_ <= send_next_);
  FJORD_ASSERT(send_max_ <= ready);  // only published bytes are ever sent
  bool sent = false;
  for (uint32_t packets = 0; send_next_ < ready && send_next_ < peer_limit_ && packets < 2 * kBurstPackets; ++packets) {
    const std::size_t n = std::min<uint64_t>({max_payload_, ready - send_next_, peer_limit_ - send_next_});
    if (send_unacked_ == send_max_) {  // the first bytes in flight: the timers start now
      last_ack_progress_ns_ = now_ns;
      retransmit_deadline_ns_ = now_ns + retransmit_ns_;
    }
    wire::Header h = header_of(wire::PacketType::kData);
    const uint64_t limit = released.load(std::memory_order_acquire) + receive_ring.size();
    h.window = static_cast<uint32_t>(limit - receive_next_);
    advertised_limit_ = limit;
    if (!io.send(setup_.addressing, h, std::span(send_ring.data() + send_next_ % capacity, n), &faults_)) break;
    send_next_ += n;
    send_max_ = std::max(send_max_, send_next_);
    sent = true;
  }
  FJORD_ASSERT(send_next_ <= ready);
  if (sent) {
    sent_max.store(send_max_, std::memory_order_release);
    last_sent_ns_ = now_ns;
    ack_due_ = false;  // each data packet carried the ack
  }
  if (send_next_ < ready && send_next_ >= peer_limit_ && now_ns >= probe_deadline_ns_) {
    send_control(io, wire::PacketType::kAck, wire::kFlagProbe, now_ns);  // window closed: ask for news
    probe_deadline_ns_ = now_ns + retransmit_ns_;
    sent = true;
  }
  return sent;
}

bool LinkChannel::send_ack_if_due(PortIo& io, uint64_t now_ns, bool sent_data) {
  if (!sent_data) {
    const std::size_t capacity = receive_ring.size();
    const uint64_t limit = released.load(std::memory_order_acquire) + capacity;
    if (limit - advertised_limit_ >= capacity / 4) ack_due_ = true;  // a window update
    if (now_ns > last_sent_ns_ && now_ns - last_sent_ns_ >= settings_.link_timeout_ns / 4)
      ack_due_ = true;  // keep-alive
  }
  if (!ack_due_) return false;
  send_control(io, wire::PacketType::kAck, 0, now_ns);
  return true;
}

bool LinkChannel::poll(PortIo& io, uint64_t now_ns) {
  if (close_requested.load(std::memory_order_acquire) && !close_sent_) {
    send_close_now(io);
    return true;
  }
  if (stopped_) return false;
  if (check_timeouts(now_ns)) return true;
  if (send_unacked_ < send_max_ && now_ns >= retransmit_deadline_ns_) {
    send_next_ = send_unacked_;  // go back N
    retransmit_ns_ = std::min(2 * retransmit_ns_, kMaxRetransmitNs);
    retransmit_deadline_ns_ = now_ns + retransmit_ns_;
  }
  const bool sent_data = send_data(io, now_ns);
  const bool sent_ack = send_ack_if_due(io, now_ns, sent_data);
  io.release_held(faults_);
  return sent_data || sent_ack;
}

// ---- DpdkTransporter ---------------------------------------------------------------

DpdkTransporter::DpdkTransporter(transport::LinkConfig config, NodeId self, Engine& engine,
                                 std::shared_ptr<LinkChannel> channel)
    : Transporter(std::move(config), self),
      engine_(engine),
      channel_(std::move(channel)),
      send_capacity_(channel_->send_ring.size()),
      receive_capacity_(channel_->receive_ring.size()) {
  FJORD_ASSERT(send_capacity_ >= 2 * frame::kMaxFrameBytes);
  FJORD_ASSERT(receive_capacity_ >= 2 * frame::kMaxFrameBytes);
  channel_->set_owner(this);
  note_connect();
}

DpdkTransporter::~DpdkTransporter() {
  declare_down(
      Status(StatusCode::kLinkDown, "the transporter of node " + std::to_string(local_node()) + " was destroyed"));
  LinkChannel& channel = *channel_;
  engine_.retire(channel.setup().port, channel.local_udp_port(), &channel, channel.fallback().lock(),
                 [&channel](PortIo& io) {
                   channel.set_owner(nullptr);
                   channel.send_close_now(io);
                 });
}

std::span<std::byte> DpdkTransporter::reserve(std::size_t min_bytes) {
  FJORD_ASSERT(min_bytes > 0);
  FJORD_ASSERT(min_bytes <= frame::kMaxFrameBytes);
  if (!is_up()) return {};
  const uint64_t acked = channel_->acked.load(std::memory_order_acquire);  // the engine is done with bytes below
  FJORD_ASSERT(acked <= published_);
  FJORD_ASSERT(committed_ - acked <= send_capacity_);
  const std::size_t free = send_capacity_ - (committed_ - acked);
  if (free < min_bytes) {
    if (published_ != committed_) (void)flush();  // let the engine send what fills the ring
    return {};
  }
  return {channel_->send_ring.data() + committed_ % send_capacity_, free};
}

void DpdkTransporter::commit(std::size_t bytes, uint32_t frames) {
  FJORD_ASSERT(committed_ + bytes - channel_->acked.load(std::memory_order_relaxed) <= send_capacity_);
  committed_ += bytes;
  note_commit(bytes, frames);
  if (bytes != 0) note_send_buffer_level();
}

FlushStatus DpdkTransporter::flush() {
  if (!is_up()) return FlushStatus::kDown;
  if (committed_ != published_) {
    note_send(committed_ - published_);
    published_ = committed_;
    channel_->published.store(published_, std::memory_order_release);  // the frames are in the ring
    engine_.notify();
  }
  FJORD_ASSERT(published_ == committed_);
  note_send_buffer_level();
  return channel_->sent_max.load(std::memory_order_acquire) >= published_ ? FlushStatus::kFlushed
                                                                          : FlushStatus::kPending;
}

std::size_t DpdkTransporter::send_buffer_used() const {
  return committed_ - channel_->acked.load(std::memory_order_acquire);
}

void DpdkTransporter::scan_received() {
  const uint64_t written = channel_->written.load(std::memory_order_acquire);  // pairs with W1
  seen_written_ = written;
  if (written == scanned_end_ || poisoned_) return;
  const std::span<const std::byte> fresh(channel_->receive_ring.data() + scanned_end_ % receive_capacity_,
                                         written - scanned_end_);
  const frame::ScanResult scan = frame::scan_frames(fresh, config().checksum);
  if (scan.whole_bytes != 0) {
    scanned_end_ += scan.whole_bytes;
    scanned_frames_ += scan.frames;
    note_receive(scan.whole_bytes, scan.frames);
  }
  if (scan.error == frame::FrameError::kNone || scan.error == frame::FrameError::kIncomplete) return;
  poisoned_ = true;  // nothing after a malformed frame can be trusted
  declare_down(Status(StatusCode::kProtocolError, "malformed frame from node " + std::to_string(remote_node()) +
                                                      " at stream offset " + std::to_string(scanned_end_) + ": " +
                                                      frame::frame_error_name(scan.error)));
}

ReceiveBatch DpdkTransporter::receive() {
  scan_received();
  return {std::span<const std::byte>(channel_->receive_ring.data() + consumed_ % receive_capacity_,
                                     scanned_end_ - consumed_),
          scanned_frames_, false};
}

void DpdkTransporter::release(std::size_t bytes) {
  FJORD_ASSERT_MSG(bytes <= scanned_end_ - consumed_, "release beyond the received frames");
  if (bytes == 0) return;
  if (bytes == scanned_end_ - consumed_) {
    scanned_frames_ = 0;
  } else {
    frame::FrameCursor cursor(
        std::span<const std::byte>(channel_->receive_ring.data() + consumed_ % receive_capacity_, bytes));
    frame::SignalView view;
    while (cursor.next(view)) --scanned_frames_;
  }
  consumed_ += bytes;
  FJORD_ASSERT(consumed_ <= scanned_end_);
  channel_->released.store(consumed_, std::memory_order_release);  // the engine may write there again
  engine_.notify();
}

bool DpdkTransporter::arm_wakeup() {
  if (!is_up() || scanned_end_ != consumed_) return false;
  channel_->receiver_armed.store(true);  // seq_cst: see wake_receiver()
  if (channel_->written.load() != seen_written_ || !is_up()) {
    channel_->receiver_armed.store(false);
    return false;
  }
  return true;
}

void DpdkTransporter::disarm_wakeup() {
  channel_->receiver_armed.store(false);
  uint64_t tokens = 0;
  (void)!::read(channel_->event.get(), &tokens, sizeof tokens);
}

void DpdkTransporter::on_down() {
  // Any thread, at most once: the engine sends the close packets and our
  // receiver wakes.
  channel_->close_reason = down_reason().message();
  channel_->close_requested.store(true, std::memory_order_release);  // pairs with the engine's acquire
  engine_.notify();
  const uint64_t one = 1;
  (void)!::write(channel_->event.get(), &one, sizeof one);
}

}  // namespace fjord::dpdk
