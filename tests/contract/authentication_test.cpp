// Authenticated links on every transporter (docs/transport.md,
// "Authentication"): ends that hold the same cluster key connect and carry
// frames; a peer without the key, with another key, or with a key where the
// other end has none is refused at set-up with a reason naming what failed,
// on both sides, and no frame passes; a key file that is not private to its
// owner is refused naming the file and its mode.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "fjord/base/clock.h"
#include "fjord/transport/cluster_key.h"
#include "key_files.h"
#include "link_harness.h"

namespace fjord::test {
namespace {

constexpr uint64_t kSecond = 1'000'000'000ULL;

const std::string kKeyA = "3f9c1d7e5a2b8c4d6e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d\n";
const std::string kKeyB = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n";

class AuthenticationTest : public ::testing::TestWithParam<Medium> {
 protected:
  void SetUp() override {
    transport::TransporterFactory* factory = test_registry().find(GetParam().type);
    ASSERT_NE(factory, nullptr);
    if (Status probe = factory->probe(); !probe) GTEST_SKIP() << GetParam().type << " unavailable: " << probe.message();
    auto table = load_links(GetParam().section(1, 2, ""));
    ASSERT_TRUE(table) << table.status().to_string();
    link_ = *table->find(1, 2);
  }

  // Node 1 (the server) reads `server_key`, node 2 (the client) reads
  // `client_key`; "" = no ClusterKeyFile.
  Result<LinkPair> connect(const std::string& server_key, const std::string& client_key, Status* server_status) {
    transport::LinkConfig server_link = link_;
    server_link.key_file1 = server_key;
    transport::LinkConfig client_link = link_;
    client_link.key_file2 = client_key;
    return connect_pair(transport::LinkTable({server_link}), 1, client_link, 2, server_status);
  }

  KeyFiles keys_;
  transport::LinkConfig link_;
};

// A refused set-up leaves neither end a transporter, so nothing can pass;
// the listener goes on serving and a peer with the key then gets through.
void expect_refused(const Result<LinkPair>& client, const Status& server, const std::string& client_says,
                    const std::string& server_says) {
  ASSERT_FALSE(client.is_ok()) << "the set-up should have been refused";
  EXPECT_EQ(client.status().code(), StatusCode::kRejected) << client.status().to_string();
  EXPECT_NE(client.status().message().find(client_says), std::string::npos) << client.status().message();
  EXPECT_EQ(server.code(), StatusCode::kRejected) << server.to_string();
  EXPECT_NE(server.message().find(server_says), std::string::npos) << server.message();
}

void expect_carries_frames(LinkPair& pair) {
  ASSERT_TRUE(send_sequenced(*pair.client, 0, 100));
  ASSERT_TRUE(send_sequenced(*pair.server, 0, 200));
  uint64_t at_server = 0, at_client = 0;
  EXPECT_EQ(receive_sequenced(*pair.server, &at_server, 1, 10 * kSecond), "");
  EXPECT_EQ(receive_sequenced(*pair.client, &at_client, 1, 10 * kSecond), "");
}

TEST_P(AuthenticationTest, EndsWithTheSameKeyConnectAndCarryFrames) {
  const std::string key = keys_.write("cluster.key", kKeyA);
  const std::string copy = keys_.write("copy.key", kKeyA.substr(0, kKeyA.size() - 1));  // no line end: same key
  Status server;
  auto pair = connect(key, copy, &server);
  ASSERT_TRUE(pair) << pair.status().to_string();
  ASSERT_TRUE(server) << server.to_string();
  expect_carries_frames(*pair);
}

TEST_P(AuthenticationTest, APeerWithoutTheKeyIsRefusedOnBothSides) {
  const std::string key = keys_.write("cluster.key", kKeyA);
  Status server;
  auto refused = connect(key, "", &server);
  expect_refused(refused, server, "node 2 offered no proof of the cluster key, but node 1 requires one",
                 "node 2 offered no proof of the cluster key");
  Status again;
  auto pair = connect(key, key, &again);
  ASSERT_TRUE(pair) << pair.status().to_string();
  expect_carries_frames(*pair);
}

TEST_P(AuthenticationTest, APeerWithAnotherKeyIsRefusedOnBothSides) {
  const std::string key = keys_.write("cluster.key", kKeyA);
  const std::string other = keys_.write("other.key", kKeyB);
  Status server;
  auto refused = connect(key, other, &server);
  expect_refused(refused, server, "node 2's proof does not match the cluster key of node 1",
                 "the two nodes hold different keys");
}

TEST_P(AuthenticationTest, AKeyOnTheConnectingEndOnlyIsRefused) {
  const std::string key = keys_.write("cluster.key", kKeyA);
  Status server;
  auto refused = connect("", key, &server);
  expect_refused(refused, server, "node 2 holds a cluster key, but node 1 has no ClusterKeyFile",
                 "both ends of a link authenticate, or neither");
}

// The accepting end's key file lets others read it: its listener does not
// start, naming the file and the mode; and a key file that turns insecure
// while it listens makes it refuse every peer, telling the peer only that
// it cannot use its key, while its own status (and log) names the file.
TEST_P(AuthenticationTest, AnAcceptingEndWithAnInsecureKeyFileRefusesNamingTheFile) {
  const std::string key = keys_.write("cluster.key", kKeyA);
  transport::LinkConfig server_link = link_;
  server_link.key_file1 = keys_.write("readable.key", kKeyA, 0644);
  auto refused_start = test_registry().find(link_.type)->listen(1, transport::LinkTable({server_link}));
  ASSERT_FALSE(refused_start.is_ok());
  EXPECT_NE(
      refused_start.status().message().find("node 1: ClusterKeyFile " + server_link.key_file1 + ": has mode 0644"),
      std::string::npos)
      << refused_start.status().message();

  const std::string turns = keys_.write("turns.key", kKeyA);
  server_link.key_file1 = turns;
  const transport::LinkTable table({server_link});
  transport::TransporterFactory* factory = test_registry().find(link_.type);
  auto listener = factory->listen(1, table);
  ASSERT_TRUE(listener) << listener.status().to_string();
  ASSERT_EQ(::chmod(turns.c_str(), 0640), 0);
  transport::LinkConfig client_link = client_view(link_, **listener);
  client_link.key_file2 = key;
  Result<std::unique_ptr<transport::Transporter>> connected(Status(StatusCode::kInternal, "not run"));
  std::thread connector([&] { connected = factory->connect(2, client_link, monotonic_ns() + 10 * kSecond); });
  auto accepted = (*listener)->accept(monotonic_ns() + 10 * kSecond);
  connector.join();
  ASSERT_FALSE(accepted.is_ok());
  EXPECT_NE(accepted.status().message().find(turns + ": has mode 0640"), std::string::npos)
      << accepted.status().message();
  ASSERT_FALSE(connected.is_ok());
  EXPECT_EQ(connected.status().code(), StatusCode::kRejected) << connected.status().to_string();
  EXPECT_NE(connected.status().message().find("node 1 cannot use its cluster key"), std::string::npos)
      << connected.status().message();
  EXPECT_EQ(connected.status().message().find(turns), std::string::npos)
      << "the peer should not learn where the key file is: " << connected.status().message();
}

// The connecting end's own key file is checked before it dials: no
// connection attempt reaches the listener.
TEST_P(AuthenticationTest, AConnectingEndWithAnInsecureKeyFileDoesNotDial) {
  const std::string key = keys_.write("cluster.key", kKeyA);
  const std::string group_readable = keys_.write("group.key", kKeyA, 0640);
  transport::LinkConfig server_link = link_;
  server_link.key_file1 = key;
  const transport::LinkTable table({server_link});
  transport::TransporterFactory* factory = test_registry().find(link_.type);
  auto listener = factory->listen(1, table);
  ASSERT_TRUE(listener) << listener.status().to_string();
  transport::LinkConfig client_link = client_view(link_, **listener);
  client_link.key_file2 = group_readable;
  auto connected = factory->connect(2, client_link, monotonic_ns() + 10 * kSecond);
  ASSERT_FALSE(connected.is_ok());
  EXPECT_NE(connected.status().message().find("node 2: ClusterKeyFile " + group_readable + ": has mode 0640"),
            std::string::npos)
      << connected.status().message();
  auto accepted = (*listener)->accept(monotonic_ns() + kSecond / 5);
  ASSERT_FALSE(accepted.is_ok());
  EXPECT_EQ(accepted.status().code(), StatusCode::kTimeout) << accepted.status().to_string();
}

INSTANTIATE_TEST_SUITE_P(AllTransporters, AuthenticationTest, ::testing::ValuesIn(contract_media()),
                         [](const ::testing::TestParamInfo<Medium>& param) { return param.param.name(); });

}  // namespace
}  // namespace fjord::test
