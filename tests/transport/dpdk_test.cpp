// The DPDK transporter's parts that need no device: the packet codec (every
// field back, every malformation named) and the [dpdk] section's checks
// (errors name the file, line and key). The transporter itself runs the
// contract suite (tests/contract) over net_ring, lossless and with faults.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "builtin_transporters.h"
#include "dpdk_wire.h"
#include "fjord/transport/config_file.h"
#include "fjord/transport/link_config.h"

namespace fjord::dpdk {
namespace {

using namespace wire;

Addressing sample_addressing() {
  Addressing a;
  a.source_mac = {2, 0, 0, 0, 0, 1};
  a.destination_mac = {2, 0, 0, 0, 0, 2};
  a.source_ip = 0x0A00'0001;
  a.destination_ip = 0x0A00'0002;
  a.source_port = 20000;
  a.destination_port = 20001;
  return a;
}

std::vector<std::byte> sample_packet(PacketType type, std::size_t payload_bytes) {
  Header h;
  h.type = type;
  h.connection = 0xC0FFEE;
  h.sequence = 1ULL << 40;
  h.ack = 12345;
  h.window = 1 << 20;
  std::vector<std::byte> out(kAllHeaderBytes + payload_bytes);
  EXPECT_EQ(encode_headers(out.data(), sample_addressing(), h, payload_bytes), out.size());
  for (std::size_t i = 0; i < payload_bytes; ++i) out[kAllHeaderBytes + i] = static_cast<std::byte>(i * 7);
  return out;
}

TEST(DpdkWire, ADataPacketDecodesToEveryFieldItWasEncodedWith) {
  std::vector<std::byte> bytes = sample_packet(PacketType::kData, 1000);
  Packet p;
  ASSERT_EQ(decode_packet(bytes, p), PacketError::kNone);
  EXPECT_EQ(p.header.type, PacketType::kData);
  EXPECT_EQ(p.header.connection, 0xC0FFEEu);
  EXPECT_EQ(p.header.sequence, 1ULL << 40);
  EXPECT_EQ(p.header.ack, 12345u);
  EXPECT_EQ(p.header.window, 1u << 20);
  EXPECT_EQ(p.addressing.source_mac, sample_addressing().source_mac);
  EXPECT_EQ(p.addressing.destination_ip, 0x0A00'0002u);
  EXPECT_EQ(p.addressing.destination_port, 20001);
  ASSERT_EQ(p.payload.size(), 1000u);
  EXPECT_EQ(p.payload[999], static_cast<std::byte>(999 * 7));
  // Ethernet padding after a short frame is not payload.
  std::vector<std::byte> ack = sample_packet(PacketType::kAck, 0);
  ack.resize(std::max<std::size_t>(ack.size(), kMinEthernetFrameBytes) + 4);
  ASSERT_EQ(decode_packet(ack, p), PacketError::kNone);
  EXPECT_TRUE(p.payload.empty());
}

TEST(DpdkWire, EachMalformationIsRefusedWithItsName) {
  struct Case {
    std::size_t offset;
    uint8_t value;
    PacketError error;
  };
  const std::size_t ip = kEthernetBytes, udp = ip + kIpv4Bytes, fjord = udp + kUdpBytes;
  const Case cases[] = {
      {12, 0x86, PacketError::kNotIpv4},
      {ip, 0x46, PacketError::kBadIpHeader},
      {ip + 6, 0x20, PacketError::kBadIpHeader},
      {ip + 8, 1, PacketError::kBadIpChecksum},
      {udp + 5, 0, PacketError::kBadUdpLength},
      {fjord, 0, PacketError::kBadMagic},
      {fjord + 4, 9, PacketError::kBadVersion},
      {fjord + 5, 0, PacketError::kBadType},
      {fjord + 5, 8, PacketError::kBadType},
      {fjord + 6, 2, PacketError::kBadFlags},
      {fjord + 7, 1, PacketError::kReservedNonZero},
      {fjord + 12, 5, PacketError::kBadPayloadLength},
  };
  for (const Case& c : cases) {
    std::vector<std::byte> bytes = sample_packet(PacketType::kData, 100);
    bytes[c.offset] = std::byte{c.value};
    Packet p;
    EXPECT_EQ(decode_packet(bytes, p), c.error) << "byte " << c.offset << " = " << int{c.value};
    EXPECT_STRNE(packet_error_name(c.error), "?");
  }
  std::vector<std::byte> zero_connection = sample_packet(PacketType::kAck, 0);
  std::memset(zero_connection.data() + fjord + 8, 0, 4);
  Packet p;
  EXPECT_EQ(decode_packet(zero_connection, p), PacketError::kZeroConnection);
  std::vector<std::byte> ack_with_payload = sample_packet(PacketType::kData, 8);
  ack_with_payload[fjord + 5] = static_cast<std::byte>(PacketType::kAck);
  EXPECT_EQ(decode_packet(ack_with_payload, p), PacketError::kBadPayloadLength);
  const std::vector<std::byte> whole = sample_packet(PacketType::kData, 8);
  EXPECT_EQ(decode_packet(std::span(whole).first(kAllHeaderBytes - 1), p), PacketError::kTooShort);
}

TEST(DpdkWire, MacAndIpv4TextRoundTripAndRejectsOthers) {
  ASSERT_TRUE(parse_mac("02:00:0a:ff:10:01"));
  EXPECT_EQ(format_mac(*parse_mac("02:00:0a:ff:10:01")), "02:00:0a:ff:10:01");
  EXPECT_FALSE(parse_mac("02:00:0a:ff:10"));
  EXPECT_FALSE(parse_mac("02-00-0a-ff-10-01"));
  EXPECT_FALSE(parse_mac("02:00:0a:ff:10:0g"));
  ASSERT_TRUE(parse_ipv4("10.1.2.254"));
  EXPECT_EQ(format_ipv4(*parse_ipv4("10.1.2.254")), "10.1.2.254");
  EXPECT_FALSE(parse_ipv4("10.1.2"));
  EXPECT_FALSE(parse_ipv4("10.1.2.256"));
  EXPECT_FALSE(parse_ipv4("10.1.2.3.4"));
  EXPECT_FALSE(parse_ipv4("host.example"));
}

// Loads `text` as a cluster file: the status, with every error in it.
Status load(const std::string& text) {
  auto file = config::parse_text(text, "cluster.ini");
  if (!file) return file.status();
  auto table = transport::load_link_table(*file, tools::builtin_registry());
  return table ? Status::ok() : table.status();
}

TEST(DpdkConfig, ABadSectionIsAnErrorNamingTheFileLineAndKey) {
  const std::string base = "[dpdk]\nNodeId1=1\nNodeId2=2\nDevice1=net_ring0\nDevice2=net_ring0\n";
  EXPECT_TRUE(load(base + "IpAddress1=10.0.0.1\nIpAddress2=10.0.0.2\n")) << "a good section";
  struct Case {
    std::string lines;
    std::string expected;
  };
  const Case cases[] = {
      {"IpAddress1=10.0.0.300\nIpAddress2=10.0.0.2\n", "IpAddress1=10.0.0.300 (cluster.ini:6) is not an IPv4 address"},
      {"IpAddress1=10.0.0.1\nIpAddress2=10.0.0.2\nMac2=02:00:00\n", "Mac2=02:00:00 (cluster.ini:8) is not a MAC"},
      {"IpAddress1=10.0.0.1\nIpAddress2=10.0.0.1\nUdpPort1=7\nUdpPort2=7\n", "both ends use UDP port 7"},
      {"IpAddress1=10.0.0.1\nIpAddress2=10.0.0.2\nMtu=600\n", "Mtu"},
      {"IpAddress1=10.0.0.1\nIpAddress2=10.0.0.2\nLinkTimeout=10\n", "LinkTimeout"},
  };
  for (const Case& c : cases) {
    const Status s = load(base + c.lines);
    ASSERT_FALSE(s) << c.lines;
    EXPECT_NE(s.message().find(c.expected), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("cluster.ini:"), std::string::npos) << s.message();
  }
}

// What only set-up needs (a device, an address HostName does not give) may
// be left out of the file; setting the link up then says what is missing,
// naming the link's section.
TEST(DpdkConfig, ASectionWithoutADeviceOrAddressLoadsAndItsSetUpSaysWhatIsMissing) {
  struct Case {
    std::string lines;
    std::string expected;
  };
  const Case cases[] = {
      {"IpAddress1=10.0.0.1\nIpAddress2=10.0.0.2\n", "dpdk link 1-2 (cluster.ini:1): Device1 is not set"},
      {"Device1=net_ring0\nDevice2=net_ring0\nIpAddress2=10.0.0.2\n",
       "dpdk link 1-2 (cluster.ini:1): IpAddress1 is not set and HostName1='localhost' is not an IPv4 address"},
  };
  for (const Case& c : cases) {
    auto file = config::parse_text("[dpdk]\nNodeId1=1\nNodeId2=2\n" + c.lines, "cluster.ini");
    ASSERT_TRUE(file) << file.status().to_string();
    auto table = transport::load_link_table(*file, tools::builtin_registry());
    ASSERT_TRUE(table) << table.status().to_string();
    transport::TransporterFactory* factory = tools::builtin_registry().find("dpdk");
    auto listener = factory->listen(1, *table);
    ASSERT_FALSE(listener);
    EXPECT_NE(listener.status().message().find(c.expected), std::string::npos) << listener.status().message();
    auto connected = factory->connect(2, *table->find(1, 2), 0);
    ASSERT_FALSE(connected);
    EXPECT_NE(connected.status().message().find(c.expected), std::string::npos) << connected.status().message();
  }
}

}  // namespace
}  // namespace fjord::dpdk
