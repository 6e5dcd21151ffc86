// Handshake messages: round trips, rejection reasons, and malformed input.
#include "fjord/transport/handshake.h"

#include <gtest/gtest.h>

#include "link_harness.h"

namespace fjord::transport {
namespace {

LinkTable table(const std::string& text) {
  auto file = config::parse_text(text, "cluster.ini");
  EXPECT_TRUE(file);
  auto t = load_link_table(*file, test::test_registry());
  EXPECT_TRUE(t) << t.status().to_string();
  return *t;
}

TEST(HandshakeTest, RequestAndReplyRoundTrip) {
  HandshakeRequest q{7, 1, "tcp", {std::byte{1}, std::byte{2}}};
  auto bytes = encode_request(q);
  auto back = decode_request(bytes);
  ASSERT_TRUE(back) << back.status().to_string();
  EXPECT_EQ(back->from_node, 7);
  EXPECT_EQ(back->to_node, 1);
  EXPECT_EQ(back->type, "tcp");
  EXPECT_EQ(back->extra, q.extra);
  EXPECT_FALSE(back->checksum);
  EXPECT_EQ(*handshake_message_bytes(bytes, kHandshakeRequestMagic), bytes.size());
  q.checksum = true;
  auto with_checksum = decode_request(encode_request(q));
  ASSERT_TRUE(with_checksum) << with_checksum.status().to_string();
  EXPECT_TRUE(with_checksum->checksum);
  EXPECT_EQ(with_checksum->extra, q.extra);

  HandshakeReply p{false, StatusCode::kRejected, "no such link", {}};
  auto pb = decode_reply(encode_reply(p));
  ASSERT_TRUE(pb);
  EXPECT_FALSE(pb->accepted);
  EXPECT_EQ(pb->reason, "no such link");
  EXPECT_EQ(pb->code, StatusCode::kRejected);
}

TEST(HandshakeTest, MalformedMessagesAreRefused) {
  auto bytes = encode_request({2, 1, "tcp", {}});
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) EXPECT_FALSE(decode_request(std::span(bytes).first(cut))) << cut;
  auto bad_magic = bytes;
  bad_magic[0] = std::byte{0};
  EXPECT_NE(decode_request(bad_magic).status().message().find("bad magic"), std::string::npos);
  auto bad_version = bytes;
  bad_version[4] = std::byte{9};
  EXPECT_EQ(decode_request(bad_version).status().code(), StatusCode::kRejected);
  auto bad_node = encode_request({0, 1, "tcp", {}});
  EXPECT_NE(decode_request(bad_node).status().message().find("node id out of range"), std::string::npos);
  auto bad_type = encode_request({2, 1, "TCP", {}});
  EXPECT_FALSE(decode_request(bad_type));
  auto trailing = bytes;
  trailing.push_back(std::byte{0});
  EXPECT_FALSE(decode_request(trailing));  // total_bytes disagrees
  // The flags byte follows the type name ("tcp"): a bit not defined is refused.
  auto bad_flags = bytes;
  const std::size_t flags_at = kHandshakePrefixBytes + 2 + 2 + 1 + 3;
  ASSERT_EQ(bad_flags[flags_at], std::byte{0});
  bad_flags[flags_at] = std::byte{0x82};
  EXPECT_EQ(decode_request(bad_flags).status().message(), "malformed handshake: unknown request flags 130");
}

TEST(HandshakeTest, CheckRequestExplainsEveryRefusal) {
  const LinkTable links = table("[tcp]\nNodeId1=1\nNodeId2=2\n[dummy]\nNodeId1=1\nNodeId2=3\n");
  auto ok = check_request({2, 1, "tcp", {}}, 1, "tcp", links);
  ASSERT_TRUE(ok) << ok.status().to_string();
  EXPECT_EQ((*ok)->node2, 2);
  EXPECT_EQ(check_request({2, 4, "tcp", {}}, 1, "tcp", links).status().message(),
            "node 2 asked for node 4 but this is node 1");
  EXPECT_EQ(check_request({9, 1, "tcp", {}}, 1, "tcp", links).status().message(),
            "node 9 is not configured to connect to node 1 (no link section for 1-9)");
  EXPECT_EQ(check_request({3, 1, "tcp", {}}, 1, "tcp", links).status().message(),
            "Incompatible configuration: transporter type mismatch: node 3 asked for a tcp link on this tcp "
            "listener, but dummy link 1-3 (cluster.ini:4) is configured as dummy");
  EXPECT_EQ(check_request({1, 2, "tcp", {}}, 2, "tcp", links).status().message(),
            "node 1 connected to node 2 but tcp link 1-2 (cluster.ini:1) names node 1 as the server");
}

// Ends that disagree on Checksum cannot read each other's frames: the set-up
// is refused naming the setting and both values, whichever end has it on.
TEST(HandshakeTest, ACheckSumMismatchIsRefusedAtSetUpNamingBothValues) {
  const LinkTable plain = table("[tcp]\nNodeId1=1\nNodeId2=2\n");
  const LinkTable summed = table("[tcp]\nNodeId1=1\nNodeId2=2\nChecksum=1\n");
  EXPECT_TRUE(check_request({2, 1, "tcp", {}, false}, 1, "tcp", plain));
  EXPECT_TRUE(check_request({2, 1, "tcp", {}, true}, 1, "tcp", summed));
  const auto on_client = check_request({2, 1, "tcp", {}, true}, 1, "tcp", plain);
  ASSERT_FALSE(on_client);
  EXPECT_EQ(on_client.status().code(), StatusCode::kRejected);
  EXPECT_EQ(on_client.status().message(),
            "Incompatible configuration: Checksum mismatch: node 2 has Checksum=1 for this link, but tcp link 1-2 "
            "(cluster.ini:1) has Checksum=0 here (both ends must agree on whether frames carry checksums)");
  const auto on_server = check_request({2, 1, "tcp", {}, false}, 1, "tcp", summed);
  ASSERT_FALSE(on_server);
  EXPECT_NE(on_server.status().message().find("node 2 has Checksum=0 for this link, but tcp link 1-2 (cluster.ini:1) "
                                              "has Checksum=1 here"),
            std::string::npos)
      << on_server.status().message();
}

}  // namespace
}  // namespace fjord::transport
