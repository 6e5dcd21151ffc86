// The DPDK transporter's packets: Ethernet II, IPv4 (no options, never
// fragmented), UDP, then a 40-byte Fjord packet header and its payload.
//
// Fjord packet header (little-endian, after the UDP header):
//   offset size  field
//   0      4     magic 'FJDP'
//   4      1     version            kPacketVersion
//   5      1     type               PacketType
//   6      1     flags              kFlagProbe; other bits zero
//   7      1     reserved           zero
//   8      4     connection         the client's id for this connection, never 0
//   12     2     payload_bytes      bytes after this header; equals the UDP length less both headers
//   14     2     reserved           zero
//   16     8     sequence           stream offset of the first payload byte (kData)
//   24     8     ack                the next stream offset the sender of this packet expects
//   32     4     window             bytes it accepts past `ack`
//   36     4     reserved           zero
//
// A link's bytes are the frame stream the other transporters carry (frame.h),
// cut into packets at any byte: the receiver appends in-order payloads to its
// receive ring and scans whole frames there. Handshake packets carry one
// handshake.h message each as their payload.
//
// decode_packet() validates every field of every layer and never reads past
// its input, whatever the bytes (tests/fuzz/fuzz_dpdk_packet.cpp). Pure
// functions, no DPDK: any thread. Hot path: encode_headers/decode_packet.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace fjord::dpdk::wire {

inline constexpr uint32_t kPacketMagic = 0x5044'4A46;  // "FJDP"
inline constexpr uint8_t kPacketVersion = 1;
inline constexpr uint8_t kFlagProbe = 0x01;  // a sender with a closed window asks for a window update
inline constexpr std::size_t kEthernetBytes = 14;
inline constexpr std::size_t kIpv4Bytes = 20;
inline constexpr std::size_t kUdpBytes = 8;
inline constexpr std::size_t kFjordHeaderBytes = 40;
inline constexpr std::size_t kAllHeaderBytes = kEthernetBytes + kIpv4Bytes + kUdpBytes + kFjordHeaderBytes;
inline constexpr std::size_t kMinEthernetFrameBytes = 60;  // without the FCS; shorter frames are padded
inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint8_t kIpProtocolUdp = 17;
inline constexpr uint8_t kIpTtl = 64;
// The IP MTU bounds (Mtu): every handshake message fits the payload at the smallest.
inline constexpr uint32_t kMinMtu = 1280;
inline constexpr uint32_t kMaxMtu = 9000;

enum class PacketType : uint8_t {
  kData = 1,      // payload: stream bytes at `sequence`
  kAck = 2,       // no payload: ack and window only (also the keep-alive and the probe answer)
  kClose = 3,     // payload: the reason, text
  kHello = 4,     // client -> server: asks for a greeting; no payload
  kGreeting = 5,  // server -> client: a handshake greeting
  kRequest = 6,   // client -> server: a handshake request
  kReply = 7,     // server -> client: a handshake reply
};
inline constexpr uint8_t kMaxPacketType = 7;
const char* packet_type_name(PacketType type) noexcept;

using MacAddress = std::array<uint8_t, 6>;
inline constexpr MacAddress kBroadcastMac = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

// Who sends to whom. IPv4 addresses and UDP ports in host order.
struct Addressing {
  MacAddress source_mac{};
  MacAddress destination_mac{};
  uint32_t source_ip = 0;
  uint32_t destination_ip = 0;
  uint16_t source_port = 0;
  uint16_t destination_port = 0;
};

struct Header {
  PacketType type = PacketType::kAck;
  uint8_t flags = 0;
  uint32_t connection = 0;
  uint64_t sequence = 0;
  uint64_t ack = 0;
  uint32_t window = 0;
};

enum class PacketError : uint8_t {
  kNone = 0,
  kTooShort,     // shorter than all the headers
  kNotIpv4,      // EtherType is not IPv4
  kBadIpHeader,  // version, header length, options, fragment, or total length
  kBadIpChecksum,
  kNotUdp,
  kBadUdpLength,
  kBadMagic,  // not a Fjord packet (another flow on the port)
  kBadVersion,
  kBadType,
  kBadFlags,
  kReservedNonZero,
  kZeroConnection,
  kBadPayloadLength,  // payload_bytes disagrees with the UDP length, or a type that carries none has some
};
const char* packet_error_name(PacketError error) noexcept;

struct Packet {
  Addressing addressing;
  Header header;
  std::span<const std::byte> payload;  // points into the decoded bytes
};

// Writes the Ethernet, IPv4, UDP and Fjord headers (kAllHeaderBytes) for a
// payload of `payload_bytes` (at most max_payload_bytes() of the MTU in
// use) at `out`. Returns the bytes of the whole Ethernet frame, payload
// included (the caller writes the payload after the headers), padding not
// included: a caller whose frame is shorter than kMinEthernetFrameBytes
// pads with zeros.
std::size_t encode_headers(std::byte* out, const Addressing& addressing, const Header& header,
                           std::size_t payload_bytes) noexcept;

// Validates and decodes one received Ethernet frame (without FCS).
PacketError decode_packet(std::span<const std::byte> bytes, Packet& out) noexcept;

// Payload bytes one packet carries at this IP MTU.
constexpr std::size_t max_payload_bytes(uint32_t mtu) noexcept {
  return mtu - kIpv4Bytes - kUdpBytes - kFjordHeaderBytes;
}

// "02:00:00:00:00:01" and "10.0.0.1", both ways. Parsers return nullopt on
// anything else (no leading zeros rules beyond the digit counts).
std::optional<MacAddress> parse_mac(std::string_view text);
std::string format_mac(const MacAddress& mac);
std::optional<uint32_t> parse_ipv4(std::string_view text);
std::string format_ipv4(uint32_t ip);

}  // namespace fjord::dpdk::wire
