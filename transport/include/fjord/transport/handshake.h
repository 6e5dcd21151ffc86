// The connection handshake, common to every transporter.
//
// The connecting side sends a HandshakeRequest naming itself, the node it
// wants and the transporter type; the accepting side checks it against its
// link table (check_request) and answers with a HandshakeReply, carrying the
// reason when it refuses: NDB's "Incompatible configuration: Transporter type
// mismatch" becomes, for instance, "node 3 asked for a shm link but link 1-3
// is configured as tcp (cluster.ini:14)". The settings both ends must share
// to read each other's frames (Checksum) are compared here too, so that a
// mismatch is a refusal naming the setting rather than a protocol error on
// the first frame. Both messages may carry a few bytes
// for the transporter itself (RDMA queue-pair numbers, ring addresses).
//
// Wire form (little-endian), request:
//   u32 magic 'FJHQ'  u16 version  u16 total_bytes
//   u16 from_node  u16 to_node  u8 type_len  type[type_len]
//   u8 flags (bit 0: the link's Checksum; others 0)
//   u16 extra_len  extra[extra_len]
// reply:
//   u32 magic 'FJHP'  u16 version  u16 total_bytes
//   u8 accepted  u8 status_code  u16 reason_len  reason[reason_len]
//   u16 extra_len  extra[extra_len]
// Decoders accept exactly total_bytes and never read past the input; they
// are fuzzed (tests/fuzz/fuzz_handshake.cpp).
//
// Slow path; pure functions plus the stream helpers at the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fjord/base/status.h"
#include "fjord/transport/link_config.h"
#include "fjord/transport/types.h"

namespace fjord::transport {

inline constexpr uint32_t kHandshakeRequestMagic = 0x5148'4A46;  // "FJHQ"
inline constexpr uint32_t kHandshakeReplyMagic = 0x5048'4A46;    // "FJHP"
inline constexpr uint16_t kHandshakeVersion = 2;                 // 2: the request's flags byte
inline constexpr std::size_t kMaxTypeNameBytes = 32;
inline constexpr std::size_t kMaxReasonBytes = 512;
inline constexpr std::size_t kMaxHandshakeExtraBytes = 1024;
inline constexpr std::size_t kMaxHandshakeBytes = 2048;
inline constexpr std::size_t kHandshakePrefixBytes = 8;  // magic, version, total_bytes

struct HandshakeRequest {
  NodeId from_node = kNoNode;
  NodeId to_node = kNoNode;
  std::string type;
  std::vector<std::byte> extra;
  bool checksum = false;  // the sender's Checksum for this link
};
inline constexpr uint8_t kHandshakeChecksumFlag = 1;

struct HandshakeReply {
  bool accepted = false;
  StatusCode code = StatusCode::kOk;  // why not, when !accepted
  std::string reason;
  std::vector<std::byte> extra;
};

std::vector<std::byte> encode_request(const HandshakeRequest& request);
std::vector<std::byte> encode_reply(const HandshakeReply& reply);
Result<HandshakeRequest> decode_request(std::span<const std::byte> bytes);
Result<HandshakeReply> decode_reply(std::span<const std::byte> bytes);
// Reads total_bytes from a message prefix (first kHandshakePrefixBytes), or
// an error if the prefix is not a handshake message of this version.
Result<std::size_t> handshake_message_bytes(std::span<const std::byte> prefix, uint32_t expected_magic);

// The accepting side's check: is `request` a configured link of type
// `my_type` to node `self`? Returns the link, or kRejected with a reason
// that names the node ids, the types and the config line.
Result<const LinkConfig*> check_request(const HandshakeRequest& request, NodeId self, std::string_view my_type,
                                        const LinkTable& links);

// A listener's accept() deadline bounds only the wait for a connection
// attempt. Once one is taken, its set-up (handshake, resources) runs until
// this later deadline, so a short accept() slice never abandons a peer
// half-way (which it would see as a reset or a failed send).
inline constexpr uint64_t kSetupBudgetNs = 10'000'000'000ULL;
DeadlineNs setup_deadline(DeadlineNs accept_deadline);

// A set-up that wraps its socket in a stream of its own (TCP with TLS) runs
// the handshake inside it: while a HandshakeStreamScope for `fd` lives on
// this thread, send_all() and recv_exact() on `fd`, and so every helper
// below, go through `stream` instead of the bare socket.
class HandshakeStream {
 public:
  virtual ~HandshakeStream() = default;
  virtual Status send_all(std::span<const std::byte> bytes, DeadlineNs deadline) = 0;
  virtual Status recv_exact(std::span<std::byte> bytes, DeadlineNs deadline) = 0;
};
class HandshakeStreamScope {
 public:
  HandshakeStreamScope(int fd, HandshakeStream& stream);
  ~HandshakeStreamScope();
  HandshakeStreamScope(const HandshakeStreamScope&) = delete;
  HandshakeStreamScope& operator=(const HandshakeStreamScope&) = delete;

 private:
  int previous_fd_;
  HandshakeStream* previous_stream_;
};

// Blocking-with-deadline helpers over a connected stream socket (TCP or Unix),
// used by transporters that shake hands on a stream. The socket may be
// blocking or not. kTimeout at the deadline, kLinkDown when the peer closes.
Status send_all(int fd, std::span<const std::byte> bytes, DeadlineNs deadline);
Status recv_exact(int fd, std::span<std::byte> bytes, DeadlineNs deadline);
// Reads one handshake message (prefix, then the rest) into a vector.
Result<std::vector<std::byte>> recv_handshake_message(int fd, uint32_t magic, DeadlineNs deadline);

// Runs the client half over a stream socket: sends the request, reads the
// reply, and returns it if accepted or the server's reason as kRejected.
Result<HandshakeReply> client_handshake(int fd, const HandshakeRequest& request, DeadlineNs deadline);
// Runs the server half: reads the request and checks it. On success returns
// the matched link and the request (the caller then sends the accepting
// reply, possibly with extra bytes); on a mismatch sends the rejecting reply
// itself, logs the reason, and returns kRejected.
struct AcceptedRequest {
  const LinkConfig* link = nullptr;
  HandshakeRequest request;
};
Result<AcceptedRequest> server_handshake(int fd, NodeId self, std::string_view my_type, const LinkTable& links,
                                         DeadlineNs deadline, const std::string& peer_description);
Status send_accept(int fd, std::span<const std::byte> extra, DeadlineNs deadline);
// Refuses after server_handshake() accepted the request, for a reason only
// the transporter can see (the peer's address, its uid): tells the peer,
// logs, and returns kRejected with the reason.
Status send_reject(int fd, NodeId self, std::string_view my_type, const std::string& peer_description,
                   const std::string& reason, DeadlineNs deadline);

}  // namespace fjord::transport
