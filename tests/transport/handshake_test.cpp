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
  EXPECT_EQ(*handshake_message_bytes(bytes, kHandshakeRequestMagic), bytes.size());

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

}  // namespace
}  // namespace fjord::transport
