// A DPDK link over af_packet, the kernel path through which a lab's NIC
// would be seen, across a veth pair in a network namespace of this test's
// own: node 1 on one end of the pair, node 2 on the other, both in this
// process. Creating the namespace needs root; without it the test skips
// with the reason. The pair lives in the namespace, which the kernel
// removes with this process, so nothing is left behind whatever happens.
#include <gtest/gtest.h>
#include <sched.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "fjord/base/clock.h"
#include "link_harness.h"

extern char** environ;

namespace fjord::test {
namespace {

constexpr uint64_t kSecond = 1'000'000'000ULL;

// Runs `ip ARGS...`; its exit status, or -1 if it could not start.
int run_ip(std::vector<std::string> args) {
  args.insert(args.begin(), "ip");
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (::posix_spawnp(&pid, "ip", nullptr, nullptr, argv.data(), environ) != 0) return -1;
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Both directions, alternating: `count` frames each way, checked in order.
void exchange(transport::Transporter& a, transport::Transporter& b, uint64_t count) {
  uint64_t sent = 0, received = 0;
  const uint64_t deadline = monotonic_ns() + 60 * kSecond;
  while (received < count) {
    while (sent < count && send_sequenced(a, sent, mixed_payload_bytes(sent) % 3000)) ++sent;
    ASSERT_NE(a.flush(), transport::FlushStatus::kDown) << a.down_reason().to_string();
    ASSERT_EQ(receive_sequenced(b, &received, std::min<uint64_t>(sent - received, 64), 10 * kSecond), "");
    ASSERT_LT(monotonic_ns(), deadline) << "stalled at " << received << " of " << count;
  }
}

TEST(DpdkAfPacket, ALinkAcrossAVethPairCarriesFramesInOrderBothWays) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create a network namespace and a veth pair";
  // This thread, and the threads it starts (the EAL's, the connecting
  // side), see only the new namespace.
  if (::unshare(CLONE_NEWNET) != 0) GTEST_SKIP() << "unshare(CLONE_NEWNET): " << std::strerror(errno);
  if (run_ip({"link", "add", "fjord-v0", "type", "veth", "peer", "name", "fjord-v1"}) != 0)
    GTEST_SKIP() << "'ip link add ... type veth' failed (is iproute2 installed, and veth in the kernel?)";
  ASSERT_EQ(run_ip({"link", "set", "fjord-v0", "up"}), 0);
  ASSERT_EQ(run_ip({"link", "set", "fjord-v1", "up"}), 0);
  transport::TransporterFactory* factory = test_registry().find("dpdk");
  ASSERT_NE(factory, nullptr);
  if (Status s = factory->probe(); !s) GTEST_SKIP() << "the EAL cannot start here: " << s.message();
  auto table = load_links(
      "[dpdk]\nNodeId1=1\nNodeId2=2\nNodeIdServer=1\nDevice1=net_af_packet0,iface=fjord-v0\n"
      "Device2=net_af_packet1,iface=fjord-v1\nIpAddress1=10.0.0.1\nIpAddress2=10.0.0.2\nUdpPort1=22000\n"
      "UdpPort2=22001\nLinkTimeout=2000\n");
  ASSERT_TRUE(table) << table.status().to_string();
  auto pair = connect_pair(*table, 1, *table->find(1, 2), 2);
  ASSERT_TRUE(pair) << pair.status().to_string();
  exchange(*pair->client, *pair->server, 3000);
  if (HasFatalFailure()) return;
  exchange(*pair->server, *pair->client, 3000);
  if (HasFatalFailure()) return;
  // A close crosses the pair too.
  pair->client->close("the test is done");
  const uint64_t deadline = monotonic_ns() + 10 * kSecond;
  while (pair->server->is_up() && monotonic_ns() < deadline) (void)pair->server->wait_for_receive(50'000'000, 0);
  ASSERT_FALSE(pair->server->is_up());
  EXPECT_NE(pair->server->down_reason().message().find("the test is done"), std::string::npos)
      << pair->server->down_reason().message();
}

}  // namespace
}  // namespace fjord::test
