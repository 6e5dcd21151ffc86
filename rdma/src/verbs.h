// Owned verbs and rdma_cm resources, and the bundle one RDMA link needs
// (internal header).
//
// Every resource is a unique_ptr with a deleter that calls its destroy verb,
// and LinkResources declares them in creation order, so destruction runs in
// the reverse order the verbs require (memory regions before the rings they
// cover, the QP before its CQs, CQs before their completion channel, all of
// them before the PD, the cm_id and its event channel last). Nothing leaks on
// an early error return.
//
// Slow path (set-up and teardown); one thread at a time per object.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cstdint>
#include <memory>
#include <string>

#include "fjord/base/fd.h"
#include "fjord/base/mirrored_map.h"
#include "fjord/base/status.h"
#include "fjord/transport/link_config.h"
#include "wire.h"

namespace fjord::rdma {

struct DestroyChannel {
  void operator()(rdma_event_channel* c) const { rdma_destroy_event_channel(c); }
};
struct DestroyId {
  void operator()(rdma_cm_id* id) const { rdma_destroy_id(id); }
};
struct DeallocPd {
  void operator()(ibv_pd* pd) const { ibv_dealloc_pd(pd); }
};
struct DestroyCompChannel {
  void operator()(ibv_comp_channel* c) const { ibv_destroy_comp_channel(c); }
};
struct DestroyCq {
  void operator()(ibv_cq* cq) const { ibv_destroy_cq(cq); }
};
struct DeregMr {
  void operator()(ibv_mr* mr) const { ibv_dereg_mr(mr); }
};
// The QP belongs to its cm_id (rdma_create_qp / rdma_destroy_qp).
struct DestroyQp {
  void operator()(rdma_cm_id* id) const { rdma_destroy_qp(id); }
};
struct FreePages {
  void operator()(std::byte* p) const { std::free(p); }
};

using CmChannel = std::unique_ptr<rdma_event_channel, DestroyChannel>;
using CmId = std::unique_ptr<rdma_cm_id, DestroyId>;
using Pd = std::unique_ptr<ibv_pd, DeallocPd>;
using CompChannel = std::unique_ptr<ibv_comp_channel, DestroyCompChannel>;
using Cq = std::unique_ptr<ibv_cq, DestroyCq>;
using Mr = std::unique_ptr<ibv_mr, DeregMr>;
using QpOwner = std::unique_ptr<rdma_cm_id, DestroyQp>;
using PageBuffer = std::unique_ptr<std::byte, FreePages>;

// The [rdma] parameters of one link, read once (see kRdmaParams).
struct LinkParams {
  std::string device;  // RdmaDevice; empty = whatever rdma_cm maps HostName to
  uint8_t port = 1;    // RdmaPort
  uint8_t gid_index = 1;
  uint32_t ring_bytes = 0;  // min(SendBufferMemory, ReceiveBufferMemory), in pages
  uint32_t queue_depth = 0;
  uint32_t inline_bytes = 0;
  uint64_t spin_ns = 0;
};
LinkParams link_params(const transport::LinkConfig& link);

// "device rxe0 port 1 GID[1] ::ffff:10.11.12.1", or what is known before
// address resolution; every set-up error carries it.
std::string describe_device(const rdma_cm_id* id, uint8_t gid_index);

// A non-blocking event channel (its fd is polled with deadlines).
Result<CmChannel> make_channel();

// Waits for the next event on `channel` until `deadline`; copies what the
// caller needs and acks it at once (rdma_destroy_id waits for unacked events).
struct CmEvent {
  rdma_cm_event_type type = RDMA_CM_EVENT_ADDR_ERROR;
  int status = 0;
  rdma_cm_id* id = nullptr;  // for CONNECT_REQUEST: the new connection's id
  std::byte private_data[256] = {};
  std::size_t private_data_len = 0;
};
Result<CmEvent> next_event(rdma_event_channel* channel, DeadlineNs deadline);
// Non-blocking: true with *out if an event was queued; false if none (or
// the channel failed). Allocates nothing when there is none (hot path).
bool poll_event(rdma_event_channel* channel, CmEvent* out);
std::string event_text(const CmEvent& event);

// All the verbs resources of one link end, in destruction-safe order.
struct LinkResources {
  LinkResources() = default;
  LinkResources(const LinkResources&) = delete;
  LinkResources& operator=(const LinkResources&) = delete;
  // Moves the QP to the error state before any member goes, so that nothing
  // the peer sends during teardown reaches a receive whose memory region is
  // already deregistered: rxe answers that with a "remote operation error"
  // NAK, which blames the peer's own send. The peer sees a flush or the
  // disconnect instead.
  ~LinkResources();

  CmChannel channel;
  CmId id;
  Pd pd;
  CompChannel comp_channel;
  Cq send_cq;
  Cq recv_cq;
  QpOwner qp;
  MirroredMap receive_ring;
  MirroredMap send_ring;
  PageBuffer control;
  Mr receive_mr;
  Mr send_mr;
  Mr control_mr;
  UniqueFd epoll;  // wait_fd(): the completion channel and the cm channel

  LinkParams params;
  wire::ControlLayout layout;
  uint32_t max_inline = 0;
  uint32_t peer_queue_depth = 0;
  // Data receives of the peer that set-up consumed: repeated hellos (iWARP,
  // see kMaxHelloRepeats). The data path counts them like wake-ups it sent.
  uint32_t peer_receives_used = 0;
  bool iwarp = false;
  // The cm channel said the peer left during set-up; its event is consumed,
  // so later set-up waits see it here.
  std::string peer_gone;
  std::string where;  // describe_device() at set-up, for messages

  std::byte* control_at(std::size_t offset) const { return control.get() + offset; }
  wire::RingInfo ring_info() const;
};

// Creates PD, CQs, completion channel, QP, rings and memory regions on the
// device `id` is bound to. `bootstrap_only` makes the smallest set that can
// carry a handshake reply (used to refuse a peer with a full reason).
Result<std::unique_ptr<LinkResources>> create_resources(CmChannel channel, CmId id, const LinkParams& params,
                                                        const std::string& link_name, bool bootstrap_only);

// Posts the receive work requests the data path consumes: queue_depth of
// them (zero-length for WRITE_WITH_IMM, a doorbell slot each on iWARP).
Status post_data_receives(LinkResources& r, uint32_t first, uint32_t count);
// Posts one receive for the peer's first handshake message (the server: the
// client's hello; the client: the server's reply) into the bootstrap buffer.
Status post_bootstrap_receive(LinkResources& r);
// Sends `message` (signaled) from the bootstrap buffer, or from the staging
// slots (free before the data path starts) when the bootstrap buffer awaits
// the peer's message, and waits
// for the send completion until deadline. `what` names the message in errors
// ("the hello", "the handshake reply"). Error texts leave the link and the
// device to the caller.
Status send_bootstrap(LinkResources& r, std::span<const std::byte> message, const char* what, DeadlineNs deadline,
                      bool from_staging = false);
// The client's first message once connected, followed by its proof of the
// cluster key when it holds one; the server answers it. (On iWARP the
// initiator must speak first: MPA peer-to-peer mode.)
inline constexpr uint32_t kHelloMagic = 0x4C45'4846;  // "FHEL"
// On iWARP the client sends its hello again when no reply came within
// kHelloRepeatNs, at most this many times (docs/rdma.md, set-up). Each
// repeat lands in one of the server's data receives (the bootstrap receive
// took the first), so the server posts at least this many, refused peers
// included, and the client's data path counts them as used.
inline constexpr uint32_t kMaxHelloRepeats = 2;
inline constexpr uint64_t kHelloRepeatNs = 300'000'000;
// Waits for the bootstrap receive's completion; returns the message bytes.
Result<std::span<const std::byte>> receive_bootstrap(LinkResources& r, DeadlineNs deadline, const char* what);

inline constexpr uint64_t kBootstrapWrId = UINT64_MAX;

}  // namespace fjord::rdma
