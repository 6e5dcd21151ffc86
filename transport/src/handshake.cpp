#include "fjord/transport/handshake.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "fjord/base/byte_io.h"
#include "fjord/base/clock.h"
#include "fjord/transport/cluster_key.h"

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

Status read_client_proof(Reader& r, HandshakeRequest& q) {
  uint8_t proof_len = 0;
  if (!r.u8(proof_len)) return malformed("truncated request");
  if (proof_len == 0) return Status::ok();
  if (proof_len != kClientProofBytes || !q.has_key)
    return malformed("request proof of " + std::to_string(proof_len) + " bytes" +
                     (q.has_key ? "" : " from a sender without a key"));
  ClientProof& proof = q.proof.emplace();
  if (!r.raw(proof.nonce.data(), kAuthNonceBytes) || !r.raw(proof.mac.data(), kAuthMacBytes))
    return malformed("truncated proof");
  return Status::ok();
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

std::vector<std::byte> encode_greeting(const AuthNonce& nonce) {
  Writer w;
  w.u32(kHandshakeGreetingMagic);
  w.u16(kHandshakeVersion);
  w.u16(0);
  w.raw(nonce.data(), nonce.size());
  FJORD_ASSERT(w.size() == kHandshakeGreetingBytes);
  return finish(w);
}

Result<AuthNonce> decode_greeting(std::span<const std::byte> bytes) {
  if (bytes.size() > kMaxHandshakeBytes) return malformed("too long");
  Reader r(bytes);
  if (Status s = read_prefix(r, bytes, kHandshakeGreetingMagic); !s) return s;
  AuthNonce nonce{};
  if (!r.raw(nonce.data(), nonce.size())) return malformed("truncated greeting");
  if (!r.at_end()) return malformed("trailing bytes");
  return nonce;
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
  FJORD_ASSERT(request.has_key || !request.proof);
  w.u8((request.checksum ? kHandshakeChecksumFlag : 0) | (request.has_key ? kHandshakeKeyFlag : 0));
  w.u8(request.proof ? kClientProofBytes : 0);
  if (request.proof) {
    w.raw(request.proof->nonce.data(), kAuthNonceBytes);
    w.raw(request.proof->mac.data(), kAuthMacBytes);
  }
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
  FJORD_ASSERT(reply.accepted || !reply.proof);
  w.u8(reply.proof ? kAuthMacBytes : 0);
  if (reply.proof) w.raw(reply.proof->data(), kAuthMacBytes);
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
  if ((flags & ~(kHandshakeChecksumFlag | kHandshakeKeyFlag)) != 0)
    return malformed("unknown request flags " + std::to_string(flags));
  q.checksum = (flags & kHandshakeChecksumFlag) != 0;
  q.has_key = (flags & kHandshakeKeyFlag) != 0;
  if (Status s = read_client_proof(r, q); !s) return s;
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
  uint8_t proof_len = 0;
  if (!r.u8(proof_len)) return malformed("truncated reply");
  if (proof_len != 0 && (proof_len != kAuthMacBytes || !p.accepted))
    return malformed("reply proof of " + std::to_string(proof_len) + " bytes");
  if (proof_len != 0 && !r.raw(p.proof.emplace().data(), kAuthMacBytes)) return malformed("truncated proof");
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

// ---- authentication ----------------------------------------------------

namespace {

AuthContext auth_context(const HandshakeRequest& request, const AuthNonce& server_nonce,
                         const AuthNonce& client_nonce) {
  return {server_nonce, client_nonce, request.from_node, request.to_node, request.type};
}

}  // namespace

Result<std::optional<ClusterKey>> own_key(const LinkConfig& link, NodeId self) {
  const std::string& path = link.key_file_of(self);
  if (path.empty()) return std::optional<ClusterKey>();
  auto key = ClusterKey::load(path);
  if (!key) return Status(key.status().code(), "node " + std::to_string(self) + ": " + key.status().message());
  return std::optional<ClusterKey>(std::move(key).value());
}

Status check_own_keys(NodeId self, const LinkTable& links, std::string_view type) {
  for (const LinkConfig* link : links.links_of(self)) {
    if (link->type != type || link->server_node != self) continue;
    if (auto key = own_key(*link, self); !key)
      return Status(key.status().code(), link->describe() + ": " + key.status().message());
  }
  return Status::ok();
}

void add_proof(HandshakeRequest& request, const ClusterKey& key, const AuthNonce& server_nonce) {
  const AuthNonce client_nonce = random_nonce();
  request.has_key = true;
  request.proof =
      ClientProof{client_nonce, key.proof(AuthRole::kClient, auth_context(request, server_nonce, client_nonce))};
}

Status check_key_presence(const HandshakeRequest& request, const LinkConfig& link, NodeId self) {
  const bool mine = !link.key_file_of(self).empty();
  if (mine == request.has_key) return Status::ok();
  const std::string from = "node " + std::to_string(request.from_node);
  const std::string me = "node " + std::to_string(self);
  if (mine)
    return Status(StatusCode::kRejected, from + " offered no proof of the cluster key, but " + me +
                                             " requires one on " + link.describe() + " (" + from +
                                             " has no ClusterKeyFile)");
  return Status(StatusCode::kRejected, from + " holds a cluster key, but " + me + " has no ClusterKeyFile for " +
                                           link.describe() + ": both ends of a link authenticate, or neither");
}

Result<std::optional<AuthMac>> check_client_proof(const HandshakeRequest& request,
                                                  const std::optional<ClientProof>& proof,
                                                  const AuthNonce& server_nonce, const LinkConfig& link, NodeId self) {
  if (Status s = check_key_presence(request, link, self); !s) return s;
  if (!request.has_key) return std::optional<AuthMac>();
  const std::string from = "node " + std::to_string(request.from_node);
  if (!proof) return Status(StatusCode::kRejected, from + " holds a cluster key but sent no proof of it");
  auto key = own_key(link, self);
  if (!key) return key.status();
  FJORD_ASSERT(key->has_value());
  const AuthContext context = auth_context(request, server_nonce, proof->nonce);
  if (!proofs_equal((*key)->proof(AuthRole::kClient, context), proof->mac))
    return Status(StatusCode::kRejected, from + "'s proof does not match the cluster key of node " +
                                             std::to_string(self) + " on " + link.describe() +
                                             ": the two nodes hold different keys (compare their ClusterKeyFile)");
  return std::optional<AuthMac>((*key)->proof(AuthRole::kServer, context));
}

Status check_server_proof(const HandshakeRequest& request, const std::optional<AuthMac>& proof, const ClusterKey* key,
                          const AuthNonce& server_nonce) {
  if (!key) return Status::ok();
  FJORD_ASSERT(request.proof.has_value());
  const std::string server = "node " + std::to_string(request.to_node);
  if (!proof)
    return Status(StatusCode::kRejected, server + " accepted the " + request.type + " connection from node " +
                                             std::to_string(request.from_node) +
                                             " without proving it holds the cluster key (refused: it may not be "
                                             "node " +
                                             std::to_string(request.to_node) + ")");
  const AuthContext context = auth_context(request, server_nonce, request.proof->nonce);
  if (!proofs_equal(key->proof(AuthRole::kServer, context), *proof))
    return Status(StatusCode::kRejected, server + "'s proof does not match the cluster key in " + key->path() +
                                             " (refused the " + request.type + " connection: it may not be node " +
                                             std::to_string(request.to_node) + ")");
  return Status::ok();
}

std::string refusal_for_peer(const Status& refusal, NodeId self) {
  if (refusal.code() != StatusCode::kInvalidArgument) return refusal.message();
  return "node " + std::to_string(self) +
         " cannot use its cluster key (its ClusterKeyFile is unreadable or not "
         "private to its user; node " +
         std::to_string(self) + "'s log names the file and the problem)";
}

// ---- over a stream --------------------------------------------------------

Result<AuthNonce> send_greeting(int fd) {
  const AuthNonce nonce = random_nonce();
  const std::vector<std::byte> bytes = encode_greeting(nonce);
  // A new connection's send buffer is empty: the greeting goes at once or
  // the peer has already gone.
  const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n < 0) return io_error("handshake greeting", errno);
  if (static_cast<std::size_t>(n) != bytes.size())
    return Status(StatusCode::kLinkDown, "handshake greeting sent only in part");
  return nonce;
}

Result<AuthNonce> recv_greeting(int fd, DeadlineNs deadline) {
  auto bytes = recv_handshake_message(fd, kHandshakeGreetingMagic, deadline);
  if (!bytes) return bytes.status();
  return decode_greeting(*bytes);
}

namespace {

// Sends the request; with `key`, after the greeting whose nonce it proves
// (read here unless the caller read it already: `greeting_read`).
Result<AuthNonce> send_request(int fd, HandshakeRequest& request, const ClusterKey* key, DeadlineNs deadline,
                               const AuthNonce* greeting_read) {
  if (!key) {
    if (Status s = send_all(fd, encode_request(request), deadline); !s) return s;
    if (greeting_read) return *greeting_read;
    return recv_greeting(fd, deadline);
  }
  auto greeting = greeting_read ? Result<AuthNonce>(*greeting_read) : recv_greeting(fd, deadline);
  if (!greeting) return greeting.status();
  add_proof(request, *key, *greeting);
  if (Status s = send_all(fd, encode_request(request), deadline); !s) return s;
  return greeting;
}

}  // namespace

Result<HandshakeReply> client_handshake(int fd, HandshakeRequest request, const ClusterKey* key, DeadlineNs deadline,
                                        const AuthNonce* greeting_read) {
  auto greeting = send_request(fd, request, key, deadline, greeting_read);
  if (!greeting) return greeting.status();
  auto bytes = recv_handshake_message(fd, kHandshakeReplyMagic, deadline);
  if (!bytes) return bytes.status();
  auto reply = decode_reply(*bytes);
  if (!reply) return reply.status();
  if (!reply->accepted)
    return Status(StatusCode::kRejected, "node " + std::to_string(request.to_node) + " rejected the " + request.type +
                                             " connection from node " + std::to_string(request.from_node) + ": " +
                                             reply->reason);
  if (Status s = check_server_proof(request, reply->proof, key, *greeting); !s) return s;
  return reply;
}

namespace {

// The request's checks in order: wire form, link table, keys.
Status check_stream_request(const Result<std::vector<std::byte>>& bytes, NodeId self, std::string_view my_type,
                            const LinkTable& links, const AuthNonce& greeting, AcceptedRequest& out) {
  if (!bytes) return bytes.status();
  Result<HandshakeRequest> request = decode_request(bytes.value());
  if (!request) return request.status();
  auto checked = check_request(*request, self, my_type, links);
  if (!checked) return checked.status();
  auto proof = check_client_proof(*request, request->proof, greeting, **checked, self);
  if (!proof) return proof.status();
  out = AcceptedRequest{*checked, std::move(request).value(), *proof};
  return Status::ok();
}

}  // namespace

Result<AcceptedRequest> server_handshake(int fd, NodeId self, std::string_view my_type, const LinkTable& links,
                                         DeadlineNs deadline, const std::string& peer_description,
                                         const AuthNonce& greeting) {
  auto bytes = recv_handshake_message(fd, kHandshakeRequestMagic, deadline);
  AcceptedRequest accepted;
  const Status refusal = check_stream_request(bytes, self, my_type, links, greeting, accepted);
  if (refusal) return accepted;
  // Not logged here: the returned status says it all, and the listener's
  // owner logs it (the data node at most once a second, so a flood of
  // peers that connect and leave is one line a second).
  if (refusal.code() != StatusCode::kLinkDown && refusal.code() != StatusCode::kTimeout) {
    HandshakeReply reply;
    reply.accepted = false;
    reply.code = refusal.code() == StatusCode::kInvalidArgument ? StatusCode::kRejected : refusal.code();
    reply.reason = refusal_for_peer(refusal, self);
    (void)send_all(fd, encode_reply(reply), std::min<DeadlineNs>(deadline, monotonic_ns() + 100'000'000));
  }
  return Status(StatusCode::kRejected,
                "rejected " + std::string(my_type) + " connection from " + peer_description + ": " + refusal.message());
}

Status send_accept(int fd, const AcceptedRequest& accepted, std::span<const std::byte> extra, DeadlineNs deadline) {
  HandshakeReply reply;
  reply.accepted = true;
  reply.extra.assign(extra.begin(), extra.end());
  reply.proof = accepted.proof;
  return send_all(fd, encode_reply(reply), deadline);
}

Status send_reject(int fd, std::string_view my_type, const std::string& peer_description, const std::string& reason,
                   DeadlineNs deadline) {
  HandshakeReply reply;
  reply.accepted = false;
  reply.code = StatusCode::kRejected;
  reply.reason = reason;
  (void)send_all(fd, encode_reply(reply), deadline);
  return Status(StatusCode::kRejected,
                "rejected " + std::string(my_type) + " connection from " + peer_description + ": " + reason);
}

}  // namespace fjord::transport
