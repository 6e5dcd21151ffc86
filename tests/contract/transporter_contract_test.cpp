// The transporter contract suite: every registered transporter runs every
// ContractTest here (docs/transport.md lists the guarantees). A medium that
// cannot run on this machine (no RDMA device) is skipped with the probe's
// reason. At the end, one TCP-only test of its rings (TcpRings) and one of
// the stream listeners (TCP, SHM) against silent peers, which use the same
// link harness.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "descriptors_used_up.h"
#include "fjord/base/clock.h"
#include "fjord/base/fd.h"
#include "fjord/base/unix_address.h"
#include "fjord/transport/handshake.h"
#include "link_harness.h"

extern char** environ;

namespace fjord::test {
namespace {

using transport::FlushStatus;
using transport::LinkState;
using transport::SendPressure;
using transport::WaitResult;

constexpr uint64_t kSecond = 1'000'000'000ULL;

class ContractTest : public ::testing::TestWithParam<Medium> {
 protected:
  void SetUp() override {
    transport::TransporterFactory* factory = test_registry().find(GetParam().type);
    ASSERT_NE(factory, nullptr);
    if (Status probe = factory->probe(); !probe) GTEST_SKIP() << GetParam().type << " unavailable: " << probe.message();
  }
  LinkPair pair(const std::string& extra = "") {
    auto p = make_pair(GetParam(), extra);
    EXPECT_TRUE(p.is_ok()) << p.status().to_string();
    return p.is_ok() ? std::move(p).value() : LinkPair{};
  }
};

// Alternates sending (until the ring is full or `count` sent) and receiving,
// in one thread, checking order and content.
void pump(transport::Transporter& from, transport::Transporter& to, uint64_t count, std::size_t (*payload)(uint64_t)) {
  uint64_t sent = 0, received = 0;
  const uint64_t deadline = monotonic_ns() + 60 * kSecond;
  while (received < count) {
    while (sent < count && send_sequenced(from, sent, payload(sent))) ++sent;
    ASSERT_NE(from.flush(), FlushStatus::kDown) << from.down_reason().to_string();
    const uint64_t before = received;
    const std::string error = receive_sequenced(to, &received, std::min<uint64_t>(sent - received, 64), 10 * kSecond);
    ASSERT_EQ(error, "") << "after " << before << " frames";
    ASSERT_LT(monotonic_ns(), deadline) << "stalled at " << received << " of " << count;
  }
}

TEST_P(ContractTest, DeliversInOrderBothWays) {
  LinkPair p = pair();
  ASSERT_TRUE(p.server && p.client);
  EXPECT_EQ(p.server->remote_node(), 2);
  EXPECT_EQ(p.client->remote_node(), 1);
  pump(*p.client, *p.server, 5000, [](uint64_t) -> std::size_t { return 40; });
  pump(*p.server, *p.client, 5000, [](uint64_t s) -> std::size_t { return s % 300; });
  const transport::LinkStats cs = p.client->stats();
  const transport::LinkStats ss = p.server->stats();
  EXPECT_EQ(cs.frames_sent, 5000u);
  EXPECT_EQ(ss.frames_received, 5000u);
  EXPECT_EQ(cs.bytes_sent, ss.bytes_received);
  EXPECT_EQ(ss.frames_sent, 5000u);
  EXPECT_EQ(cs.frames_received, 5000u);
  EXPECT_GE(cs.sends, 1u);
  EXPECT_EQ(cs.connects, 1u);
  // Fewer than a window (4096) of sends and receives on each side so far
  // for a small count: the means are those so far, never the 0 of a window
  // not yet full.
  LinkPair fresh = pair();
  ASSERT_TRUE(fresh.server && fresh.client);
  pump(*fresh.client, *fresh.server, 10, [](uint64_t) -> std::size_t { return 40; });
  const transport::LinkStats few_c = fresh.client->stats();
  const transport::LinkStats few_s = fresh.server->stats();
  ASSERT_GE(few_c.sends, 1u);
  ASSERT_GE(few_s.receives, 1u);
  EXPECT_EQ(few_c.mean_send_bytes, few_c.bytes_sent / few_c.sends);
  EXPECT_GT(few_c.mean_send_bytes, 0u);
  EXPECT_EQ(few_s.mean_receive_bytes, few_s.bytes_received / few_s.receives);
  EXPECT_GT(few_s.mean_receive_bytes, 0u);
}

TEST_P(ContractTest, SmallAndLargeFramesWithChecksum) {
  LinkPair p = pair("Checksum=1\n");
  ASSERT_TRUE(p.server && p.client);
  EXPECT_TRUE(p.client->config().checksum);
  pump(*p.client, *p.server, 3000, mixed_payload_bytes);
}

TEST_P(ContractTest, WrapsAroundASmallBufferManyTimes) {
  LinkPair p = pair("SendBufferMemory=64K\n");
  ASSERT_TRUE(p.server && p.client);
  // ~40 MB through a 64 KB send memory: hundreds of wrap-arounds at odd offsets.
  pump(*p.client, *p.server, 20000, [](uint64_t s) -> std::size_t { return 1000 + (s * 37) % 3000; });
}

TEST_P(ContractTest, BackPressureWhenPeerDoesNotReadLosesNothing) {
  LinkPair p = pair("SendBufferMemory=128K\n");
  ASSERT_TRUE(p.server && p.client);
  uint64_t sent = 0;
  int refused = 0;
  const uint64_t deadline = monotonic_ns() + 20 * kSecond;
  // Send until reserve() keeps refusing: the peer never reads meanwhile.
  while (refused < 200 && monotonic_ns() < deadline) {
    if (send_sequenced(*p.client, sent, 900)) {
      ++sent;
      refused = 0;
    } else {
      ++refused;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  ASSERT_TRUE(p.client->is_up());
  ASSERT_GT(sent, 10u);
  EXPECT_EQ(p.client->send_pressure(), SendPressure::kOverload);
  const transport::LinkStats full = p.client->stats();
  EXPECT_GE(full.overload_count, 1u);
  EXPECT_GE(full.slowdown_count, 1u);
  EXPECT_GT(p.client->send_buffer_used(), 0u);
  // Everything accepted before the refusal arrives, in order, and the link
  // accepts more once the peer reads.
  // The sender keeps flushing (kPending means "again later") while the
  // receiver drains.
  uint64_t received = 0;
  while (received < sent) {
    ASSERT_NE(p.client->flush(), FlushStatus::kDown);
    ASSERT_EQ(receive_sequenced(*p.server, &received, std::min<uint64_t>(sent - received, 16), 20 * kSecond), "");
  }
  ASSERT_TRUE(send_sequenced(*p.client, sent, 900) || (p.client->flush(), send_sequenced(*p.client, sent, 900)));
  ASSERT_EQ(receive_sequenced(*p.server, &received, 1, 10 * kSecond), "");
}

TEST_P(ContractTest, CloseIsSeenOnBothSidesWithAReason) {
  LinkPair p = pair();
  ASSERT_TRUE(p.server && p.client);
  ASSERT_TRUE(send_sequenced(*p.client, 0, 100));
  p.client->close("test closes the client");
  EXPECT_EQ(p.client->state(), LinkState::kDown);
  EXPECT_NE(p.client->down_reason().message().find("test closes the client"), std::string::npos);
  // The frame sent before the close may or may not arrive, but the server
  // must see the link go down, and never hang.
  const uint64_t deadline = monotonic_ns() + 10 * kSecond;
  while (p.server->is_up() && monotonic_ns() < deadline) {
    transport::ReceiveBatch b = p.server->receive();
    if (!b.bytes.empty()) p.server->release(b.bytes.size());
    (void)p.server->wait_for_receive(50'000'000, 0);
  }
  EXPECT_EQ(p.server->state(), LinkState::kDown);
  EXPECT_FALSE(p.server->down_reason().message().empty());
  EXPECT_FALSE(p.client->send_signal({kTestSignal, {}, {}, 0}, {}));
  EXPECT_EQ(p.client->flush(), FlushStatus::kDown);
}

TEST_P(ContractTest, SleepingReceiverIsNeverLeftAsleep) {
  LinkPair p = pair();
  ASSERT_TRUE(p.server && p.client);
  constexpr int kRounds = 2000;
  std::atomic<bool> failed{false};
  // Echo thread: sleeps (no spinning) for each frame, answers it.
  std::thread echo([&] {
    uint64_t expect = 0;
    for (int i = 0; i < kRounds && !failed; ++i) {
      if (p.server->wait_for_receive(10 * kSecond, 0) != WaitResult::kReady) {
        failed = true;
        return;
      }
      if (!receive_sequenced(*p.server, &expect, 1, kSecond).empty() ||
          !send_sequenced(*p.server, static_cast<uint64_t>(i), 16)) {
        failed = true;
        return;
      }
    }
  });
  uint64_t got = 0;
  for (int i = 0; i < kRounds && !failed; ++i) {
    ASSERT_TRUE(send_sequenced(*p.client, static_cast<uint64_t>(i), 16));
    ASSERT_EQ(p.client->wait_for_receive(10 * kSecond, i % 2 ? 0 : 20'000), WaitResult::kReady)
        << "round " << i << ": a wake-up was lost";
    ASSERT_EQ(receive_sequenced(*p.client, &got, 1, kSecond), "");
  }
  echo.join();
  EXPECT_FALSE(failed);
}

TEST_P(ContractTest, ManyBusyThreadsOnFewCores) {
  // Three links, each with a busy sender and a busy receiver thread, plus two
  // spinning bystanders: eight busy threads on two cores.
  std::vector<LinkPair> pairs;
  for (int i = 0; i < 3; ++i) {
    pairs.push_back(pair("SendBufferMemory=128K\n"));
    ASSERT_TRUE(pairs.back().server && pairs.back().client);
  }
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  std::vector<std::string> errors(pairs.size());
  constexpr uint64_t kFrames = 20000;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    threads.emplace_back([&, i] {
      for (uint64_t s = 0; s < kFrames && !stop;) {
        if (send_sequenced(*pairs[i].client, s, mixed_payload_bytes(s) % 2000))
          ++s;
        else if (!pairs[i].client->is_up())
          return;
      }
      // kPending means "flush again later": the last frames are only on
      // their way once a flush says kFlushed.
      while (!stop && pairs[i].client->flush() == FlushStatus::kPending) std::this_thread::yield();
    });
    threads.emplace_back([&, i] {
      uint64_t next = 0;
      errors[i] = receive_sequenced(*pairs[i].server, &next, kFrames, 120 * kSecond);
    });
  }
  std::vector<std::thread> bystanders;
  bystanders.reserve(2);
  for (int i = 0; i < 2; ++i)
    bystanders.emplace_back([&] {
      while (!stop) cpu_relax();
    });
  for (std::size_t i = 0; i < pairs.size(); ++i) threads[2 * i + 1].join();
  stop = true;
  for (std::size_t i = 0; i < pairs.size(); ++i) threads[2 * i].join();
  for (auto& b : bystanders) b.join();
  for (std::size_t i = 0; i < pairs.size(); ++i) EXPECT_EQ(errors[i], "") << "link " << i;
}

TEST_P(ContractTest, UnknownNodeIsRejectedWithAReason) {
  const Medium& m = GetParam();
  auto server_table = load_links(m.section(1, 2, ""));
  ASSERT_TRUE(server_table) << server_table.status().to_string();
  // Node 3 believes it has a link to node 1; node 1's config does not.
  auto client_table = load_links(m.section(1, 3, ""));
  ASSERT_TRUE(client_table) << client_table.status().to_string();
  // Point node 3 at node 1's real endpoint: same endpoint keys as 1-2.
  transport::LinkConfig wrong = *server_table->find(1, 2);
  wrong.node2 = 3;
  Status server_status;
  auto result = connect_pair(*server_table, 1, wrong, 3, &server_status);
  ASSERT_FALSE(result.is_ok());
  EXPECT_EQ(result.status().code(), StatusCode::kRejected) << result.status().to_string();
  EXPECT_NE(result.status().message().find("node 3"), std::string::npos) << result.status().message();
  EXPECT_EQ(server_status.code(), StatusCode::kRejected) << server_status.to_string();
  EXPECT_NE(server_status.message().find("not configured"), std::string::npos) << server_status.message();
}

// Ends that disagree on Checksum would fail on the first frame (one side
// requires a checksum the other never sends); the set-up is refused instead,
// naming the setting, on both sides, and the server goes on serving.
TEST_P(ContractTest, ACheckSumMismatchIsRejectedAtSetUpWithAReason) {
  const Medium& m = GetParam();
  auto server_table = load_links(m.section(1, 2, "Checksum=1\n"));
  ASSERT_TRUE(server_table) << server_table.status().to_string();
  transport::LinkConfig plain = *server_table->find(1, 2);
  plain.checksum = false;
  Status server_status;
  auto refused = connect_pair(*server_table, 1, plain, 2, &server_status);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kRejected) << refused.status().to_string();
  EXPECT_NE(refused.status().message().find("Checksum mismatch"), std::string::npos) << refused.status().message();
  EXPECT_EQ(server_status.code(), StatusCode::kRejected) << server_status.to_string();
  EXPECT_NE(server_status.message().find("node 2 has Checksum=0 for this link"), std::string::npos)
      << server_status.message();
  // The same link with matching settings connects and carries frames.
  auto agreed = connect_pair(*server_table, 1, *server_table->find(1, 2), 2);
  ASSERT_TRUE(agreed) << agreed.status().to_string();
  ASSERT_TRUE(send_sequenced(*agreed->client, 0, 100));
  uint64_t next = 0;
  EXPECT_EQ(receive_sequenced(*agreed->server, &next, 1, 5 * kSecond), "");
}

TEST_P(ContractTest, WrongTransporterTypeIsRejectedWithAReason) {
  const Medium& m = GetParam();
  // Node 1 serves node 3 over this medium but has node 2 configured as a
  // "dummy" link; node 2 thinks 1-2 is this medium.
  auto server_table = load_links(m.section(1, 3, "") + "[dummy]\nNodeId1=1\nNodeId2=2\n");
  ASSERT_TRUE(server_table) << server_table.status().to_string();
  transport::LinkConfig client = *server_table->find(1, 3);
  client.node2 = 2;
  transport::TransporterFactory* factory = test_registry().find(m.type);
  auto listener = factory->listen(1, *server_table);
  ASSERT_TRUE(listener) << listener.status().to_string();
  const transport::LinkConfig patched = client_view(client, **listener);
  Result<std::unique_ptr<transport::Transporter>> connected(Status(StatusCode::kInternal, "not run"));
  std::thread t([&] { connected = factory->connect(2, patched, monotonic_ns() + 10 * kSecond); });
  auto accepted = (*listener)->accept(monotonic_ns() + 10 * kSecond);
  t.join();
  ASSERT_FALSE(accepted.is_ok());
  EXPECT_NE(accepted.status().message().find("type mismatch"), std::string::npos) << accepted.status().message();
  ASSERT_FALSE(connected.is_ok());
  EXPECT_EQ(connected.status().code(), StatusCode::kRejected);
  EXPECT_NE(connected.status().message().find("configured as dummy"), std::string::npos)
      << connected.status().message();
}

TEST_P(ContractTest, MalformedFrameClosesOnlyThatLink) {
  const Medium& m = GetParam();
  auto table = load_links(m.section(1, 2, "") + m.section(1, 3, ""));
  ASSERT_TRUE(table) << table.status().to_string();
  // Two clients of node 1 over the same listener.
  transport::TransporterFactory* factory = test_registry().find(m.type);
  auto listener = factory->listen(1, *table);
  ASSERT_TRUE(listener) << listener.status().to_string();
  std::unique_ptr<transport::Transporter> c2, c3, s2, s3;
  for (NodeId client : {NodeId{2}, NodeId{3}}) {
    const transport::LinkConfig link = client_view(*table->find(1, client), **listener);
    Result<std::unique_ptr<transport::Transporter>> connected(Status(StatusCode::kInternal, "not run"));
    std::thread t([&] { connected = factory->connect(client, link, monotonic_ns() + 10 * kSecond); });
    auto accepted = (*listener)->accept(monotonic_ns() + 10 * kSecond);
    t.join();
    ASSERT_TRUE(connected) << connected.status().to_string();
    ASSERT_TRUE(accepted) << accepted.status().to_string();
    (client == 2 ? c2 : c3) = std::move(connected).value();
    (accepted.value()->remote_node() == 2 ? s2 : s3) = std::move(accepted).value();
  }
  ASSERT_TRUE(s2 && s3);
  // Node 2 sends two good frames, then a frame with version 9.
  ASSERT_TRUE(send_sequenced(*c2, 0, 10));
  ASSERT_TRUE(send_sequenced(*c2, 1, 10));
  auto space = c2->reserve(64);
  ASSERT_FALSE(space.empty());
  ASSERT_EQ(pack_sequenced(space, 2, 10, false), sequenced_frame_bytes(10, false));
  space[0] = std::byte{9};
  c2->commit(sequenced_frame_bytes(10, false), 1);
  ASSERT_NE(c2->flush(), FlushStatus::kDown);

  uint64_t next = 0;
  EXPECT_EQ(receive_sequenced(*s2, &next, 2, 10 * kSecond), "");  // the good frames are delivered
  const uint64_t deadline = monotonic_ns() + 10 * kSecond;
  while (s2->is_up() && monotonic_ns() < deadline) (void)s2->receive();
  ASSERT_EQ(s2->state(), LinkState::kDown);
  EXPECT_EQ(s2->down_reason().code(), StatusCode::kProtocolError);
  EXPECT_NE(s2->down_reason().message().find("unsupported frame version"), std::string::npos)
      << s2->down_reason().message();
  EXPECT_TRUE(s2->receive().bytes.empty());
  // The other link is untouched.
  ASSERT_TRUE(s3->is_up());
  pump(*c3, *s3, 100, [](uint64_t) -> std::size_t { return 64; });
  pump(*s3, *c3, 100, [](uint64_t) -> std::size_t { return 64; });
}

// Checksum=1 promises that every frame on the link is checked: a peer that
// sends a frame without a checksum (another config, or a bug) must not get
// it through unchecked.
TEST_P(ContractTest, FrameWithoutChecksumOnAChecksumLinkTakesItDown) {
  LinkPair p = pair("Checksum=1\n");
  ASSERT_TRUE(p.server && p.client);
  ASSERT_TRUE(send_sequenced(*p.client, 0, 10));
  ASSERT_TRUE(send_sequenced(*p.client, 1, 10));
  auto space = p.client->reserve(sequenced_frame_bytes(10, false));
  ASSERT_FALSE(space.empty());
  ASSERT_EQ(pack_sequenced(space, 2, 10, /*checksum=*/false), sequenced_frame_bytes(10, false));
  p.client->commit(sequenced_frame_bytes(10, false), 1);
  ASSERT_NE(p.client->flush(), FlushStatus::kDown);

  // Only the two checked frames are delivered, then the link is down.
  uint64_t next = 0;
  const uint64_t deadline = monotonic_ns() + 10 * kSecond;
  while ((p.server->is_up() || !p.server->receive().bytes.empty()) && next <= 2 && monotonic_ns() < deadline) {
    transport::ReceiveBatch b = p.server->receive();
    frame::FrameCursor cursor(b.bytes);
    frame::SignalView view;
    while (cursor.next(view)) {
      ASSERT_EQ(check_sequenced(view, next), "");
      ++next;
    }
    p.server->release(b.bytes.size());
    if (b.bytes.empty()) std::this_thread::yield();
  }
  EXPECT_EQ(next, 2u) << "the frame without a checksum was delivered";
  ASSERT_EQ(p.server->state(), LinkState::kDown);
  EXPECT_EQ(p.server->down_reason().code(), StatusCode::kProtocolError);
  EXPECT_NE(p.server->down_reason().message().find("no checksum"), std::string::npos)
      << p.server->down_reason().message();
  EXPECT_TRUE(p.server->receive().bytes.empty());
}

// What transporter.h permits a caller to do that is not the plain send and
// receive: the same answers on every medium.
TEST_P(ContractTest, PermittedMisuseHasTheSameDefinedAnswerOnEveryMedium) {
  LinkPair p = pair();
  ASSERT_TRUE(p.server && p.client);
  // A flush with nothing committed has nothing to wait for.
  EXPECT_EQ(p.client->flush(), FlushStatus::kFlushed);
  // A reservation committed only in part, and one not used at all: only
  // the committed frame arrives, and the link goes on.
  const std::size_t one = sequenced_frame_bytes(40, false);
  std::span<std::byte> space = p.client->reserve(3 * one);
  ASSERT_GE(space.size(), 3 * one);
  ASSERT_EQ(pack_sequenced(space, 0, 40, false), one);
  p.client->commit(one, 1);
  ASSERT_FALSE(p.client->reserve(one).empty());  // reserved, then dropped by the next reserve
  space = p.client->reserve(one);
  ASSERT_GE(space.size(), one);
  ASSERT_EQ(pack_sequenced(space, 1, 40, false), one);
  p.client->commit(one, 1);
  p.client->commit(0, 0);  // an empty commit is no frame
  ASSERT_NE(p.client->flush(), FlushStatus::kDown);
  uint64_t next = 0;
  EXPECT_EQ(receive_sequenced(*p.server, &next, 2, 10 * kSecond), "");
  EXPECT_EQ(p.client->stats().frames_sent, 2u);
  // Releasing nothing is allowed.
  p.server->release(0);
  // Close twice: the first reason stays.
  p.client->close("first");
  p.client->close("second");
  EXPECT_EQ(p.client->state(), LinkState::kDown);
  EXPECT_NE(p.client->down_reason().message().find("first"), std::string::npos) << p.client->down_reason().message();
  EXPECT_EQ(p.client->down_reason().message().find("second"), std::string::npos) << p.client->down_reason().message();
  // After the close: nothing to reserve, flush says down, receive is empty,
  // waiting returns at once, arming refuses.
  EXPECT_TRUE(p.client->reserve(one).empty());
  EXPECT_EQ(p.client->flush(), FlushStatus::kDown);
  EXPECT_TRUE(p.client->receive().bytes.empty());
  EXPECT_EQ(p.client->receive().frames, 0u);
  EXPECT_EQ(p.client->wait_for_receive(10 * kSecond, 0), WaitResult::kDown);
  EXPECT_FALSE(p.client->arm_wakeup());
  p.client->disarm_wakeup();
  // The peer sees the close, with a reason, and then the same answers.
  const uint64_t deadline = monotonic_ns() + 10 * kSecond;
  while (p.server->is_up() && monotonic_ns() < deadline) (void)p.server->wait_for_receive(100'000'000, 0);
  ASSERT_EQ(p.server->state(), LinkState::kDown);
  EXPECT_FALSE(p.server->down_reason().message().empty());
  EXPECT_TRUE(p.server->receive().bytes.empty());
  EXPECT_TRUE(p.server->reserve(one).empty());
  EXPECT_EQ(p.server->flush(), FlushStatus::kDown);
  EXPECT_FALSE(p.server->send_signal({kTestSignal, {}, {}, 0}, {}));
  EXPECT_EQ(p.server->wait_for_receive(10 * kSecond, 0), WaitResult::kDown);
}

// The other process of PeerKilledMidStreamIsSeenAsDown: contract_peer
// started here, or, with FJORD_CONTRACT_REMOTE_DIR set, on another host by
// the runner there (tests/rdma/two_hosts_checks.sh), which watches that
// shared directory: it starts contract_peer with the arguments in
// peer-<medium>.args, and on peer-<medium>.kill kills it with SIGKILL and
// writes its exit status (137) to peer-<medium>.killed.
class PeerProcess {
 public:
  PeerProcess(const std::string& medium, const char* remote_dir) {
    if (remote_dir) dir_ = std::string(remote_dir) + "/peer-" + medium + ".";
  }
  ~PeerProcess() { kill(); }
  bool remote() const { return !dir_.empty(); }

  void start(const char* program, const std::string& type, const std::string& config_path, const std::string& port) {
    if (remote()) {
      std::ofstream(dir_ + "args.tmp") << "--type " << type << " --config " << config_path << " --port " << port;
      std::filesystem::rename(dir_ + "args.tmp", dir_ + "args");
      started_ = true;
      return;
    }
    const char* argv[] = {program,  "--type",     type.c_str(), "--config", config_path.c_str(),
                          "--port", port.c_str(), nullptr};
    ASSERT_EQ(::posix_spawn(&child_, program, nullptr, nullptr, const_cast<char* const*>(argv), environ), 0);
  }

  // Kills the peer with SIGKILL; true if it was still running then.
  bool kill() {
    if (remote()) {
      if (!started_) return killed_status_ == "137";
      started_ = false;
      std::ofstream(dir_ + "kill") << "now";
      for (const uint64_t deadline = monotonic_ns() + 30 * kSecond; monotonic_ns() < deadline;) {
        std::ifstream in(dir_ + "killed");
        if (in >> killed_status_) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      return killed_status_ == "137";
    }
    if (child_ <= 0) return killed_status_ == "137";
    ::kill(child_, SIGKILL);
    int status = 0;
    ::waitpid(child_, &status, 0);
    child_ = -1;
    killed_status_ = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL ? "137" : std::to_string(status);
    return killed_status_ == "137";
  }
  const std::string& status() const { return killed_status_; }

 private:
  std::string dir_;  // "<remote dir>/peer-<medium>." or empty: a local child
  pid_t child_ = -1;
  bool started_ = false;  // remote: args written, not yet killed
  std::string killed_status_;
};

// The medium's section as the two hosts of a remote peer see it: this
// host's RXE_IP for node 1, FJORD_PEER_IP for node 2.
std::string peer_section(const Medium& m, bool remote) {
  std::string text = m.section(1, 2, "");
  if (!remote) return text;
  const char* self = ::getenv("RXE_IP");
  const char* peer = ::getenv("FJORD_PEER_IP");
  if (!self || !peer) return text;
  std::string out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("HostName1=", 0) == 0) line = std::string("HostName1=") + self;
    if (line.rfind("HostName2=", 0) == 0) line = std::string("HostName2=") + peer;
    out += line + "\n";
  }
  return out;
}

TEST_P(ContractTest, PeerKilledMidStreamIsSeenAsDown) {
  const Medium& m = GetParam();
  if (m.in_process_only)
    GTEST_SKIP() << m.type << " links exist only inside one process, so no peer process can be killed "
                 << "(its own suite covers a peer that vanishes mid-stream)";
  const char* peer = ::getenv("FJORD_CONTRACT_PEER");
  ASSERT_NE(peer, nullptr) << "FJORD_CONTRACT_PEER must name the contract_peer program (meson sets it)";
  const char* remote_dir = ::getenv("FJORD_CONTRACT_REMOTE_DIR");
  PeerProcess child(m.name(), remote_dir);
  // One section text for both processes, so they agree on the endpoint.
  const std::string text = peer_section(m, child.remote());
  auto table = load_links(text);
  ASSERT_TRUE(table) << table.status().to_string();
  const std::string config_path = (remote_dir ? std::string(remote_dir) + "/" : ::testing::TempDir()) +
                                  "contract_peer_" + m.name() + "_" + std::to_string(::getpid()) + ".ini";
  {
    std::ofstream out(config_path);
    out << text;
  }
  auto listener = test_registry().find(m.type)->listen(1, *table);
  ASSERT_TRUE(listener) << listener.status().to_string();
  const std::string port = std::to_string(client_view(*table->find(1, 2), **listener).port);
  child.start(peer, m.type, config_path, port);
  auto accepted = (*listener)->accept(monotonic_ns() + (child.remote() ? 120 : 20) * kSecond);
  if (!accepted) {
    child.kill();
    ::unlink(config_path.c_str());
    FAIL() << accepted.status().to_string();
  }
  transport::Transporter& link = **accepted;
  uint64_t next = 0;
  const std::string first = receive_sequenced(link, &next, 2000, 20 * kSecond);
  const bool was_running = child.kill();
  ::unlink(config_path.c_str());
  ASSERT_EQ(first, "");
  EXPECT_TRUE(was_running) << "peer exited early, status " << child.status();
  // Whatever the peer managed to send before dying arrives intact and in
  // order; then the link is declared down with a reason.
  const uint64_t deadline = monotonic_ns() + 20 * kSecond;
  while (link.is_up() || !link.receive().bytes.empty()) {
    ASSERT_LT(monotonic_ns(), deadline) << "dead peer not detected";
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
  EXPECT_GE(next, 2000u);
  EXPECT_EQ(link.state(), LinkState::kDown);
  EXPECT_FALSE(link.down_reason().message().empty());
}

// TCP's own rings (not a contract guarantee): each goes back to its start
// once it empties 64 KB or more into a lap, so a link whose peer keeps up
// works in the first 64 KB of its 2 MB rings; BackPressure... above has a
// lagging peer fill the whole ring.
TEST(TcpRings, ALinkWhosePeerKeepsUpStaysAtTheStartOfItsRings) {
  const Medium* tcp = find_medium("tcp");
  ASSERT_NE(tcp, nullptr);
  auto made = make_pair(*tcp);
  ASSERT_TRUE(made.is_ok()) << made.status().to_string();
  transport::Transporter& from = *made.value().client;
  transport::Transporter& to = *made.value().server;
  const std::byte* send_start = nullptr;
  const std::byte* receive_start = nullptr;
  std::ptrdiff_t send_furthest = 0, receive_furthest = 0;
  uint64_t received = 0;
  // 10,000 frames of about 240 bytes: more than a lap of either ring.
  for (uint64_t seq = 0; seq < 10'000; ++seq) {
    const std::span<std::byte> space = from.reserve(512);
    ASSERT_FALSE(space.empty());
    if (send_start == nullptr) send_start = space.data();
    send_furthest = std::max(send_furthest, space.data() - send_start);
    ASSERT_TRUE(send_sequenced(from, seq, 200));
    transport::ReceiveBatch batch;
    for (const uint64_t deadline = monotonic_ns() + 10 * kSecond; (batch = to.receive()).bytes.empty();)
      ASSERT_LT(monotonic_ns(), deadline) << "frame " << seq << " never arrived";
    if (receive_start == nullptr) receive_start = batch.bytes.data();
    receive_furthest = std::max(receive_furthest, batch.bytes.data() - receive_start);
    ASSERT_EQ(receive_sequenced(to, &received, 1, 10 * kSecond), "");
  }
  EXPECT_LT(send_furthest, (64 << 10) + 512) << "the send ring walked past its first 64 KB";
  EXPECT_LT(receive_furthest, (64 << 10) + 512) << "the receive ring walked past its first 64 KB";
  EXPECT_GE(send_furthest, 60 << 10) << "it went back before 64 KB";
}

// A raw stream connection to a listener's endpoint ("127.0.0.1:PORT", or
// "@name" for an abstract Unix socket), as a port scanner or a stuck
// process makes one.
UniqueFd raw_connection(const std::string& endpoint) {
  UniqueFd fd;
  if (endpoint[0] == '@') {
    fd.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr;
    const socklen_t len = unix_address(endpoint.substr(0, endpoint.find(',')), addr);  // the first of several
    EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), len), 0) << endpoint << ": " << strerror(errno);
  } else {
    fd.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(std::stoi(endpoint.substr(endpoint.rfind(':') + 1))));
    ::inet_pton(AF_INET, endpoint.substr(0, endpoint.rfind(':')).c_str(), &addr.sin_addr);
    EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0)
        << endpoint << ": " << strerror(errno);
  }
  return fd;
}

// Node 1 listening for its link to node 2 over a stream medium (tcp, shm),
// as the stream-listener tests below use it.
struct StreamListener {
  transport::TransporterFactory* factory = nullptr;
  std::optional<transport::LinkTable> table;
  std::unique_ptr<transport::Listener> listener;

  // Node 2 sets the link up while the listener accepts for up to
  // `accept_ns`: the accepted end, or why either end failed.
  Result<std::unique_ptr<transport::Transporter>> set_up(uint64_t accept_ns) {
    const transport::LinkConfig patched = client_view(*table->find(1, 2), *listener);
    Result<std::unique_ptr<transport::Transporter>> connected(Status(StatusCode::kInternal, "not run"));
    std::thread client([&] { connected = factory->connect(2, patched, monotonic_ns() + 10 * kSecond); });
    auto accepted = listener->accept(monotonic_ns() + accept_ns);
    client.join();
    if (!connected) return connected.status();
    return accepted;
  }
};
// True if `fd` polls readable now.
bool readable_now(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

void open_stream_listener(const char* type, StreamListener& out) {
  const Medium* m = find_medium(type);
  ASSERT_NE(m, nullptr);
  auto table = load_links(m->section(1, 2, ""));
  ASSERT_TRUE(table) << table.status().to_string();
  out.table = std::move(table).value();
  out.factory = test_registry().find(type);
  auto listener = out.factory->listen(1, *out.table);
  ASSERT_TRUE(listener) << listener.status().to_string();
  out.listener = std::move(listener).value();
}

// Each test of the listeners that shake hands over a stream, on both: TCP
// and SHM's Unix socket (RDMA's request comes whole with rdma_cm's connect
// request; sim's with its in-process attempt: neither has a stream to wait
// on). `s` listens as node 1 for node 2.
class StreamListeners : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override { open_stream_listener(GetParam(), s); }
  StreamListener s;
};
INSTANTIATE_TEST_SUITE_P(TcpAndShm, StreamListeners, ::testing::Values("tcp", "shm"),
                         [](const ::testing::TestParamInfo<const char*>& param_info) {
                           return std::string(param_info.param);
                         });

// The listeners that shake hands over a stream (TCP, and SHM's Unix
// socket): a peer that connects and says nothing, or sends half a request,
// holds up no other node's set-up, and is closed after the set-up budget.
TEST_P(StreamListeners, ASilentPeerHoldsUpNoOtherSetUp) {
  transport::Listener& listener = *s.listener;
  const std::string endpoint = listener.endpoint();
  UniqueFd silent = raw_connection(endpoint);
  UniqueFd half = raw_connection(endpoint);
  const std::byte prefix[4] = {std::byte{0x46}, std::byte{0x4A}, std::byte{0x48},
                               std::byte{0x51}};  // "FJHQ", then nothing
  ASSERT_EQ(::send(half.get(), prefix, sizeof prefix, MSG_NOSIGNAL), 4);
  // The listener looks at both first (they came first), then the real one.
  EXPECT_EQ(listener.accept(monotonic_ns() + 200'000'000ULL).status().code(), StatusCode::kTimeout);
  const uint64_t t0 = monotonic_ns();
  auto accepted = s.set_up(5 * kSecond);
  ASSERT_TRUE(accepted) << accepted.status().to_string();
  EXPECT_LT(monotonic_ns() - t0, 5 * kSecond) << "the silent peers held up the set-up";
  EXPECT_EQ((*accepted)->remote_node(), 2u);
  // The silent ones are closed once the set-up budget (10 s) has passed
  // for them. Nothing else comes, yet the listener's fd turns readable by
  // itself then (its set-up timer), so a poller calls accept(), which
  // closes them and says nothing came.
  EXPECT_FALSE(readable_now(listener.fd())) << "the listener reads ready with nothing to do";
  pollfd woke{listener.fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&woke, 1, static_cast<int>((transport::kSetupBudgetNs + 2 * kSecond) / 1'000'000)), 1)
      << "the listener's fd never said the silent peers' budget had passed";
  EXPECT_GE(monotonic_ns() - t0, transport::kSetupBudgetNs - 500'000'000ULL) << "woke before the budget passed";
  EXPECT_EQ(listener.accept(monotonic_ns()).status().code(), StatusCode::kTimeout);
  std::byte bytes[transport::kHandshakeGreetingBytes + 1];
  const timeval wait{2, 0};
  for (const UniqueFd* fd : {&silent, &half}) ::setsockopt(fd->get(), SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  // Each had the listener's greeting (whole, and nothing after it), then the end.
  EXPECT_EQ(::recv(silent.get(), bytes, sizeof bytes, MSG_WAITALL), transport::kHandshakeGreetingBytes);
  EXPECT_EQ(::recv(silent.get(), bytes, 1, 0), 0) << "the silent peer's connection is still open";
  // Closed with its bytes unread: a reset (which may discard the greeting), not a timeout.
  ssize_t got = ::recv(half.get(), bytes, sizeof bytes, MSG_WAITALL);
  if (got == static_cast<ssize_t>(transport::kHandshakeGreetingBytes)) got = ::recv(half.get(), bytes, 1, 0);
  EXPECT_TRUE(got == 0 || (got < 0 && errno == ECONNRESET))
      << "the half-sent peer's connection is still open (" << strerror(errno) << ")";
}

// The peer's side of a connection the listener closed: end of stream or a
// reset within 2 s, not silence.
void expect_closed(const UniqueFd& fd, const char* who) {
  const timeval wait{2, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  char byte;
  const ssize_t got = ::recv(fd.get(), &byte, 1, 0);
  EXPECT_TRUE(got == 0 || (got < 0 && errno == ECONNRESET)) << who << " was not closed (" << strerror(errno) << ")";
}

// accept() reports one attempt per call, and a poller calls it when fd() is
// readable (the data node does). So while another attempt is ready after a
// call (its whole request in, or its peer gone), fd() must stay readable:
// else that set-up waits, unseen, until some other connection wakes the
// poller, and its peer times out.
TEST_P(StreamListeners, AfterOneAttemptIsTakenTheFdStaysReadableForTheNextReadyOne) {
  const char* type = GetParam();
  const std::string endpoint = s.listener->endpoint();
  UniqueFd leaves = raw_connection(endpoint);
  leaves.reset();  // ready: its peer left
  UniqueFd asks = raw_connection(endpoint);
  const std::vector<std::byte> request = transport::encode_request({2, 1, type, {}});
  ASSERT_EQ(::send(asks.get(), request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  ASSERT_TRUE(readable_now(s.listener->fd()));
  auto first = s.listener->accept(monotonic_ns());
  ASSERT_NE(first.status().code(), StatusCode::kTimeout);
  EXPECT_TRUE(readable_now(s.listener->fd())) << "a ready attempt waits, but the listener's fd does not say so";
  auto second = s.listener->accept(monotonic_ns());
  EXPECT_NE(second.status().code(), StatusCode::kTimeout);
  EXPECT_TRUE(first.is_ok() || second.is_ok()) << "the request that came whole was not set up";
}

// Out of file descriptors, a listener cannot accept a waiting connection.
// Left in the listen queue it would keep the listener's fd readable, and
// the data node, which polls that fd, would wake, fail and log again at
// once, for as long as the shortage lasts, while the peer heard nothing.
// The listener sheds it (accepts it on a spare descriptor and closes it):
// the peer hears at once, the fd goes quiet, and once descriptors are free
// again set-ups go through as before.
TEST_P(StreamListeners, OutOfDescriptorsAWaitingPeerIsClosedAndTheListenerGoesQuiet) {
  const std::string endpoint = s.listener->endpoint();
  for (int round = 0; round < 2; ++round) {  // twice: the spare is there again after a shed
    SCOPED_TRACE(round);
    UniqueFd waiting = raw_connection(endpoint);
    {
      DescriptorsUsedUp used_up;
      EXPECT_TRUE(readable_now(s.listener->fd()));
      EXPECT_EQ(s.listener->accept(monotonic_ns() + 100'000'000ULL).status().code(), StatusCode::kTimeout);
      EXPECT_FALSE(readable_now(s.listener->fd())) << "the listener's fd still wakes its poller";
    }
    expect_closed(waiting, "the waiting peer");
  }
  auto accepted = s.set_up(10 * kSecond);
  ASSERT_TRUE(accepted) << accepted.status().to_string();
  EXPECT_EQ((*accepted)->remote_node(), 2u);
}

// A TCP link whose client end (node 2) is a raw socket: the test writes the
// bytes a broken or dying peer would.
struct RawTcpPeer {
  StreamListener s;
  UniqueFd fd;                                     // node 2's socket, past the handshake
  std::unique_ptr<transport::Transporter> server;  // node 1's end
};
void connect_raw_tcp_peer(RawTcpPeer& out, const std::string& extra = "") {
  const Medium* m = find_medium("tcp");
  ASSERT_NE(m, nullptr);
  auto table = load_links(m->section(1, 2, extra));
  ASSERT_TRUE(table) << table.status().to_string();
  out.s.table = std::move(table).value();
  out.s.factory = test_registry().find("tcp");
  auto listener = out.s.factory->listen(1, *out.s.table);
  ASSERT_TRUE(listener) << listener.status().to_string();
  out.s.listener = std::move(listener).value();
  out.fd = raw_connection(out.s.listener->endpoint());
  // As a real client would, with the link's Checksum (the handshake compares it).
  const bool checksum = out.s.table->find(1, 2)->checksum;
  const std::vector<std::byte> request = transport::encode_request({2, 1, "tcp", {}, checksum});
  ASSERT_EQ(::send(out.fd.get(), request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  auto accepted = out.s.listener->accept(monotonic_ns() + 10 * kSecond);
  ASSERT_TRUE(accepted) << accepted.status().to_string();
  out.server = std::move(accepted).value();
  // The listener's greeting came first (a client without a key reads it after its request).
  auto greeting = transport::recv_handshake_message(out.fd.get(), transport::kHandshakeGreetingMagic,
                                                    monotonic_ns() + 10 * kSecond);
  ASSERT_TRUE(greeting) << greeting.status().to_string();
  auto reply =
      transport::recv_handshake_message(out.fd.get(), transport::kHandshakeReplyMagic, monotonic_ns() + 10 * kSecond);
  ASSERT_TRUE(reply) << reply.status().to_string();
}

// `count` sequenced frames of 100 payload bytes, back to back.
std::vector<std::byte> sequenced_stream(uint64_t count, bool checksum = false) {
  const std::size_t one = sequenced_frame_bytes(100, checksum);
  std::vector<std::byte> out(count * one);
  for (uint64_t seq = 0; seq < count; ++seq)
    EXPECT_EQ(pack_sequenced(std::span(out).subspan(seq * one, one), seq, 100, checksum), one);
  return out;
}

void send_raw(const UniqueFd& fd, std::span<const std::byte> bytes) {
  ASSERT_EQ(::send(fd.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

// Receives until the link is down and all it had is taken, checking order:
// how many frames arrived, or a description of what went wrong.
std::string receive_until_down(transport::Transporter& t, uint64_t* next) {
  const uint64_t deadline = monotonic_ns() + 10 * kSecond;
  while (t.is_up() || !t.receive().bytes.empty()) {
    if (monotonic_ns() > deadline) return "the link never went down";
    transport::ReceiveBatch batch = t.receive();
    frame::FrameCursor cursor(batch.bytes);
    frame::SignalView view;
    while (cursor.next(view)) {
      if (std::string e = check_sequenced(view, *next); !e.empty()) return e;
      ++*next;
    }
    t.release(batch.bytes.size());
    if (batch.bytes.empty()) (void)t.wait_for_receive(100'000'000, 0);
  }
  return "";
}

// A peer that dies in the middle of a frame loses that frame: the reason
// must say so, so that an operator can tell it from an orderly close.
TEST(TcpBadPeers, APeerThatClosesInTheMiddleOfAFrameIsDownWithThatReason) {
  const std::size_t one = sequenced_frame_bytes(100, false);
  for (const std::size_t cut : {std::size_t{10}, std::size_t{60}}) {  // inside the header, inside the body
    SCOPED_TRACE(cut);
    RawTcpPeer p;
    connect_raw_tcp_peer(p);
    if (HasFatalFailure()) return;
    const std::vector<std::byte> stream = sequenced_stream(3);
    send_raw(p.fd, std::span(stream).first(2 * one + cut));
    p.fd.reset();
    uint64_t next = 0;
    EXPECT_EQ(receive_until_down(*p.server, &next), "");
    EXPECT_EQ(next, 2u) << "the whole frames before the cut must arrive";
    EXPECT_EQ(p.server->down_reason().code(), StatusCode::kLinkDown);
    const std::string reason = p.server->down_reason().message();
    EXPECT_NE(reason.find("closed the connection"), std::string::npos) << reason;
    EXPECT_NE(reason.find("in the middle of a frame (" + std::to_string(cut) + " bytes of it received)"),
              std::string::npos)
        << reason;
  }
}

// An orderly close after whole frames says no more than that.
TEST(TcpBadPeers, APeerThatClosesBetweenFramesIsDownWithoutLosingAny) {
  RawTcpPeer p;
  connect_raw_tcp_peer(p);
  if (HasFatalFailure()) return;
  send_raw(p.fd, sequenced_stream(3));
  p.fd.reset();
  uint64_t next = 0;
  EXPECT_EQ(receive_until_down(*p.server, &next), "");
  EXPECT_EQ(next, 3u);
  const std::string reason = p.server->down_reason().message();
  EXPECT_NE(reason.find("node 2 closed the connection"), std::string::npos) << reason;
  EXPECT_EQ(reason.find("middle"), std::string::npos) << reason;
}

// Bytes no sender packs: each takes the link down naming what was wrong,
// after the whole frames before it.
TEST(TcpBadPeers, GarbageATooLongFrameAndABadChecksumEachTakeTheLinkDownNamingIt) {
  struct Case {
    const char* what;
    bool checksum;
    void (*spoil)(std::span<std::byte> frame);
    const char* reason;
  };
  const Case cases[] = {
      {"garbage", false, [](std::span<std::byte> f) { std::memset(f.data(), 0xA5, f.size()); },
       "unsupported frame version"},
      {"longer than the maximum", false,
       [](std::span<std::byte> f) {
         const uint32_t length = frame::kMaxFrameBytes + 8;
         std::memcpy(f.data() + 4, &length, sizeof length);
       },
       "frame length out of range"},
      {"bad checksum", true, [](std::span<std::byte> f) { f[30] ^= std::byte{1}; }, "checksum mismatch"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    RawTcpPeer p;
    connect_raw_tcp_peer(p, c.checksum ? "Checksum=1\n" : "");
    if (HasFatalFailure()) return;
    std::vector<std::byte> stream = sequenced_stream(3, c.checksum);
    const std::size_t one = sequenced_frame_bytes(100, c.checksum);
    c.spoil(std::span(stream).subspan(2 * one, one));
    send_raw(p.fd, stream);
    uint64_t next = 0;
    EXPECT_EQ(receive_until_down(*p.server, &next), "");
    EXPECT_EQ(next, 2u);
    EXPECT_EQ(p.server->down_reason().code(), StatusCode::kProtocolError);
    EXPECT_NE(p.server->down_reason().message().find(c.reason), std::string::npos) << p.server->down_reason().message();
    EXPECT_NE(p.server->down_reason().message().find("offset " + std::to_string(2 * one)), std::string::npos)
        << p.server->down_reason().message();
  }
}

// A request written a byte at a time is still one request.
TEST_P(StreamListeners, AHandshakeWrittenOneByteAtATimeIsAccepted) {
  UniqueFd fd = raw_connection(s.listener->endpoint());
  int one = 1;
  if (std::string_view(GetParam()) == "tcp") ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const std::vector<std::byte> request = transport::encode_request({2, 1, GetParam(), {}});
  std::atomic<std::size_t> written{0};
  std::thread writer([&] {
    for (const std::byte b : request) {
      ASSERT_EQ(::send(fd.get(), &b, 1, MSG_NOSIGNAL), 1);
      written.fetch_add(1);
      // Let the listener see each byte apart before the next.
      pollfd p{fd.get(), POLLIN, 0};
      (void)::poll(&p, 1, 1);
    }
  });
  auto accepted = s.listener->accept(monotonic_ns() + 10 * kSecond);
  writer.join();
  ASSERT_TRUE(accepted) << accepted.status().to_string();
  EXPECT_EQ(written.load(), request.size());
  EXPECT_EQ((*accepted)->remote_node(), 2u);
}

std::size_t count_entries(const char* dir) {
  std::size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) (void)entry, ++n;
  return n;
}
std::size_t count_mappings() {
  std::ifstream maps("/proc/self/maps");
  std::size_t n = 0;
  for (std::string line; std::getline(maps, line);) ++n;
  return n;
}

// Set-ups and tear-downs, and peers that connect and leave at once, leave
// no descriptor and no mapping behind.
TEST_P(StreamListeners, AThousandConnectAndDisconnectCyclesLeakNothing) {
  // One cycle first, so lazily created things (the log, thread stacks) exist.
  {
    auto first = s.set_up(10 * kSecond);
    ASSERT_TRUE(first) << first.status().to_string();
  }
  const std::size_t fds = count_entries("/proc/self/fd");
  const std::size_t mappings = count_mappings();
  for (int i = 0; i < 1000; ++i) {
    auto accepted = s.set_up(10 * kSecond);
    ASSERT_TRUE(accepted) << "cycle " << i << ": " << accepted.status().to_string();
    UniqueFd leaves = raw_connection(s.listener->endpoint());
    leaves.reset();
    // accept() reports one attempt a call: this one, which left.
    EXPECT_EQ(s.listener->accept(monotonic_ns() + 10 * kSecond).status().code(), StatusCode::kRejected);
  }
  EXPECT_EQ(count_entries("/proc/self/fd"), fds);
  EXPECT_EQ(count_mappings(), mappings);
}

INSTANTIATE_TEST_SUITE_P(AllTransporters, ContractTest, ::testing::ValuesIn(contract_media()),
                         [](const ::testing::TestParamInfo<Medium>& param_info) { return param_info.param.name(); });

}  // namespace
}  // namespace fjord::test
