// A DPDK link between two processes over memif, the driver a lab without
// NICs uses between two processes: this process is node 1 (memif server),
// contract_peer is node 2 (memif client) and streams sequenced frames;
// every frame arrives once and in order, and when the peer is killed the
// link goes down with a reason within LinkTimeout. Each process starts its
// own EAL (no huge pages, its own file prefix); the memif control socket
// is abstract, so nothing is left on disk.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "fjord/base/clock.h"
#include "link_harness.h"

extern char** environ;

namespace fjord::test {
namespace {

constexpr uint64_t kSecond = 1'000'000'000ULL;

// The child process, killed (if still running) when the test ends.
class Child {
 public:
  ~Child() { kill_now(); }
  bool start(const char* program, const std::string& config_path) {
    const char* argv[] = {program, "--type", "dpdk", "--config", config_path.c_str(), nullptr};
    return ::posix_spawn(&pid_, program, nullptr, nullptr, const_cast<char* const*>(argv), environ) == 0;
  }
  // SIGKILL; true if it was still running.
  bool kill_now() {
    if (pid_ <= 0) return false;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  }

 private:
  pid_t pid_ = -1;
};

// Removes the file when the test ends, however it ends.
struct RemoveFile {
  std::string path;
  ~RemoveFile() { std::remove(path.c_str()); }
};

std::string memif_section() {
  const std::string socket = "/fjord-memif-test-" + std::to_string(::getpid());
  return "[dpdk]\nNodeId1=1\nNodeId2=2\nNodeIdServer=1\n"
         "Device1=net_memif0,role=server,id=0,socket=" +
         socket +
         "\n"
         "Device2=net_memif0,role=client,id=0,socket=" +
         socket +
         "\n"
         "IpAddress1=10.0.0.1\nIpAddress2=10.0.0.2\nUdpPort1=21000\nUdpPort2=21001\nLinkTimeout=1000\n";
}

TEST(DpdkMemif, TwoProcessesStreamInOrderAndAKilledPeerIsSeenDown) {
  transport::TransporterFactory* factory = test_registry().find("dpdk");
  ASSERT_NE(factory, nullptr);
  if (Status s = factory->probe(); !s) GTEST_SKIP() << "the EAL cannot start here: " << s.message();
  const char* peer = ::getenv("FJORD_CONTRACT_PEER");
  ASSERT_NE(peer, nullptr) << "FJORD_CONTRACT_PEER must name the contract_peer program (meson sets it)";
  const std::string text = memif_section();
  auto table = load_links(text);
  ASSERT_TRUE(table) << table.status().to_string();
  const RemoveFile config{::testing::TempDir() + "dpdk_memif_" + std::to_string(::getpid()) + ".ini"};
  std::ofstream(config.path) << text;
  auto listener = factory->listen(1, *table);
  ASSERT_TRUE(listener) << listener.status().to_string();
  Child child;
  ASSERT_TRUE(child.start(peer, config.path));
  auto accepted = (*listener)->accept(monotonic_ns() + 30 * kSecond);
  ASSERT_TRUE(accepted) << accepted.status().to_string();
  transport::Transporter& link = **accepted;
  uint64_t next = 0;
  ASSERT_EQ(receive_sequenced(link, &next, 3000, 30 * kSecond), "");
  EXPECT_TRUE(child.kill_now()) << "the peer exited before it was killed";
  // What the peer sent before it died arrives intact and in order; then
  // the link is down, with LinkTimeout's reason.
  const uint64_t deadline = monotonic_ns() + 20 * kSecond;
  while (link.is_up() || !link.receive().bytes.empty()) {
    ASSERT_LT(monotonic_ns(), deadline) << "the dead peer was not noticed";
    transport::ReceiveBatch batch = link.receive();
    frame::FrameCursor cursor(batch.bytes);
    frame::SignalView view;
    while (cursor.next(view)) {
      ASSERT_EQ(check_sequenced(view, next), "");
      ++next;
    }
    link.release(batch.bytes.size());
    if (batch.bytes.empty()) (void)link.wait_for_receive(100'000'000, 0);
  }
  EXPECT_GE(next, 3000u);
  EXPECT_NE(link.down_reason().message().find("node 2"), std::string::npos) << link.down_reason().message();
  EXPECT_NE(link.down_reason().message().find("LinkTimeout"), std::string::npos) << link.down_reason().message();
}

}  // namespace
}  // namespace fjord::test
