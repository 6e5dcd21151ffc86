// Handshake messages: round trips, rejection reasons, and malformed input.
#include "fjord/transport/handshake.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "key_files.h"
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

// ---- authentication -------------------------------------------------------

const std::string kKey(64, 'k');

TEST(HandshakeTest, GreetingAndProofsRoundTrip) {
  AuthNonce nonce{};
  nonce[0] = std::byte{7};
  nonce[31] = std::byte{9};
  const auto greeting = encode_greeting(nonce);
  EXPECT_EQ(greeting.size(), kHandshakeGreetingBytes);
  EXPECT_EQ(*handshake_message_bytes(greeting, kHandshakeGreetingMagic), greeting.size());
  auto back = decode_greeting(greeting);
  ASSERT_TRUE(back) << back.status().to_string();
  EXPECT_EQ(*back, nonce);
  for (std::size_t cut = 0; cut < greeting.size(); ++cut) EXPECT_FALSE(decode_greeting(std::span(greeting).first(cut)));

  HandshakeRequest q{2, 1, "tcp", {std::byte{5}}, true, true, ClientProof{nonce, {}}};
  q.proof->mac[3] = std::byte{0xaa};
  auto request = decode_request(encode_request(q));
  ASSERT_TRUE(request) << request.status().to_string();
  EXPECT_TRUE(request->has_key);
  EXPECT_TRUE(request->checksum);
  ASSERT_TRUE(request->proof.has_value());
  EXPECT_EQ(request->proof->nonce, nonce);
  EXPECT_EQ(request->proof->mac, q.proof->mac);
  EXPECT_EQ(request->extra, q.extra);
  q.proof.reset();  // a key holder whose proof travels later (RDMA's hello)
  request = decode_request(encode_request(q));
  ASSERT_TRUE(request) << request.status().to_string();
  EXPECT_TRUE(request->has_key);
  EXPECT_FALSE(request->proof.has_value());

  HandshakeReply p{true, StatusCode::kOk, "", {std::byte{1}}, AuthMac{}};
  p.proof->at(0) = std::byte{0x55};
  auto reply = decode_reply(encode_reply(p));
  ASSERT_TRUE(reply) << reply.status().to_string();
  ASSERT_TRUE(reply->proof.has_value());
  EXPECT_EQ(*reply->proof, *p.proof);
}

TEST(HandshakeTest, MalformedProofsAreRefused) {
  // Request: the proof length byte follows the flags byte.
  const std::size_t flags_at = kHandshakePrefixBytes + 2 + 2 + 1 + 3;
  auto keyless = encode_request({2, 1, "tcp", {}});
  auto bad_length = keyless;
  bad_length[flags_at] = std::byte{kHandshakeKeyFlag};
  bad_length[flags_at + 1] = std::byte{12};
  EXPECT_FALSE(decode_request(bad_length));
  HandshakeRequest proved{2, 1, "tcp", {}, false, true, ClientProof{}};
  auto without_flag = encode_request(proved);
  without_flag[flags_at] = std::byte{0};
  EXPECT_EQ(decode_request(without_flag).status().message(),
            "malformed handshake: request proof of 64 bytes from a sender without a key");
  auto bytes = encode_request(proved);
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) EXPECT_FALSE(decode_request(std::span(bytes).first(cut))) << cut;
  // Reply: a refusal carries no proof.
  HandshakeReply accepted{true, StatusCode::kOk, "", {}, AuthMac{}};
  auto refusal_with_proof = encode_reply(accepted);
  refusal_with_proof[kHandshakePrefixBytes] = std::byte{0};
  refusal_with_proof[kHandshakePrefixBytes + 1] = std::byte{static_cast<uint8_t>(StatusCode::kRejected)};
  EXPECT_EQ(decode_reply(refusal_with_proof).status().message(), "malformed handshake: reply proof of 32 bytes");
}

TEST(HandshakeTest, KeyFilesMustBePrivateRegularAndOfABoundedSize) {
  test::KeyFiles dir;
  const std::string good = dir.write("good.key", kKey + "\r\n");
  auto key = ClusterKey::load(good);
  ASSERT_TRUE(key) << key.status().to_string();
  EXPECT_EQ(key->path(), good);
  const auto refused = [](const std::string& path) { return ClusterKey::load(path).status().message(); };
  EXPECT_EQ(refused(dir.write("group.key", kKey, 0640)),
            "ClusterKeyFile " + dir.path() +
                "/group.key: has mode 0640, which lets group or others use it (chmod 600 "
                "it: the key is the cluster's secret)");
  EXPECT_NE(refused(dir.write("other.key", kKey, 0604)).find("has mode 0604"), std::string::npos);
  EXPECT_NE(refused(dir.write("exec.key", kKey, 0601)).find("has mode 0601"), std::string::npos);
  EXPECT_EQ(refused(dir.write("short.key", std::string(31, 'k') + "\n")),
            "ClusterKeyFile " + dir.path() +
                "/short.key: holds 31 bytes; a cluster key needs at least 32 (for "
                "example `openssl rand -hex 32 > " +
                dir.path() + "/short.key`)");
  EXPECT_NE(refused(dir.write("long.key", std::string(kClusterKeyMaxBytes + 1, 'k'))).find("is 4097 bytes"),
            std::string::npos);
  EXPECT_EQ(refused(dir.path()), "ClusterKeyFile " + dir.path() + ": is not a regular file");
  EXPECT_NE(refused("/dev/zero").find("is not a regular file"), std::string::npos);
  EXPECT_NE(refused(dir.path() + "/missing.key").find("missing.key: cannot be opened: No such file"),
            std::string::npos);
  if (::geteuid() != 0) {
    EXPECT_NE(refused("/etc/hostname").find("is owned by uid 0 but this process runs as uid"), std::string::npos);
  }
}

// The proofs bind the key, the role, both nonces and the link: a proof made
// for anything else does not pass, and the accepting side's proof checks
// out at the connecting side.
TEST(HandshakeTest, ProofsBindKeyRoleNoncesAndLink) {
  test::KeyFiles dir;
  const std::string path = dir.write("a.key", kKey);
  const std::string other_path = dir.write("b.key", std::string(64, 'x'));
  LinkConfig link = table("[tcp]\nNodeId1=1\nNodeId2=2\n").all().front();
  link.key_file1 = path;
  link.key_file2 = path;
  auto key = ClusterKey::load(path);
  auto other = ClusterKey::load(other_path);
  ASSERT_TRUE(key && other);
  const AuthNonce greeting = random_nonce();
  HandshakeRequest q{2, 1, "tcp", {}};
  add_proof(q, *key, greeting);
  auto server_proof = check_client_proof(q, q.proof, greeting, link, 1);
  ASSERT_TRUE(server_proof) << server_proof.status().to_string();
  ASSERT_TRUE(server_proof->has_value());
  EXPECT_TRUE(check_server_proof(q, *server_proof, &*key, greeting));
  EXPECT_EQ(check_server_proof(q, *server_proof, &*other, greeting).code(), StatusCode::kRejected);
  EXPECT_FALSE(check_server_proof(q, std::nullopt, &*key, greeting));
  // Another greeting (a replayed request), another link, the server's proof
  // offered as the client's, another key: all refused.
  EXPECT_FALSE(check_client_proof(q, q.proof, random_nonce(), link, 1));
  HandshakeRequest moved = q;
  moved.from_node = 3;
  LinkConfig link13 = link;
  link13.node2 = 3;
  EXPECT_FALSE(check_client_proof(moved, moved.proof, greeting, link13, 1));
  ClientProof reflected{q.proof->nonce, **server_proof};
  EXPECT_FALSE(check_client_proof(q, reflected, greeting, link, 1));
  HandshakeRequest wrong{2, 1, "tcp", {}};
  add_proof(wrong, *other, greeting);
  EXPECT_NE(check_client_proof(wrong, wrong.proof, greeting, link, 1).status().message().find("different keys"),
            std::string::npos);
  // A link without keys on either end needs no proof and gives none.
  LinkConfig open = link;
  open.key_file1.clear();
  open.key_file2.clear();
  auto none = check_client_proof({2, 1, "tcp", {}}, std::nullopt, greeting, open, 1);
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->has_value());
}

// Two nonces from the kernel's generator are not the same.
TEST(HandshakeTest, NoncesAreFresh) { EXPECT_NE(random_nonce(), random_nonce()); }

}  // namespace
}  // namespace fjord::transport
