// libFuzzer target: the DPDK transporter's packet decoder on arbitrary
// bytes. Properties: never reads past the input (ASan); a packet it accepts
// has its payload inside the input, and encoding the decoded addressing and
// header with that payload gives back the same bytes (up to the Ethernet
// padding a short frame carries).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "dpdk_wire.h"

using namespace fjord::dpdk::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Copy into an exactly-sized heap buffer so ASan catches any over-read.
  std::vector<std::byte> input(size);
  if (size) std::memcpy(input.data(), data, size);
  Packet packet;
  if (decode_packet(input, packet) != PacketError::kNone) return 0;
  const std::byte* begin = input.data();
  const std::byte* end = begin + input.size();
  if (packet.payload.data() < begin || packet.payload.data() + packet.payload.size() > end) std::abort();
  std::vector<std::byte> again(kAllHeaderBytes + packet.payload.size());
  const std::size_t bytes = encode_headers(again.data(), packet.addressing, packet.header, packet.payload.size());
  if (bytes != again.size() || bytes > input.size()) std::abort();
  if (!packet.payload.empty())
    std::memcpy(again.data() + kAllHeaderBytes, packet.payload.data(), packet.payload.size());
  // The decoder accepted it, so only fields it does not keep (the IPv4
  // identification, flags, TTL, UDP checksum) may differ from what this
  // encoder writes: every field it keeps must come back the same.
  Packet decoded;
  if (decode_packet(again, decoded) != PacketError::kNone) std::abort();
  if (decoded.header.type != packet.header.type || decoded.header.sequence != packet.header.sequence ||
      decoded.header.ack != packet.header.ack || decoded.header.window != packet.header.window ||
      decoded.header.connection != packet.header.connection || decoded.header.flags != packet.header.flags)
    std::abort();
  if (decoded.addressing.source_port != packet.addressing.source_port ||
      decoded.addressing.destination_ip != packet.addressing.destination_ip ||
      decoded.addressing.source_mac != packet.addressing.source_mac)
    std::abort();
  if (decoded.payload.size() != packet.payload.size() ||
      (!packet.payload.empty() &&
       std::memcmp(decoded.payload.data(), packet.payload.data(), packet.payload.size()) != 0))
    std::abort();
  return 0;
}
