#include "dpdk_wire.h"

#include <charconv>
#include <cstdio>
#include <cstring>

namespace fjord::dpdk::wire {
namespace {

// Network order for Ethernet, IPv4 and UDP; the Fjord header is little-endian.
void put_be16(std::byte* p, uint16_t v) {
  p[0] = static_cast<std::byte>(v >> 8);
  p[1] = static_cast<std::byte>(v);
}
void put_be32(std::byte* p, uint32_t v) {
  put_be16(p, static_cast<uint16_t>(v >> 16));
  put_be16(p + 2, static_cast<uint16_t>(v));
}
uint16_t get_be16(const std::byte* p) {
  return static_cast<uint16_t>(std::to_integer<unsigned>(p[0]) << 8 | std::to_integer<unsigned>(p[1]));
}
uint32_t get_be32(const std::byte* p) { return uint32_t{get_be16(p)} << 16 | get_be16(p + 2); }
template <class T>
void put_le(std::byte* p, T v) {
  std::memcpy(p, &v, sizeof v);
}
template <class T>
T get_le(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// RFC 1071 over the 20-byte IPv4 header.
uint16_t ipv4_checksum(const std::byte* header) {
  uint32_t sum = 0;
  for (std::size_t i = 0; i < kIpv4Bytes; i += 2) sum += get_be16(header + i);
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

bool carries_payload(PacketType type) {
  return type == PacketType::kData || type == PacketType::kClose || type == PacketType::kGreeting ||
         type == PacketType::kRequest || type == PacketType::kReply;
}

// Ethernet, IPv4 and UDP; on kNone, `udp_payload` is the UDP payload.
PacketError decode_lower(std::span<const std::byte> bytes, Addressing& a, std::span<const std::byte>& udp_payload) {
  if (bytes.size() < kAllHeaderBytes) return PacketError::kTooShort;
  const std::byte* p = bytes.data();
  std::memcpy(a.destination_mac.data(), p, 6);
  std::memcpy(a.source_mac.data(), p + 6, 6);
  if (get_be16(p + 12) != kEtherTypeIpv4) return PacketError::kNotIpv4;
  const std::byte* ip = p + kEthernetBytes;
  if (ip[0] != std::byte{0x45}) return PacketError::kBadIpHeader;  // version 4, no options
  const uint16_t total = get_be16(ip + 2);
  if (total < kIpv4Bytes + kUdpBytes || total > bytes.size() - kEthernetBytes) return PacketError::kBadIpHeader;
  if ((get_be16(ip + 6) & 0x3FFF) != 0) return PacketError::kBadIpHeader;  // more fragments, or an offset
  if (ipv4_checksum(ip) != 0) return PacketError::kBadIpChecksum;
  if (std::to_integer<uint8_t>(ip[9]) != kIpProtocolUdp) return PacketError::kNotUdp;
  a.source_ip = get_be32(ip + 12);
  a.destination_ip = get_be32(ip + 16);
  const std::byte* udp = ip + kIpv4Bytes;
  a.source_port = get_be16(udp);
  a.destination_port = get_be16(udp + 2);
  const uint16_t udp_length = get_be16(udp + 4);
  if (udp_length != total - kIpv4Bytes) return PacketError::kBadUdpLength;
  udp_payload = std::span<const std::byte>(udp + kUdpBytes, udp_length - kUdpBytes);
  return PacketError::kNone;
}

PacketError decode_fjord(std::span<const std::byte> udp_payload, Header& h, std::span<const std::byte>& payload) {
  if (udp_payload.size() < kFjordHeaderBytes) return PacketError::kTooShort;
  const std::byte* f = udp_payload.data();
  if (get_le<uint32_t>(f) != kPacketMagic) return PacketError::kBadMagic;
  if (std::to_integer<uint8_t>(f[4]) != kPacketVersion) return PacketError::kBadVersion;
  const uint8_t type = std::to_integer<uint8_t>(f[5]);
  if (type == 0 || type > kMaxPacketType) return PacketError::kBadType;
  h.type = static_cast<PacketType>(type);
  h.flags = std::to_integer<uint8_t>(f[6]);
  if ((h.flags & ~kFlagProbe) != 0) return PacketError::kBadFlags;
  if (f[7] != std::byte{0} || get_le<uint16_t>(f + 14) != 0 || get_le<uint32_t>(f + 36) != 0)
    return PacketError::kReservedNonZero;
  h.connection = get_le<uint32_t>(f + 8);
  if (h.connection == 0) return PacketError::kZeroConnection;
  const uint16_t payload_bytes = get_le<uint16_t>(f + 12);
  if (payload_bytes != udp_payload.size() - kFjordHeaderBytes) return PacketError::kBadPayloadLength;
  if (payload_bytes != 0 && !carries_payload(h.type)) return PacketError::kBadPayloadLength;
  if (payload_bytes == 0 && h.type == PacketType::kData) return PacketError::kBadPayloadLength;
  h.sequence = get_le<uint64_t>(f + 16);
  h.ack = get_le<uint64_t>(f + 24);
  h.window = get_le<uint32_t>(f + 32);
  payload = udp_payload.subspan(kFjordHeaderBytes);
  return PacketError::kNone;
}

}  // namespace

const char* packet_type_name(PacketType type) noexcept {
  switch (type) {
    case PacketType::kData: return "data";
    case PacketType::kAck: return "ack";
    case PacketType::kClose: return "close";
    case PacketType::kHello: return "hello";
    case PacketType::kGreeting: return "greeting";
    case PacketType::kRequest: return "request";
    case PacketType::kReply: return "reply";
  }
  return "?";
}

const char* packet_error_name(PacketError error) noexcept {
  switch (error) {
    case PacketError::kNone: return "no error";
    case PacketError::kTooShort: return "shorter than its headers";
    case PacketError::kNotIpv4: return "not IPv4";
    case PacketError::kBadIpHeader: return "malformed IPv4 header";
    case PacketError::kBadIpChecksum: return "IPv4 header checksum mismatch";
    case PacketError::kNotUdp: return "not UDP";
    case PacketError::kBadUdpLength: return "UDP length disagrees with the IPv4 length";
    case PacketError::kBadMagic: return "not a Fjord packet";
    case PacketError::kBadVersion: return "unsupported packet version";
    case PacketError::kBadType: return "unknown packet type";
    case PacketError::kBadFlags: return "unknown packet flags";
    case PacketError::kReservedNonZero: return "reserved header bytes are not zero";
    case PacketError::kZeroConnection: return "connection id 0";
    case PacketError::kBadPayloadLength: return "payload length disagrees with the packet";
  }
  return "?";
}

std::size_t encode_headers(std::byte* out, const Addressing& a, const Header& h, std::size_t payload_bytes) noexcept {
  std::memcpy(out, a.destination_mac.data(), 6);
  std::memcpy(out + 6, a.source_mac.data(), 6);
  put_be16(out + 12, kEtherTypeIpv4);
  std::byte* ip = out + kEthernetBytes;
  const std::size_t udp_length = kUdpBytes + kFjordHeaderBytes + payload_bytes;
  ip[0] = std::byte{0x45};
  ip[1] = std::byte{0};
  put_be16(ip + 2, static_cast<uint16_t>(kIpv4Bytes + udp_length));
  put_be16(ip + 4, 0);       // identification: never fragmented
  put_be16(ip + 6, 0x4000);  // don't fragment
  ip[8] = std::byte{kIpTtl};
  ip[9] = std::byte{kIpProtocolUdp};
  put_be16(ip + 10, 0);
  put_be32(ip + 12, a.source_ip);
  put_be32(ip + 16, a.destination_ip);
  put_be16(ip + 10, ipv4_checksum(ip));
  std::byte* udp = ip + kIpv4Bytes;
  put_be16(udp, a.source_port);
  put_be16(udp + 2, a.destination_port);
  put_be16(udp + 4, static_cast<uint16_t>(udp_length));
  put_be16(udp + 6, 0);  // no UDP checksum (allowed over IPv4): the Ethernet FCS and frame crc32c cover it
  std::byte* f = udp + kUdpBytes;
  put_le<uint32_t>(f, kPacketMagic);
  f[4] = std::byte{kPacketVersion};
  f[5] = static_cast<std::byte>(h.type);
  f[6] = std::byte{h.flags};
  f[7] = std::byte{0};
  put_le<uint32_t>(f + 8, h.connection);
  put_le<uint16_t>(f + 12, static_cast<uint16_t>(payload_bytes));
  put_le<uint16_t>(f + 14, 0);
  put_le<uint64_t>(f + 16, h.sequence);
  put_le<uint64_t>(f + 24, h.ack);
  put_le<uint32_t>(f + 32, h.window);
  put_le<uint32_t>(f + 36, 0);
  return kAllHeaderBytes + payload_bytes;
}

PacketError decode_packet(std::span<const std::byte> bytes, Packet& out) noexcept {
  std::span<const std::byte> udp_payload;
  if (PacketError e = decode_lower(bytes, out.addressing, udp_payload); e != PacketError::kNone) return e;
  return decode_fjord(udp_payload, out.header, out.payload);
}

std::optional<MacAddress> parse_mac(std::string_view text) {
  MacAddress mac{};
  if (text.size() != 17) return std::nullopt;
  for (std::size_t i = 0; i < 6; ++i) {
    const char* first = text.data() + 3 * i;
    if (i < 5 && first[2] != ':') return std::nullopt;
    unsigned v = 0;
    auto [end, ec] = std::from_chars(first, first + 2, v, 16);
    if (ec != std::errc() || end != first + 2) return std::nullopt;
    mac[i] = static_cast<uint8_t>(v);
  }
  return mac;
}

std::string format_mac(const MacAddress& mac) {
  char text[18];
  std::snprintf(text, sizeof text, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]);
  return text;
}

std::optional<uint32_t> parse_ipv4(std::string_view text) {
  uint32_t ip = 0;
  const char* p = text.data();
  const char* end = text.data() + text.size();
  for (int part = 0; part < 4; ++part) {
    if (part > 0) {
      if (p == end || *p != '.') return std::nullopt;
      ++p;
    }
    unsigned v = 0;
    auto [next, ec] = std::from_chars(p, end, v, 10);
    if (ec != std::errc() || next == p || next - p > 3 || v > 255) return std::nullopt;
    ip = ip << 8 | v;
    p = next;
  }
  if (p != end) return std::nullopt;
  return ip;
}

std::string format_ipv4(uint32_t ip) {
  return std::to_string(ip >> 24) + "." + std::to_string((ip >> 16) & 0xFF) + "." + std::to_string((ip >> 8) & 0xFF) +
         "." + std::to_string(ip & 0xFF);
}

}  // namespace fjord::dpdk::wire
