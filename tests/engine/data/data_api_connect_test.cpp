// Connecting to a data node: API node ids taken and freed, silent peers on
// the node's port, and the errors of a bad configuration.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "builtin_transporters.h"
#include "data_api_fixture.h"
#include "fjord/base/clock.h"
#include "fjord/base/fd.h"
#include "fjord/transport/handshake.h"

namespace fjord::test {
namespace {

using api::ExecType;
using api::Row;
using engine::protocol::ErrorCode;

// A raw TCP connection to the data node's port (no handshake sent).
UniqueFd connect_to_node_port(const TestCluster& cluster) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(cluster.server_port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
  return fd;
}

// A peer that connects to the node's TCP port and says nothing (a port
// scan, a stuck process) holds up neither API nodes connecting nor the
// control socket.
TEST_F(DataApiTest, ASilentPeerOnTheNodesPortHoldsUpNoConnection) {
  std::vector<UniqueFd> silent(3);
  for (UniqueFd& fd : silent) fd = connect_to_node_port(*cluster_);
  ASSERT_FALSE(HasFailure());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the node has taken them
  const uint64_t t0 = monotonic_ns();
  auto other = cluster_->connect(51);
  ASSERT_TRUE(other) << other.status().to_string();
  auto pong = engine::control_request(cluster_->node().control_socket(), "ping", 2000);
  ASSERT_TRUE(pong) << pong.status().to_string();
  EXPECT_EQ(*pong, "pong 1\n");
  EXPECT_LT(monotonic_ns() - t0, 3'000'000'000ULL) << "the silent peers held up the connection thread";
  auto& tx = (*other)->start_transaction();
  tx.read(*table_, key_of(424242));
  EXPECT_EQ(tx.execute(ExecType::kCommit).code(), StatusCode::kRejected);
  EXPECT_EQ(tx.error(), ErrorCode::kNoSuchRow);  // the new link works
  tx.close();
}

// A silent peer is closed once its set-up budget (10 s) has passed even if
// nothing else ever connects: the listener is looked at once a second, not
// only when its fd wakes the node (each such peer holds a descriptor).
TEST_F(DataApiTest, ASilentPeerOnAnIdleListenerIsClosedAfterItsSetUpBudget) {
  const uint64_t t0 = monotonic_ns();
  const UniqueFd fd = connect_to_node_port(*cluster_);
  ASSERT_FALSE(HasFailure());
  const timeval wait{transport::kSetupBudgetNs / 1'000'000'000 + 5, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  // The listener's greeting (whole, and nothing after it), then the end.
  std::byte bytes[transport::kHandshakeGreetingBytes + 1];
  ssize_t got = ::recv(fd.get(), bytes, sizeof bytes, MSG_WAITALL);
  if (got == static_cast<ssize_t>(transport::kHandshakeGreetingBytes)) got = ::recv(fd.get(), bytes, 1, 0);
  EXPECT_TRUE(got == 0 || (got < 0 && errno == ECONNRESET))
      << "the node left the silent peer's connection open (" << std::strerror(errno) << ")";
  const uint64_t waited = monotonic_ns() - t0;
  EXPECT_GE(waited, transport::kSetupBudgetNs) << "closed before its budget";
  EXPECT_LT(waited, transport::kSetupBudgetNs + 3'000'000'000ULL);
  // The node serves as before.
  auto other = cluster_->connect(51);
  ASSERT_TRUE(other) << other.status().to_string();
  EXPECT_EQ(*engine::control_request(cluster_->node().control_socket(), "ping", 2000), "pong 1\n");
}

// A program that closes its connection and at once connects again with the
// same API node id (a restart) gets in, though the data node may not yet
// have let the old link go; and a second connection while the first is
// still there is refused naming the likely cause, not reported as a
// registration that timed out.
TEST_F(DataApiTest, AnApiNodeIdIsFreeAgainOnceItsConnectionClosesAndTakenUntilThen) {
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(1, 1)); }));
  for (int round = 0; round < 30; ++round) {
    auto again = cluster_->connect(51);
    ASSERT_TRUE(again) << "round " << round << ": " << again.status().to_string();
    auto t = (*again)->get_table("accounts");
    ASSERT_TRUE(t) << t.status().to_string();
    api::Transaction& tx = (*again)->start_transaction();
    tx.update(**t, key_of(1), Row().set(kBalance, int64_t{round}));
    ASSERT_TRUE(tx.execute(ExecType::kNoCommit));  // goes away holding the lock
  }
  api::ConnectOptions twice = cluster_->connect_options(50);  // conn_'s id
  twice.connect_timeout_ms = 500;
  auto second = api::Connection::connect(twice);
  ASSERT_FALSE(second);
  EXPECT_NE(second.status().message().find("already connected"), std::string::npos) << second.status().to_string();
  EXPECT_NE(second.status().code(), StatusCode::kTimeout) << second.status().to_string();
  EXPECT_EQ(balance_of(1), 1) << "the locks of the closed connections were not released";
}

// An API node id that another live connection holds is refused once the
// node has dropped new links from it for a short grace (2 s), which covers
// a previous connection the node has yet to let go, instead of after the
// whole connect timeout; the id's holder goes on undisturbed.
TEST_F(DataApiTest, AnApiNodeIdHeldByALiveConnectionIsRefusedAfterAShortGraceNotTheConnectTimeout) {
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(1, 1)); }));
  api::ConnectOptions twice = cluster_->connect_options(50);  // conn_'s id
  twice.connect_timeout_ms = 60000;
  const uint64_t started = monotonic_ns();
  auto second = api::Connection::connect(twice);
  const uint64_t took_ms = (monotonic_ns() - started) / 1'000'000;
  ASSERT_FALSE(second);
  EXPECT_EQ(second.status().code(), StatusCode::kAlreadyExists) << second.status().to_string();
  EXPECT_NE(second.status().message().find("API node 50 is already connected to data node 1"), std::string::npos)
      << second.status().to_string();
  EXPECT_GE(took_ms, 2000u) << "refused before the grace for a previous connection to go";
  EXPECT_LT(took_ms, 30000u) << "waited for the connect timeout instead of the grace";
  EXPECT_EQ(balance_of(1), 1);  // the holder's connection still works
}

TEST(DataNodeConfigTest, ConfigErrorsAreClear) {
  engine::DataNodeOptions d;
  d.registry = nullptr;
  EXPECT_FALSE(engine::DataNode::create(d));
  d.registry = &tools::builtin_registry();
  d.config_text = "[ndbd]\nNodeId=1\n[api]\nNodeId=50\n";
  d.node_id = 2;
  EXPECT_EQ(engine::DataNode::create(d).status().message(),
            "node id 2 is not in <config>: no [ndbd] has NodeId=2 (its data nodes: 1)");
  d.node_id = 50;
  EXPECT_EQ(engine::DataNode::create(d).status().message(),
            "node 50 is an api node in <config>, not a data node ([ndbd])");
  d.node_id = 1;
  d.config_text = "[ndbd]\nNodeId=1\nDataMemory=10\n";
  EXPECT_EQ(engine::DataNode::create(d).status().message(),
            "<config>:3: [ndbd] DataMemory: value 10 out of range; accepted 1M..1024G bytes");
  d.config_text = "[ndbd]\nNodeId=1\nThreadConfig=ldm={count=5}\n";
  EXPECT_NE(engine::DataNode::create(d).status().message().find("5 ldm threads in total"), std::string::npos);
  d.config_text = "[ndbd]\nNodeId=1\nNoOfReplicas=2\n";
  EXPECT_EQ(engine::DataNode::create(d).status().message(),
            "<config>:3: [ndbd] NoOfReplicas=2 is more than the 1 data node (1) of <config>: a node group holds "
            "NoOfReplicas data nodes");
  d.config_text = "[ndbd]\nNodeId=1\n[api]\nNodeId=1\n";
  EXPECT_NE(engine::DataNode::create(d).status().message().find("NodeId=1 is already used"), std::string::npos);
  d.config_text = "[ndbd]\nNodeId=1\n[apii]\nNodeId=2\n";
  EXPECT_NE(engine::DataNode::create(d).status().message().find("unknown section [apii]"), std::string::npos);
}

// A data node runs only as its cluster's one data node: a config of several
// [ndbd] sections is refused by every one of them, naming the data nodes;
// one [ndbd] with NoOfReplicas=1 loads as before.
TEST(DataNodeConfigTest, AConfigOfSeveralDataNodesIsRefusedNamingThem) {
  engine::DataNodeOptions d;
  d.registry = &tools::builtin_registry();
  d.config_text = "[ndbd default]\nNoOfReplicas=2\n[ndbd]\nNodeId=1\n[ndbd]\nNodeId=2\n[api]\nNodeId=50\n";
  for (NodeId self : {1, 2}) {
    d.node_id = self;
    const Status s = engine::DataNode::create(d).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), "node " + std::to_string(self) +
                               " does not start: <config> names 2 data nodes (1, 2), and a data node runs only as its "
                               "cluster's one data node (no node-to-node start or replication); give it a config with "
                               "one [ndbd]");
  }
  d.config_text = "[ndbd]\nNodeId=3\n[ndbd]\nNodeId=1\n[ndbd]\nNodeId=7\n";
  d.node_id = 1;
  EXPECT_NE(engine::DataNode::create(d).status().message().find("names 3 data nodes (3, 1, 7)"), std::string::npos);
  d.node_id = 4;  // not configured: the error names the data nodes there are
  EXPECT_EQ(engine::DataNode::create(d).status().message(),
            "node id 4 is not in <config>: no [ndbd] has NodeId=4 (its data nodes: 3, 1, 7)");
  d.config_text = "[ndbd default]\nNoOfReplicas=1\n[ndbd]\nNodeId=1\n[api]\nNodeId=50\n";
  d.node_id = 1;
  d.control_socket = "@fjord-test-one-data-node-" + std::to_string(::getpid());
  auto one = engine::DataNode::create(d);
  ASSERT_TRUE(one) << one.status().to_string();
  EXPECT_EQ((*one)->config().layout.node_groups, (std::vector<std::vector<NodeId>>{{1}}));
}

}  // namespace
}  // namespace fjord::test
