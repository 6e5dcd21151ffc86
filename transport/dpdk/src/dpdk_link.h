// One DPDK link: LinkChannel, the engine's side (the reliability protocol),
// and DpdkTransporter, the contract's side (internal header).
//
// The two meet in two rings in private mirrored memory and a few indices,
// all stream offsets that only grow:
//   send ring:    the sender thread writes frames and publishes `published`;
//                 the engine cuts [sent, published) into packets and frees
//                 bytes up to `acked` as the peer acknowledges them. Bytes stay
//                 in the ring until acknowledged: a retransmission reads them
//                 again from there.
//   receive ring: the engine appends in-order payloads and publishes
//                 `written`; the receiver thread scans whole frames there and
//                 gives space back with `released`, which opens the window the
//                 engine grants the peer.
// Each index has one writer (store-release) and one reader (load-acquire):
// the reader then sees the ring bytes the writer wrote before the store.
//
// Reliability is go-back-N over byte offsets (docs/transport.md, "DPDK Ethernet"):
// every packet carries the cumulative ack and window of its sender; a
// receiver keeps only in-order bytes and answers a gap at once with a
// duplicate ack; three duplicates or the retransmission timer send again
// from the first unacknowledged byte. Nothing is delivered twice or out of
// order because the receive ring takes only the byte at `written`.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dpdk_engine.h"
#include "dpdk_params.h"
#include "fjord/base/cache.h"
#include "fjord/base/fd.h"
#include "fjord/base/mirrored_map.h"
#include "fjord/transport/transporter.h"

namespace fjord::dpdk {

// Retransmission timer: first value, and the cap of its doubling.
inline constexpr uint64_t kRetransmitNs = 2'000'000;
inline constexpr uint64_t kMaxRetransmitNs = 100'000'000;
inline constexpr uint32_t kDuplicateAcksForRetransmit = 3;
// Copies of the close packet (each may be lost; LinkTimeout covers the rest).
inline constexpr int kCloseCopies = 3;
inline constexpr std::size_t kMaxCloseReasonBytes = 200;

class DpdkTransporter;

struct ChannelSetup {
  wire::Addressing addressing;  // this end -> the peer
  uint32_t connection = 0;
  NodeId peer_node = kNoNode;
  std::size_t port = 0;  // the engine's port index
};

class LinkChannel final : public Endpoint {
 public:
  static Result<std::shared_ptr<LinkChannel>> create(const LinkSettings& settings, const ChannelSetup& setup);

  void on_packet(const wire::Packet& packet, PortIo& io, uint64_t now_ns) override;
  bool poll(PortIo& io, uint64_t now_ns) override;

  // Engine mutex held: who to tell when the link goes down (nullptr: no one).
  void set_owner(DpdkTransporter* owner) { owner_ = owner; }
  // The accepting reply, sent again if the client repeats its request.
  void set_reply(std::vector<std::byte> reply) { reply_ = std::move(reply); }
  // Where handshake packets of other connections go (the listener).
  void set_fallback(std::weak_ptr<Endpoint> fallback) { fallback_ = std::move(fallback); }
  const std::weak_ptr<Endpoint>& fallback() const { return fallback_; }
  // Engine mutex held: sends the close packets now if the link was closed
  // locally and they are not sent yet (the transporter is going away).
  void send_close_now(PortIo& io);
  const ChannelSetup& setup() const { return setup_; }
  uint16_t local_udp_port() const { return setup_.addressing.source_port; }

  // ---- shared with the transporter (see the header comment) ----
  MirroredMap send_ring;
  MirroredMap receive_ring;
  alignas(kCacheLineBytes) std::atomic<uint64_t> published{0};  // transporter -> engine
  alignas(kCacheLineBytes) std::atomic<uint64_t> acked{0};      // engine -> transporter
  std::atomic<uint64_t> sent_max{0};  // engine -> transporter: highest byte handed to the device
  alignas(kCacheLineBytes) std::atomic<uint64_t> written{0};   // engine -> transporter
  alignas(kCacheLineBytes) std::atomic<uint64_t> released{0};  // transporter -> engine
  std::atomic<bool> receiver_armed{false};                     // the receiver sleeps on `event`
  std::atomic<bool> close_requested{false};                    // the transporter went down: tell the peer
  std::string close_reason;                                    // written before close_requested is set (release)
  UniqueFd event;                                              // eventfd: data arrived, or down

 private:
  LinkChannel(const LinkSettings& settings, const ChannelSetup& setup);
  bool from_peer(const wire::Packet& packet) const;
  void take_ack(const wire::Header& header, bool pure_ack, uint64_t now_ns);
  void take_data(const wire::Packet& packet, PortIo& io, uint64_t now_ns);
  void fail(Status reason, bool tell_peer);
  bool check_timeouts(uint64_t now_ns);
  bool send_data(PortIo& io, uint64_t now_ns);
  bool send_ack_if_due(PortIo& io, uint64_t now_ns, bool sent_data);
  void send_control(PortIo& io, wire::PacketType type, uint8_t flags, uint64_t now_ns);
  void wake_receiver();
  wire::Header header_of(wire::PacketType type) const;

  LinkSettings settings_;
  ChannelSetup setup_;
  std::size_t max_payload_;
  FaultInjector faults_;
  DpdkTransporter* owner_ = nullptr;
  std::vector<std::byte> reply_;
  std::weak_ptr<Endpoint> fallback_;
  bool stopped_ = false;  // down: nothing more is sent but the close
  bool close_sent_ = false;

  // Send side (engine thread).
  uint64_t send_unacked_ = 0;  // first byte not acknowledged
  uint64_t send_next_ = 0;     // next byte to send (goes back on a retransmission)
  uint64_t send_max_ = 0;      // highest byte sent + 1
  uint64_t peer_limit_ = 0;    // the peer accepts bytes below this offset
  uint32_t duplicate_acks_ = 0;
  uint64_t fast_retransmit_at_ = UINT64_MAX;  // send_unacked_ of the last fast retransmission
  uint64_t retransmit_ns_ = kRetransmitNs;
  uint64_t retransmit_deadline_ns_ = 0;
  uint64_t last_ack_progress_ns_ = 0;
  uint64_t probe_deadline_ns_ = 0;

  // Receive side (engine thread).
  uint64_t receive_next_ = 0;      // == written
  uint64_t advertised_limit_ = 0;  // the limit last granted to the peer
  bool ack_due_ = false;
  uint64_t last_heard_ns_ = 0;
  uint64_t last_sent_ns_ = 0;
};

class DpdkTransporter final : public transport::Transporter {
 public:
  DpdkTransporter(transport::LinkConfig config, NodeId self, Engine& engine, std::shared_ptr<LinkChannel> channel);
  ~DpdkTransporter() override;

  std::span<std::byte> reserve(std::size_t min_bytes) override;
  void commit(std::size_t bytes, uint32_t frames) override;
  transport::FlushStatus flush() override;
  std::size_t send_buffer_used() const override;
  std::size_t send_buffer_capacity() const override { return send_capacity_; }

  transport::ReceiveBatch receive() override;
  void release(std::size_t bytes) override;

  int wait_fd() const override { return channel_->event.get(); }
  bool arm_wakeup() override;
  void disarm_wakeup() override;

  // The engine thread (its mutex held): the link failed or the peer closed it.
  void engine_down(Status reason) { declare_down(std::move(reason)); }

 private:
  void on_down() override;
  void scan_received();

  Engine& engine_;
  std::shared_ptr<LinkChannel> channel_;
  std::size_t send_capacity_;
  std::size_t receive_capacity_;
  // Sender thread.
  uint64_t committed_ = 0;
  uint64_t published_ = 0;
  // Receiver thread.
  uint64_t consumed_ = 0;      // released so far
  uint64_t scanned_end_ = 0;   // whole, validated frames end here
  uint64_t seen_written_ = 0;  // `written` at the last scan
  uint32_t scanned_frames_ = 0;
  bool poisoned_ = false;  // a malformed frame: read nothing more
};

}  // namespace fjord::dpdk
