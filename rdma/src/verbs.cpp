// Verbs/rdma_cm resource creation and the set-up-time message helpers.
// Slow path: blocking with deadlines, allocates freely.
#include "verbs.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "fjord/base/clock.h"
#include "fjord/base/log.h"

namespace fjord::rdma {
namespace {

Status set_nonblocking(int fd, const char* what) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) return io_error(std::string("fcntl ") + what, errno);
  return Status::ok();
}

std::string gid_text(const ibv_gid& gid) {
  char text[INET6_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET6, gid.raw, text, sizeof text);
  return text;
}

int poll_ms_until(DeadlineNs deadline) {
  const uint64_t now = monotonic_ns();
  if (now >= deadline) return 0;
  return static_cast<int>(std::min<uint64_t>((deadline - now + 999'999) / 1'000'000, 100));
}

Result<CmEvent> take_event(rdma_event_channel* channel) {
  rdma_cm_event* raw = nullptr;
  if (rdma_get_cm_event(channel, &raw) != 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Status(StatusCode::kTimeout, "no rdma_cm event");
    return io_error("rdma_get_cm_event", errno);
  }
  CmEvent e;
  e.type = raw->event;
  e.status = raw->status;
  e.id = raw->id;
  const void* data = nullptr;
  std::size_t len = 0;
  if (raw->event == RDMA_CM_EVENT_CONNECT_REQUEST || raw->event == RDMA_CM_EVENT_ESTABLISHED ||
      raw->event == RDMA_CM_EVENT_REJECTED || raw->event == RDMA_CM_EVENT_CONNECT_RESPONSE) {
    data = raw->param.conn.private_data;
    len = raw->param.conn.private_data_len;
  }
  if (data && len > 0) {
    e.private_data_len = std::min(len, sizeof e.private_data);
    std::memcpy(e.private_data, data, e.private_data_len);
  }
  rdma_ack_cm_event(raw);
  return e;
}

}  // namespace

LinkParams link_params(const transport::LinkConfig& link) {
  const config::ParamSet& p = link.params;
  LinkParams out;
  out.device = p.get_string("RdmaDevice");
  out.port = static_cast<uint8_t>(p.get_uint("RdmaPort"));
  out.gid_index = static_cast<uint8_t>(p.get_uint("GidIndex"));
  out.ring_bytes =
      static_cast<uint32_t>(round_up_to_pages(std::min(link.send_buffer_bytes, p.get_uint("ReceiveBufferMemory"))));
  out.queue_depth = static_cast<uint32_t>(p.get_uint("QueueDepth"));
  out.inline_bytes = static_cast<uint32_t>(p.get_uint("InlineThreshold"));
  out.spin_ns = p.get_uint("RdmaSpintime") * 1000;
  return out;
}

std::string describe_device(const rdma_cm_id* id, uint8_t gid_index) {
  if (!id || !id->verbs) return "no RDMA device (address not resolved)";
  // iWARP devices have one GID (from the MAC) and address by IP alone.
  const bool iwarp = id->verbs->device->transport_type == IBV_TRANSPORT_IWARP;
  if (iwarp) gid_index = 0;
  std::string out = std::string("device ") + ibv_get_device_name(id->verbs->device) + " port " +
                    std::to_string(id->port_num) + (iwarp ? " (iWARP)" : "") + " GID[" + std::to_string(gid_index) +
                    "] ";
  ibv_gid gid{};
  if (ibv_query_gid(id->verbs, id->port_num, gid_index, &gid) == 0)
    out += gid_text(gid);
  else
    out += "(no such GID index)";
  return out;
}

Result<CmChannel> make_channel() {
  CmChannel channel(rdma_create_event_channel());
  if (!channel)
    return Status(StatusCode::kUnavailable, std::string("rdma_create_event_channel: ") + std::strerror(errno));
  if (Status s = set_nonblocking(channel->fd, "rdma_cm channel"); !s) return s;
  return channel;
}

bool poll_event(rdma_event_channel* channel, CmEvent* out) {
  // rdma_get_cm_event() allocates even when nothing is queued: ask poll() first.
  pollfd p{channel->fd, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  auto event = take_event(channel);
  if (!event) return false;
  *out = *event;
  return true;
}

Result<CmEvent> next_event(rdma_event_channel* channel, DeadlineNs deadline) {
  for (;;) {
    auto e = take_event(channel);
    if (e || e.status().code() != StatusCode::kTimeout) return e;
    if (monotonic_ns() >= deadline) return Status(StatusCode::kTimeout, "no rdma_cm event before the deadline");
    pollfd p{channel->fd, POLLIN, 0};
    ::poll(&p, 1, poll_ms_until(deadline));
  }
}

std::string event_text(const CmEvent& event) {
  std::string out = rdma_event_str(event.type);
  if (event.status != 0) out += " (status " + std::to_string(event.status) + ")";
  return out;
}

LinkResources::~LinkResources() {
  if (!qp) return;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  (void)ibv_modify_qp(qp->qp, &attr, IBV_QP_STATE);  // already in error after a fault: harmless
}

wire::RingInfo LinkResources::ring_info() const {
  wire::RingInfo info;
  info.ring_addr = reinterpret_cast<uintptr_t>(receive_ring.data());
  info.ring_rkey = receive_mr ? receive_mr->rkey : 0;
  info.ring_bytes = static_cast<uint32_t>(receive_ring.size());
  info.control_addr = reinterpret_cast<uintptr_t>(control.get());
  info.control_rkey = control_mr->rkey;
  info.queue_depth = params.queue_depth;
  return info;
}

namespace {

// The device and port rdma_cm picked for HostName must be the configured ones.
Status check_device(const LinkResources& r, const std::string& link_name) {
  const std::string name = ibv_get_device_name(r.id->verbs->device);
  if (!r.params.device.empty() && name != r.params.device)
    return Status(StatusCode::kInvalidArgument, link_name + ": RdmaDevice=" + r.params.device +
                                                    " but the address is on " + r.where + "; set RdmaDevice=" + name +
                                                    " or fix HostName");
  if (r.params.port != r.id->port_num)
    return Status(StatusCode::kInvalidArgument,
                  link_name + ": RdmaPort=" + std::to_string(r.params.port) + " but the address is on " + r.where);
  return Status::ok();
}

Status create_queue_pair(LinkResources& r, uint32_t depth, const std::string& fail_prefix) {
  ibv_qp_init_attr attr{};
  attr.send_cq = r.send_cq.get();
  attr.recv_cq = r.recv_cq.get();
  attr.qp_type = IBV_QPT_RC;
  attr.sq_sig_all = 0;  // selective signalling
  attr.cap.max_send_wr = depth;
  attr.cap.max_recv_wr = depth + 1;  // + the bootstrap receive
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  // Providers cap inline data differently (siw allows less than rxe): ask for
  // the threshold, halve until the device agrees.
  for (uint32_t inline_bytes = r.params.inline_bytes;; inline_bytes /= 2) {
    attr.cap.max_inline_data = inline_bytes;
    if (rdma_create_qp(r.id.get(), r.pd.get(), &attr) == 0) break;
    if (inline_bytes == 0) return Status(StatusCode::kIoError, fail_prefix + "rdma_create_qp: " + std::strerror(errno));
  }
  r.qp.reset(r.id.get());
  r.max_inline = std::min(attr.cap.max_inline_data, r.params.inline_bytes);
  return Status::ok();
}

// ENOMEM from ibv_reg_mr is nearly always the locked-memory limit (siw and
// real devices count pinned pages against it); say so.
Status registration_failed(const std::string& fail_prefix, const char* what, std::size_t bytes, int err) {
  std::string message =
      fail_prefix + "ibv_reg_mr (" + what + ", " + config::format_bytes(bytes) + "): " + std::strerror(err);
  if (err == ENOMEM) message += " (raise RLIMIT_MEMLOCK: ulimit -l, or LimitMEMLOCK= in the service)";
  return Status(StatusCode::kResourceExhausted, message);
}

Status register_memory(LinkResources& r, bool bootstrap_only, const std::string& fail_prefix) {
  const std::size_t control_bytes = round_up_to_pages(r.layout.total);
  void* control = nullptr;
  if (::posix_memalign(&control, page_size(), control_bytes) != 0)
    return Status(StatusCode::kResourceExhausted, fail_prefix + "no memory for the control region");
  std::memset(control, 0, control_bytes);
  r.control.reset(static_cast<std::byte*>(control));
  constexpr int kRemote = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  // The peer also reads our posted stream end before it sleeps.
  constexpr int kControl = kRemote | IBV_ACCESS_REMOTE_READ;
  r.control_mr.reset(ibv_reg_mr(r.pd.get(), control, control_bytes, kControl));
  if (!r.control_mr) return registration_failed(fail_prefix, "control region", control_bytes, errno);
  if (bootstrap_only) return Status::ok();

  auto receive_ring = MirroredMap::anonymous(r.params.ring_bytes, "fjord-rdma-recv");
  if (!receive_ring) return receive_ring.status();
  r.receive_ring = std::move(receive_ring).value();
  auto send_ring = MirroredMap::anonymous(r.params.ring_bytes, "fjord-rdma-send");
  if (!send_ring) return send_ring.status();
  r.send_ring = std::move(send_ring).value();
  // Only the first copy of each mirrored ring is registered: the sender posts
  // two WRITEs at the wrap, and the receiver reads across it through the
  // mirror, so the device never needs the second mapping.
  r.receive_mr.reset(ibv_reg_mr(r.pd.get(), r.receive_ring.data(), r.params.ring_bytes, kRemote));
  if (!r.receive_mr) return registration_failed(fail_prefix, "receive ring", r.params.ring_bytes, errno);
  constexpr int kLocal = IBV_ACCESS_LOCAL_WRITE;  // an int: ibv_reg_mr's macro masks it with another enum
  r.send_mr.reset(ibv_reg_mr(r.pd.get(), r.send_ring.data(), r.params.ring_bytes, kLocal));
  if (!r.send_mr) return registration_failed(fail_prefix, "send ring", r.params.ring_bytes, errno);
  return Status::ok();
}

Status make_epoll(LinkResources& r) {
  r.epoll.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!r.epoll.valid()) return io_error("epoll_create1", errno);
  for (int fd : {r.comp_channel->fd, r.channel->fd}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(r.epoll.get(), EPOLL_CTL_ADD, fd, &ev) != 0) return io_error("epoll_ctl", errno);
  }
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<LinkResources>> create_resources(CmChannel channel, CmId id, const LinkParams& params,
                                                        const std::string& link_name, bool bootstrap_only) {
  auto r = std::make_unique<LinkResources>();
  r->channel = std::move(channel);
  r->id = std::move(id);
  r->params = params;
  // A refused peer's QP: room for the reply, and a data receive for each
  // hello the client may repeat before the reply reaches it.
  constexpr uint32_t kBootstrapOnlyDepth = 2;
  static_assert(kBootstrapOnlyDepth >= kMaxHelloRepeats);
  if (bootstrap_only) r->params.queue_depth = kBootstrapOnlyDepth;
  ibv_context* ctx = r->id->verbs;
  if (!ctx) return Status(StatusCode::kUnavailable, link_name + ": the address is not on an RDMA device");
  r->where = describe_device(r->id.get(), params.gid_index);
  const std::string fail_prefix = link_name + ": " + r->where + ": ";
  if (Status s = check_device(*r, link_name); !s) return s;
  r->iwarp = ctx->device->transport_type == IBV_TRANSPORT_IWARP;
  const uint32_t depth = r->params.queue_depth;
  r->layout = wire::control_layout(depth);

  r->pd.reset(ibv_alloc_pd(ctx));
  if (!r->pd) return io_error(fail_prefix + "ibv_alloc_pd", errno);
  r->comp_channel.reset(ibv_create_comp_channel(ctx));
  if (!r->comp_channel) return io_error(fail_prefix + "ibv_create_comp_channel", errno);
  if (Status s = set_nonblocking(r->comp_channel->fd, "completion channel"); !s) return s;
  r->send_cq.reset(ibv_create_cq(ctx, static_cast<int>(depth + 1), nullptr, nullptr, 0));
  if (!r->send_cq) return io_error(fail_prefix + "ibv_create_cq (send)", errno);
  r->recv_cq.reset(ibv_create_cq(ctx, static_cast<int>(depth + 2), nullptr, r->comp_channel.get(), 0));
  if (!r->recv_cq) return io_error(fail_prefix + "ibv_create_cq (receive)", errno);
  if (Status s = create_queue_pair(*r, depth, fail_prefix); !s) return s;
  if (Status s = register_memory(*r, bootstrap_only, fail_prefix); !s) return s;
  if (Status s = make_epoll(*r); !s) return s;
  return r;
}

Status post_data_receives(LinkResources& r, uint32_t first, uint32_t count) {
  constexpr uint32_t kChain = 32;
  const uint32_t depth = r.params.queue_depth;
  ibv_recv_wr wrs[kChain];
  ibv_sge sges[kChain];
  while (count > 0) {
    const uint32_t n = std::min(count, kChain);
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t slot = (first + i) % depth;
      wrs[i] = {};
      wrs[i].wr_id = slot;
      wrs[i].next = i + 1 < n ? &wrs[i + 1] : nullptr;
      if (r.iwarp) {  // the doorbell SEND lands in this slot
        sges[i].addr = reinterpret_cast<uintptr_t>(r.control_at(r.layout.doorbells + slot * wire::kDoorbellSlotBytes));
        sges[i].length = wire::kDoorbellSlotBytes;
        sges[i].lkey = r.control_mr->lkey;
        wrs[i].sg_list = &sges[i];
        wrs[i].num_sge = 1;
      }
    }
    ibv_recv_wr* bad = nullptr;
    if (const int rc = ibv_post_recv(r.qp->qp, wrs, &bad); rc != 0)
      return Status(StatusCode::kLinkDown, "ibv_post_recv: " + std::string(std::strerror(rc)));
    first += n;
    count -= n;
  }
  return Status::ok();
}

Status post_bootstrap_receive(LinkResources& r) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(r.control_at(r.layout.bootstrap)), wire::kBootstrapBytes, r.control_mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = kBootstrapWrId;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (const int rc = ibv_post_recv(r.qp->qp, &wr, &bad); rc != 0)
    return Status(StatusCode::kIoError, std::string("ibv_post_recv (handshake): ") + std::strerror(rc));
  return Status::ok();
}

namespace {

// Polls `cq` for one completion until deadline, watching the cm channel for
// a disconnect meanwhile. `doing` names the step in errors: "<doing>
// failed: <status>", "timed out <doing>".
Result<ibv_wc> wait_one(LinkResources& r, ibv_cq* cq, DeadlineNs deadline, const std::string& doing) {
  for (;;) {
    ibv_wc wc{};
    const int n = ibv_poll_cq(cq, 1, &wc);
    if (n < 0) return Status(StatusCode::kIoError, "ibv_poll_cq failed while " + doing);
    if (n == 1) {
      if (wc.status != IBV_WC_SUCCESS)
        return Status(StatusCode::kLinkDown, doing + " failed: " + ibv_wc_status_str(wc.status));
      return wc;
    }
    CmEvent e;
    if (r.peer_gone.empty() && poll_event(r.channel.get(), &e) &&
        (e.type == RDMA_CM_EVENT_DISCONNECTED || e.type == RDMA_CM_EVENT_DEVICE_REMOVAL))
      r.peer_gone = event_text(e);
    if (!r.peer_gone.empty()) {
      // What the peer sent before it left (a refusal and its reason) reached
      // the queue before its disconnect did, possibly after the poll above.
      if (ibv_poll_cq(cq, 1, &wc) == 1 && wc.status == IBV_WC_SUCCESS) return wc;
      return Status(StatusCode::kLinkDown, "peer went away during the handshake (" + r.peer_gone + ")");
    }
    if (monotonic_ns() >= deadline) return Status(StatusCode::kTimeout, "timed out " + doing);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace

Status send_bootstrap(LinkResources& r, std::span<const std::byte> message, const char* what, DeadlineNs deadline,
                      bool from_staging) {
  // The staging slots are free until the data path starts: a hello may span several.
  FJORD_ASSERT(message.size() <=
               (from_staging ? r.params.queue_depth * wire::kStagingSlotBytes : wire::kBootstrapBytes));
  std::byte* buffer = r.control_at(from_staging ? r.layout.staging : r.layout.bootstrap);
  std::memcpy(buffer, message.data(), message.size());
  ibv_sge sge{reinterpret_cast<uintptr_t>(buffer), static_cast<uint32_t>(message.size()), r.control_mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = kBootstrapWrId;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (const int rc = ibv_post_send(r.qp->qp, &wr, &bad); rc != 0)
    return Status(StatusCode::kIoError, std::string("ibv_post_send (") + what + "): " + std::strerror(rc));
  auto wc = wait_one(r, r.send_cq.get(), deadline, std::string("sending ") + what);
  return wc ? Status::ok() : wc.status();
}

Result<std::span<const std::byte>> receive_bootstrap(LinkResources& r, DeadlineNs deadline, const char* what) {
  auto wc = wait_one(r, r.recv_cq.get(), deadline, std::string("waiting for ") + what);
  if (!wc) return wc.status();
  if (wc->wr_id != kBootstrapWrId || wc->opcode != IBV_WC_RECV)
    return Status(StatusCode::kProtocolError, std::string("the peer wrote before sending ") + what);
  return std::span<const std::byte>(r.control_at(r.layout.bootstrap), wc->byte_len);
}

}  // namespace fjord::rdma
