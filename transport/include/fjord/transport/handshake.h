// The connection handshake, common to every transporter.
//
// The accepting side speaks first: a HandshakeGreeting carrying a fresh
// nonce. The connecting side sends a HandshakeRequest naming itself, the node
// it wants and the transporter type; the accepting side checks it against
// its link table (check_request) and answers with a HandshakeReply, carrying
// the reason when it refuses: NDB's "Incompatible configuration: Transporter
// type mismatch" becomes, for instance, "node 3 asked for a shm link but link
// 1-3 is configured as tcp (cluster.ini:14)". The settings both ends must
// share to read each other's frames (Checksum) are compared here too, so that
// a mismatch is a refusal naming the setting rather than a protocol error on
// the first frame. Both messages may carry a few bytes for the transporter
// itself (RDMA queue-pair numbers, ring addresses).
//
// Authentication (cluster_key.h): when the connecting node has a
// ClusterKeyFile it waits for the greeting and its request carries its own
// nonce and a proof over both nonces; the accepting node checks it and its
// accepting reply carries its own proof, which the connecting node checks
// before it uses the link. A node without a key sends its request at once
// and reads the greeting after it, so set-up without keys costs no extra
// round trip, and with keys one at most. Both ends must agree: a key on one
// end only is a refusal naming which end lacks it.
//
// Wire form (little-endian), greeting:
//   u32 magic 'FJHG'  u16 version  u16 total_bytes  nonce[32]
// request:
//   u32 magic 'FJHQ'  u16 version  u16 total_bytes
//   u16 from_node  u16 to_node  u8 type_len  type[type_len]
//   u8 flags (bit 0: the link's Checksum; bit 1: the sender holds a cluster
//            key; others 0)
//   u8 proof_len (0, or 64 with bit 1: client nonce[32] mac[32])
//   u16 extra_len  extra[extra_len]
// reply:
//   u32 magic 'FJHP'  u16 version  u16 total_bytes
//   u8 accepted  u8 status_code  u16 reason_len  reason[reason_len]
//   u8 proof_len (0, or 32 when accepted: mac[32])
//   u16 extra_len  extra[extra_len]
// Decoders accept exactly total_bytes and never read past the input; they
// are fuzzed (tests/fuzz/fuzz_handshake.cpp).
//
// Slow path; pure functions plus the stream helpers at the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fjord/base/status.h"
#include "fjord/transport/cluster_key.h"
#include "fjord/transport/link_config.h"
#include "fjord/transport/types.h"

namespace fjord::transport {

inline constexpr uint32_t kHandshakeRequestMagic = 0x5148'4A46;   // "FJHQ"
inline constexpr uint32_t kHandshakeReplyMagic = 0x5048'4A46;     // "FJHP"
inline constexpr uint32_t kHandshakeGreetingMagic = 0x4748'4A46;  // "FJHG"
inline constexpr uint16_t kHandshakeVersion = 3;                  // 3: the greeting and the key proofs
inline constexpr std::size_t kMaxTypeNameBytes = 32;
inline constexpr std::size_t kMaxReasonBytes = 512;
inline constexpr std::size_t kMaxHandshakeExtraBytes = 1024;
inline constexpr std::size_t kMaxHandshakeBytes = 2048;
inline constexpr std::size_t kHandshakePrefixBytes = 8;  // magic, version, total_bytes
inline constexpr std::size_t kHandshakeGreetingBytes = kHandshakePrefixBytes + kAuthNonceBytes;

// The connecting side's proof that it holds the cluster key.
struct ClientProof {
  AuthNonce nonce{};
  AuthMac mac{};
};
inline constexpr std::size_t kClientProofBytes = kAuthNonceBytes + kAuthMacBytes;

struct HandshakeRequest {
  NodeId from_node = kNoNode;
  NodeId to_node = kNoNode;
  std::string type;
  std::vector<std::byte> extra;
  bool checksum = false;  // the sender's Checksum for this link
  bool has_key = false;   // the sender holds a cluster key
  // Its proof, when it had the greeting's nonce (RDMA sends it later).
  std::optional<ClientProof> proof;
};
inline constexpr uint8_t kHandshakeChecksumFlag = 1;
inline constexpr uint8_t kHandshakeKeyFlag = 2;

struct HandshakeReply {
  bool accepted = false;
  StatusCode code = StatusCode::kOk;  // why not, when !accepted
  std::string reason;
  std::vector<std::byte> extra;
  std::optional<AuthMac> proof;  // the accepting side's, on an authenticated link
};

std::vector<std::byte> encode_greeting(const AuthNonce& nonce);
Result<AuthNonce> decode_greeting(std::span<const std::byte> bytes);
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

// ---- authentication (cluster_key.h) ----

// This node's cluster key for `link`: nullopt when the node has no
// ClusterKeyFile, an error naming the file and its problem when it cannot
// be used.
Result<std::optional<ClusterKey>> own_key(const LinkConfig& link, NodeId self);
// A listener's start-up check: the key file of every `type` link that
// `self` serves can be used (own_key), so that a node with a bad one fails
// to start naming the file rather than refusing every peer. Set-ups read the
// file again (a replaced key applies to the next connection).
Status check_own_keys(NodeId self, const LinkTable& links, std::string_view type);
// The connecting side: marks `request` as from a key holder and adds its
// proof over `server_nonce` and a fresh nonce of its own.
void add_proof(HandshakeRequest& request, const ClusterKey& key, const AuthNonce& server_nonce);
// The accepting side, before it commits anything to the peer: kRejected
// when one end of `link` holds a key and the other does not.
Status check_key_presence(const HandshakeRequest& request, const LinkConfig& link, NodeId self);
// The accepting side: checks `proof` (the request's, or one that came
// later) and returns its own proof for the accepting reply, or nullopt on a
// link without keys. kRejected names what the peer got wrong (a reason fit
// to send it); kInvalidArgument is this node's key file problem, naming the
// file (for the log: the peer is told only that this node cannot use its
// key, see refusal_for_peer).
Result<std::optional<AuthMac>> check_client_proof(const HandshakeRequest& request,
                                                  const std::optional<ClientProof>& proof,
                                                  const AuthNonce& server_nonce, const LinkConfig& link, NodeId self);
// The connecting side, on an accepting reply: when it holds `key`, the
// reply must prove the accepting side holds the same key.
Status check_server_proof(const HandshakeRequest& request, const std::optional<AuthMac>& proof, const ClusterKey* key,
                          const AuthNonce& server_nonce);
// The reason a refusal gives the peer: the local one, except that this
// node's own key file problem is not described to a peer that has not
// proved anything.
std::string refusal_for_peer(const Status& refusal, NodeId self);

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

// The accepting side's first message, sent as a connection is accepted
// (before its request can have arrived, so it never waits): returns the
// nonce it carries, for server_handshake().
Result<AuthNonce> send_greeting(int fd);

// Reads the accepting side's greeting and returns its nonce. A client whose
// handshake runs through TLS started after connecting reads the greeting,
// sent in the clear as the connection was accepted, before TLS starts and
// hands it to client_handshake(); the nonce is no secret, and the proofs
// over it travel through TLS.
Result<AuthNonce> recv_greeting(int fd, DeadlineNs deadline);
// Runs the client half over a stream socket: reads the greeting (first,
// when this node holds `key` (own_key(), loaded before connecting), to prove
// it; not at all when `greeting_read` gives it), sends the request, reads the
// reply, and returns it if accepted and, with a key, proved by the server;
// else the server's reason or what failed as kRejected.
Result<HandshakeReply> client_handshake(int fd, HandshakeRequest request, const ClusterKey* key, DeadlineNs deadline,
                                        const AuthNonce* greeting_read = nullptr);
// Runs the server half: reads the request and checks it, and the client's
// proof against `greeting` (the nonce send_greeting() sent). On success
// returns the matched link, the request and this side's proof (the caller
// then sends the accepting reply, possibly with extra bytes); on a mismatch
// sends the rejecting reply itself and returns kRejected with the reason.
struct AcceptedRequest {
  const LinkConfig* link = nullptr;
  HandshakeRequest request;
  std::optional<AuthMac> proof;  // for the accepting reply
};
Result<AcceptedRequest> server_handshake(int fd, NodeId self, std::string_view my_type, const LinkTable& links,
                                         DeadlineNs deadline, const std::string& peer_description,
                                         const AuthNonce& greeting);
Status send_accept(int fd, const AcceptedRequest& accepted, std::span<const std::byte> extra, DeadlineNs deadline);
// Refuses after server_handshake() accepted the request, for a reason only
// the transporter can see (the peer's address, its uid): tells the peer and
// returns kRejected with the reason (for the listener's owner to log).
Status send_reject(int fd, std::string_view my_type, const std::string& peer_description, const std::string& reason,
                   DeadlineNs deadline);

}  // namespace fjord::transport
