#include "fjord/transport/handshake.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "fjord/base/byte_io.h"
#include "fjord/base/clock.h"
#include "fjord/base/log.h"

namespace fjord::transport {
namespace {

using Writer = ByteWriter;
using Reader = ByteReader;

// Handshake messages carry their total length at offset 6.
std::vector<std::byte> finish(Writer& w) {
  w.patch_u16(6, static_cast<uint16_t>(w.size()));
  return w.take();
}

Status malformed(const std::string& what) { return Status(StatusCode::kProtocolError, "malformed handshake: " + what); }

Status read_prefix(Reader& r, std::span<const std::byte> bytes, uint32_t magic) {
  uint32_t got_magic = 0;
  uint16_t version = 0, total = 0;
  if (!r.u32(got_magic) || !r.u16(version) || !r.u16(total)) return malformed("shorter than its prefix");
  if (got_magic != magic) return malformed("bad magic (not a fjord peer?)");
  if (version != kHandshakeVersion)
    return Status(StatusCode::kRejected, "handshake version " + std::to_string(version) +
                                             " not supported (this node speaks " + std::to_string(kHandshakeVersion) +
                                             ")");
  if (total != bytes.size())
    return malformed("announced " + std::to_string(total) + " bytes, got " + std::to_string(bytes.size()));
  return Status::ok();
}

bool read_extra(Reader& r, std::vector<std::byte>& extra) {
  uint16_t n = 0;
  if (!r.u16(n) || n > kMaxHandshakeExtraBytes) return false;
  extra.resize(n);
  return r.raw(extra.data(), n);
}

int poll_ms_until(DeadlineNs deadline) {
  const uint64_t now = monotonic_ns();
  if (now >= deadline) return 0;
  return static_cast<int>(std::min<uint64_t>((deadline - now + 999'999) / 1'000'000, 1000));
}

}  // namespace

DeadlineNs setup_deadline(DeadlineNs accept_deadline) {
  return std::max<DeadlineNs>(accept_deadline, monotonic_ns() + kSetupBudgetNs);
}

std::vector<std::byte> encode_request(const HandshakeRequest& request) {
  FJORD_ASSERT(request.type.size() <= kMaxTypeNameBytes);
  FJORD_ASSERT(request.extra.size() <= kMaxHandshakeExtraBytes);
  Writer w;
  w.u32(kHandshakeRequestMagic);
  w.u16(kHandshakeVersion);
  w.u16(0);
  w.u16(request.from_node);
  w.u16(request.to_node);
  w.u8(static_cast<uint8_t>(request.type.size()));
  w.raw(request.type.data(), request.type.size());
  w.u8(request.checksum ? kHandshakeChecksumFlag : 0);
  w.u16(static_cast<uint16_t>(request.extra.size()));
  w.raw(request.extra.data(), request.extra.size());
  return finish(w);
}

std::vector<std::byte> encode_reply(const HandshakeReply& reply) {
  FJORD_ASSERT(reply.extra.size() <= kMaxHandshakeExtraBytes);
  const std::size_t reason_bytes = std::min(reply.reason.size(), kMaxReasonBytes);
  Writer w;
  w.u32(kHandshakeReplyMagic);
  w.u16(kHandshakeVersion);
  w.u16(0);
  w.u8(reply.accepted ? 1 : 0);
  w.u8(static_cast<uint8_t>(reply.code));
  w.u16(static_cast<uint16_t>(reason_bytes));
  w.raw(reply.reason.data(), reason_bytes);
  w.u16(static_cast<uint16_t>(reply.extra.size()));
  w.raw(reply.extra.data(), reply.extra.size());
  return finish(w);
}

Result<HandshakeRequest> decode_request(std::span<const std::byte> bytes) {
  if (bytes.size() > kMaxHandshakeBytes) return malformed("too long");
  Reader r(bytes);
  if (Status s = read_prefix(r, bytes, kHandshakeRequestMagic); !s) return s;
  HandshakeRequest q;
  uint8_t type_len = 0;
  if (!r.u16(q.from_node) || !r.u16(q.to_node) || !r.u8(type_len)) return malformed("truncated request");
  if (type_len == 0 || type_len > kMaxTypeNameBytes)
    return malformed("transporter type name length " + std::to_string(type_len));
  q.type.resize(type_len);
  if (!r.raw(q.type.data(), type_len)) return malformed("truncated type name");
  for (char c : q.type)
    if (c < 'a' || c > 'z') return malformed("transporter type name is not lower-case letters");
  uint8_t flags = 0;
  if (!r.u8(flags)) return malformed("truncated request");
  if ((flags & ~kHandshakeChecksumFlag) != 0) return malformed("unknown request flags " + std::to_string(flags));
  q.checksum = (flags & kHandshakeChecksumFlag) != 0;
  if (!read_extra(r, q.extra)) return malformed("bad extra bytes");
  if (!r.at_end()) return malformed("trailing bytes");
  if (q.from_node == kNoNode || q.from_node > kMaxNodeId || q.to_node == kNoNode || q.to_node > kMaxNodeId)
    return malformed("node id out of range 1..255 (from " + std::to_string(q.from_node) + " to " +
                     std::to_string(q.to_node) + ")");
  return q;
}

Result<HandshakeReply> decode_reply(std::span<const std::byte> bytes) {
  if (bytes.size() > kMaxHandshakeBytes) return malformed("too long");
  Reader r(bytes);
  if (Status s = read_prefix(r, bytes, kHandshakeReplyMagic); !s) return s;
  HandshakeReply p;
  uint8_t accepted = 0, code = 0;
  uint16_t reason_len = 0;
  if (!r.u8(accepted) || !r.u8(code) || !r.u16(reason_len)) return malformed("truncated reply");
  if (accepted > 1) return malformed("accepted flag " + std::to_string(accepted));
  if (code > static_cast<uint8_t>(StatusCode::kInternal)) return malformed("status code " + std::to_string(code));
  if (reason_len > kMaxReasonBytes) return malformed("reason too long");
  p.accepted = accepted == 1;
  p.code = static_cast<StatusCode>(code);
  p.reason.resize(reason_len);
  if (!r.raw(p.reason.data(), reason_len)) return malformed("truncated reason");
  for (char& c : p.reason)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';  // printable only
  if (!read_extra(r, p.extra)) return malformed("bad extra bytes");
  if (!r.at_end()) return malformed("trailing bytes");
  if (p.accepted == (p.code != StatusCode::kOk)) return malformed("accepted flag disagrees with status code");
  return p;
}

Result<std::size_t> handshake_message_bytes(std::span<const std::byte> prefix, uint32_t expected_magic) {
  if (prefix.size() < kHandshakePrefixBytes) return malformed("short prefix");
  uint32_t magic;
  uint16_t version, total;
  std::memcpy(&magic, prefix.data(), 4);
  std::memcpy(&version, prefix.data() + 4, 2);
  std::memcpy(&total, prefix.data() + 6, 2);
  if (magic != expected_magic) return malformed("bad magic (not a fjord peer?)");
  if (version != kHandshakeVersion)
    return Status(StatusCode::kRejected, "handshake version " + std::to_string(version) + " not supported");
  if (total < kHandshakePrefixBytes || total > kMaxHandshakeBytes) return malformed("length " + std::to_string(total));
  return static_cast<std::size_t>(total);
}

Result<const LinkConfig*> check_request(const HandshakeRequest& request, NodeId self, std::string_view my_type,
                                        const LinkTable& links) {
  const auto reject = [](const std::string& why) { return Status(StatusCode::kRejected, why); };
  const std::string from = "node " + std::to_string(request.from_node);
  if (request.to_node != self)
    return reject(from + " asked for node " + std::to_string(request.to_node) + " but this is node " +
                  std::to_string(self));
  const LinkConfig* link = links.find(self, request.from_node);
  if (!link)
    return reject(from + " is not configured to connect to node " + std::to_string(self) + " (no link section for " +
                  std::to_string(std::min(self, request.from_node)) + "-" +
                  std::to_string(std::max(self, request.from_node)) + ")");
  if (link->type != request.type || link->type != my_type)
    return reject("Incompatible configuration: transporter type mismatch: " + from + " asked for a " + request.type +
                  " link on this " + std::string(my_type) + " listener, but " + link->describe() +
                  " is configured as " + link->type);
  if (link->server_node != self)
    return reject(from + " connected to node " + std::to_string(self) + " but " + link->describe() + " names node " +
                  std::to_string(link->server_node) + " as the server");
  if (request.checksum != link->checksum)
    return reject("Incompatible configuration: Checksum mismatch: " + from +
                  " has Checksum=" + (request.checksum ? "1" : "0") + " for this link, but " + link->describe() +
                  " has Checksum=" + (link->checksum ? "1" : "0") +
                  " here (both ends must agree on whether frames carry checksums)");
  return link;
}

namespace {
// The stream a HandshakeStreamScope put in place of `fd` on this thread.
thread_local int t_stream_fd = -1;
thread_local HandshakeStream* t_stream = nullptr;
HandshakeStream* stream_for(int fd) { return fd == t_stream_fd ? t_stream : nullptr; }
}  // namespace

HandshakeStreamScope::HandshakeStreamScope(int fd, HandshakeStream& stream)
    : previous_fd_(t_stream_fd), previous_stream_(t_stream) {
  FJORD_ASSERT(fd >= 0);
  t_stream_fd = fd;
  t_stream = &stream;
}

HandshakeStreamScope::~HandshakeStreamScope() {
  t_stream_fd = previous_fd_;
  t_stream = previous_stream_;
}

Status send_all(int fd, std::span<const std::byte> bytes, DeadlineNs deadline) {
  if (HandshakeStream* stream = stream_for(fd)) return stream->send_all(bytes, deadline);
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      if (errno == EPIPE || errno == ECONNRESET) return Status(StatusCode::kLinkDown, "peer closed during handshake");
      return io_error("handshake send", errno);
    }
    if (monotonic_ns() >= deadline) return Status(StatusCode::kTimeout, "handshake send timed out");
    pollfd p{fd, POLLOUT, 0};
    ::poll(&p, 1, poll_ms_until(deadline));
  }
  return Status::ok();
}

Status recv_exact(int fd, std::span<std::byte> bytes, DeadlineNs deadline) {
  if (HandshakeStream* stream = stream_for(fd)) return stream->recv_exact(bytes, deadline);
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::recv(fd, bytes.data() + done, bytes.size() - done, MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0) return Status(StatusCode::kLinkDown, "peer closed the connection during the handshake");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      if (errno == ECONNRESET) return Status(StatusCode::kLinkDown, "peer reset the connection during the handshake");
      return io_error("handshake receive", errno);
    }
    if (monotonic_ns() >= deadline) return Status(StatusCode::kTimeout, "handshake receive timed out");
    pollfd p{fd, POLLIN, 0};
    ::poll(&p, 1, poll_ms_until(deadline));
  }
  return Status::ok();
}

Result<std::vector<std::byte>> recv_handshake_message(int fd, uint32_t magic, DeadlineNs deadline) {
  std::vector<std::byte> message(kHandshakePrefixBytes);
  if (Status s = recv_exact(fd, message, deadline); !s) return s;
  auto total = handshake_message_bytes(message, magic);
  if (!total) return total.status();
  message.resize(*total);
  if (Status s = recv_exact(fd, std::span(message).subspan(kHandshakePrefixBytes), deadline); !s) return s;
  return message;
}

Result<HandshakeReply> client_handshake(int fd, const HandshakeRequest& request, DeadlineNs deadline) {
  if (Status s = send_all(fd, encode_request(request), deadline); !s) return s;
  auto bytes = recv_handshake_message(fd, kHandshakeReplyMagic, deadline);
  if (!bytes) return bytes.status();
  auto reply = decode_reply(*bytes);
  if (!reply) return reply.status();
  if (!reply->accepted)
    return Status(StatusCode::kRejected, "node " + std::to_string(request.to_node) + " rejected the " + request.type +
                                             " connection from node " + std::to_string(request.from_node) + ": " +
                                             reply->reason);
  return reply;
}

Result<AcceptedRequest> server_handshake(int fd, NodeId self, std::string_view my_type, const LinkTable& links,
                                         DeadlineNs deadline, const std::string& peer_description) {
  auto bytes = recv_handshake_message(fd, kHandshakeRequestMagic, deadline);
  Result<HandshakeRequest> request = bytes ? decode_request(*bytes) : Result<HandshakeRequest>(bytes.status());
  Status refusal;
  const LinkConfig* link = nullptr;
  if (!request) {
    refusal = request.status();
  } else {
    auto checked = check_request(*request, self, my_type, links);
    if (checked)
      link = *checked;
    else
      refusal = checked.status();
  }
  if (link) return AcceptedRequest{link, std::move(request).value()};
  FJORD_LOG_WARN("node %u: rejected %s connection from %s: %s", self, std::string(my_type).c_str(),
                 peer_description.c_str(), refusal.message().c_str());
  if (refusal.code() != StatusCode::kLinkDown && refusal.code() != StatusCode::kTimeout) {
    HandshakeReply reply;
    reply.accepted = false;
    reply.code = refusal.code();
    reply.reason = refusal.message();
    (void)send_all(fd, encode_reply(reply), std::min<DeadlineNs>(deadline, monotonic_ns() + 100'000'000));
  }
  return Status(StatusCode::kRejected,
                "rejected " + std::string(my_type) + " connection from " + peer_description + ": " + refusal.message());
}

Status send_accept(int fd, std::span<const std::byte> extra, DeadlineNs deadline) {
  HandshakeReply reply;
  reply.accepted = true;
  reply.extra.assign(extra.begin(), extra.end());
  return send_all(fd, encode_reply(reply), deadline);
}

Status send_reject(int fd, NodeId self, std::string_view my_type, const std::string& peer_description,
                   const std::string& reason, DeadlineNs deadline) {
  FJORD_LOG_WARN("node %u: rejected %s connection from %s: %s", self, std::string(my_type).c_str(),
                 peer_description.c_str(), reason.c_str());
  HandshakeReply reply;
  reply.accepted = false;
  reply.code = StatusCode::kRejected;
  reply.reason = reason;
  (void)send_all(fd, encode_reply(reply), deadline);
  return Status(StatusCode::kRejected,
                "rejected " + std::string(my_type) + " connection from " + peer_description + ": " + reason);
}

}  // namespace fjord::transport
