// RDMA transporter tests beyond the contract suite: parameters, set-up
// errors, teardown, the data path's verbs usage (inline, selective
// signalling, credits), sleeping on the completion channel, and faults.
//
// Tests that need a device skip with the probe's reason on a machine without
// RDMA ("no RDMA device: ibv_get_device_list: Function not implemented") and
// run for real inside the soft-RDMA guest (tests/rdma/run_vm_checks.sh),
// where RXE_IP names the device's address (rxe0, or siw0 via SIW_IP).
#include "fjord/rdma/rdma.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <new>
#include <sstream>
#include <thread>
#include <vector>

#include "counting_new.h"
#include "echo.h"
#include "fjord/base/clock.h"
#include "link_harness.h"

// ---- allocation counting (SteadyStateAllocatesNothing) --------------------
// This binary replaces the global operator new to count the C++ allocations
// made while counting is on (from any thread).
using fjord::test::g_allocations;
using fjord::test::g_count_allocations;

namespace fjord::test {
namespace {

using transport::FlushStatus;
using transport::LinkState;

constexpr uint64_t kSecond = 1'000'000'000ULL;

transport::TransporterFactory& rdma_factory() {
  transport::TransporterFactory* f = test_registry().find("rdma");
  FJORD_ASSERT(f != nullptr);
  return *f;
}

const Medium& rdma_medium() { return *find_medium("rdma"); }

// Streams `count` frames one way in one thread, flushing again while a flush
// leaves bytes pending (kPending: "flush again later") and draining `to`.
std::string stream(transport::Transporter& from, transport::Transporter& to, uint64_t count, std::size_t payload) {
  uint64_t sent = 0, received = 0;
  const uint64_t deadline = monotonic_ns() + 30 * kSecond;
  while (received < count) {
    while (sent < count && send_sequenced(from, sent, payload)) ++sent;
    if (from.flush() == FlushStatus::kDown) return "sender down: " + from.down_reason().to_string();
    transport::ReceiveBatch batch = to.receive();
    frame::FrameCursor cursor(batch.bytes);
    frame::SignalView view;
    while (cursor.next(view))
      if (std::string e = check_sequenced(view, received++); !e.empty()) return e;
    to.release(batch.bytes.size());
    if (!to.is_up()) return "receiver down: " + to.down_reason().to_string();
    if (monotonic_ns() > deadline) return "stalled at frame " + std::to_string(received);
  }
  return "";
}

// ---- without a device --------------------------------------------------------

TEST(RdmaFactory, IsRegisteredWithItsParameters) {
  transport::TransporterFactory& f = rdma_factory();
  EXPECT_EQ(f.name(), "rdma");
  std::map<std::string, const config::ParamSpec*> by_name;
  for (const config::ParamSpec& p : f.parameters()) by_name[std::string(p.name)] = &p;
  for (const char* name :
       {"RdmaDevice", "RdmaPort", "GidIndex", "ReceiveBufferMemory", "QueueDepth", "InlineThreshold", "RdmaSpintime"})
    EXPECT_TRUE(by_name.count(name)) << name;
  EXPECT_EQ(by_name["QueueDepth"]->min, 16u);
  EXPECT_EQ(by_name["InlineThreshold"]->max, 1024u);
}

TEST(RdmaFactory, ProbeSaysWhyWhenThereIsNoDevice) {
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  const bool have_device = list != nullptr && count > 0;
  if (list) ibv_free_device_list(list);
  const Status probe = rdma_factory().probe();
  if (have_device) {
    EXPECT_TRUE(probe.is_ok()) << probe.to_string();
  } else {
    EXPECT_EQ(probe.code(), StatusCode::kUnavailable);
    EXPECT_EQ(probe.message().rfind("no RDMA device", 0), 0u) << probe.message();
    std::printf("probe on this machine: %s\n", probe.message().c_str());
  }
}

TEST(RdmaConfig, SectionAcceptsItsParametersAndChecksRanges) {
  auto ok = load_links(
      "[rdma]\nNodeId1=1\nNodeId2=2\nHostName1=10.0.0.1\nHostName2=10.0.0.2\nPortNumber=7000\n"
      "RdmaDevice=mlx5_0\nRdmaPort=2\nGidIndex=3\nReceiveBufferMemory=4M\nQueueDepth=512\n"
      "InlineThreshold=128\nRdmaSpintime=40\n");
  ASSERT_TRUE(ok) << ok.status().to_string();
  const config::ParamSet& p = ok->find(1, 2)->params;
  EXPECT_EQ(p.get_string("RdmaDevice"), "mlx5_0");
  EXPECT_EQ(p.get_uint("RdmaPort"), 2u);
  EXPECT_EQ(p.get_uint("ReceiveBufferMemory"), 4u << 20);
  EXPECT_EQ(p.get_uint("QueueDepth"), 512u);
  EXPECT_EQ(p.get_uint("RdmaSpintime"), 40u);

  auto defaults = load_links("[rdma]\nNodeId1=1\nNodeId2=2\n");
  ASSERT_TRUE(defaults) << defaults.status().to_string();
  EXPECT_EQ(defaults->find(1, 2)->params.get_uint("QueueDepth"), 256u);
  EXPECT_EQ(defaults->find(1, 2)->params.get_uint("GidIndex"), 1u);

  for (const char* bad : {"QueueDepth=8", "QueueDepth=5000", "InlineThreshold=2K", "RdmaPort=0",
                          "ReceiveBufferMemory=16K", "GidIndex=256"}) {
    auto r = load_links(std::string("[rdma]\nNodeId1=1\nNodeId2=2\n") + bad + "\n");
    ASSERT_FALSE(r.is_ok()) << bad;
    const std::string key(bad, std::strchr(bad, '=') - bad);
    EXPECT_NE(r.status().message().find(key), std::string::npos) << r.status().message();
  }
}

// ---- with a device -------------------------------------------------------------

class RdmaLink : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Status probe = rdma_factory().probe(); !probe) GTEST_SKIP() << "rdma unavailable: " << probe.message();
  }
  LinkPair pair(const std::string& extra = "") {
    auto p = make_pair(rdma_medium(), extra);
    EXPECT_TRUE(p.is_ok()) << p.status().to_string();
    return p.is_ok() ? std::move(p).value() : LinkPair{};
  }
};

// `rdma resource show` (netlink, iproute2): live kernel objects per device.
std::map<std::string, long> kernel_resources() {
  std::map<std::string, long> out;
  FILE* f = ::popen("rdma resource show 2>/dev/null", "r");
  if (!f) return out;
  char line[512];
  while (std::fgets(line, sizeof line, f)) {
    // "0: rxe0: pd 1 cq 2 qp 1 cm_id 0 mr 0 ctx 0 srq 0"
    char* p = std::strchr(line, ':');
    if (!p || !(p = std::strchr(p + 1, ':'))) continue;
    std::string device(std::strchr(line, ' ') + 1, p);
    char key[32];
    long value = 0;
    int used = 0;
    for (++p; std::sscanf(p, "%31s %ld%n", key, &value, &used) == 2; p += used) out[device + "." + key] += value;
  }
  ::pclose(f);
  return out;
}

std::string diff(const std::map<std::string, long>& before, const std::map<std::string, long>& after) {
  std::string out;
  for (const auto& [key, value] : after)
    if (key.find(".ctx") == std::string::npos && before.count(key) && before.at(key) != value)
      out += key + ": " + std::to_string(before.at(key)) + " -> " + std::to_string(value) + "; ";
  return out;
}

TEST_F(RdmaLink, TeardownLeavesNoVerbsResources) {
  const auto before = kernel_resources();
  ASSERT_FALSE(before.empty()) << "rdma resource show printed nothing";
  {
    LinkPair p = pair();
    ASSERT_TRUE(p.server && p.client);
    uint64_t next = 0;
    ASSERT_TRUE(send_sequenced(*p.client, 0, 100));
    ASSERT_EQ(receive_sequenced(*p.server, &next, 1, 10 * kSecond), "");
    const auto during = kernel_resources();
    EXPECT_NE(diff(before, during), "") << "a live link should show its QPs, CQs and MRs";
  }
  {  // a refused connection cleans up on both sides too
    auto table = load_links(rdma_medium().section(1, 2, ""));
    ASSERT_TRUE(table);
    transport::LinkConfig wrong = *table->find(1, 2);
    wrong.node2 = 3;
    Status server_status;
    EXPECT_FALSE(connect_pair(*table, 1, wrong, 3, &server_status).is_ok());
  }
  // The kernel finishes some of the teardown (cm_id time-wait) on its own.
  std::string left;
  for (const uint64_t deadline = monotonic_ns() + 10 * kSecond; monotonic_ns() < deadline;) {
    left = diff(before, kernel_resources());
    if (left.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(left, "") << "resources left after teardown";
}

TEST_F(RdmaLink, SetUpFailureNamesDevicePortAndGid) {
  // The listener binds fine; the client insists on a device it cannot have.
  auto table = load_links(rdma_medium().section(1, 2, "RdmaDevice=nosuchdev0\n"));
  ASSERT_TRUE(table) << table.status().to_string();
  auto listener = rdma_factory().listen(1, *table);
  ASSERT_TRUE(listener) << listener.status().to_string();
  const transport::LinkConfig link = client_view(*table->find(1, 2), **listener);
  auto client = rdma_factory().connect(2, link, monotonic_ns() + 10 * kSecond);
  ASSERT_FALSE(client.is_ok());
  const std::string& m = client.status().message();
  EXPECT_EQ(client.status().code(), StatusCode::kInvalidArgument) << m;
  EXPECT_NE(m.find("RdmaDevice=nosuchdev0"), std::string::npos) << m;
  EXPECT_NE(m.find("device "), std::string::npos) << m;
  EXPECT_NE(m.find(" port 1"), std::string::npos) << m;
  EXPECT_NE(m.find("GID["), std::string::npos) << m;
}

TEST_F(RdmaLink, NobodyListeningIsAClearError) {
  auto table = load_links(rdma_medium().section(1, 2, ""));
  ASSERT_TRUE(table);
  transport::LinkConfig link = *table->find(1, 2);
  link.port = 9;  // nothing listens on the discard port
  auto client = rdma_factory().connect(2, link, monotonic_ns() + 20 * kSecond);
  ASSERT_FALSE(client.is_ok());
  const std::string& m = client.status().message();
  EXPECT_NE(m.find("connecting to node 1"), std::string::npos) << m;
  EXPECT_NE(m.find("GID["), std::string::npos) << m;
  std::printf("nobody listening: %s\n", m.c_str());
}

// One non-loopback IPv4 address per RDMA device of this machine ("rxe0" ->
// "10.11.12.1"), found the way rdma_cm maps addresses to devices.
std::map<std::string, std::string> device_addresses() {
  std::map<std::string, std::string> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  rdma_event_channel* channel = rdma_create_event_channel();
  for (ifaddrs* a = list; a && channel; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    const in_addr ip = reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr;
    if ((ntohl(ip.s_addr) >> 24) == 127) continue;  // rdma_cm binds loopback to any device
    rdma_cm_id* id = nullptr;
    if (rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP) != 0) continue;
    if (rdma_bind_addr(id, a->ifa_addr) == 0 && id->verbs != nullptr) {
      char text[INET_ADDRSTRLEN] = {};
      ::inet_ntop(AF_INET, &ip, text, sizeof text);
      out.emplace(ibv_get_device_name(id->verbs->device), text);
    }
    rdma_destroy_id(id);
  }
  if (channel) rdma_destroy_event_channel(channel);
  ::freeifaddrs(list);
  return out;
}

// ListenAnyAddress=1: one listener takes connections that arrive on every
// device (each gets its queue pair, CQs and MRs on its own device), though
// the links name one HostName for the server.
TEST_F(RdmaLink, ListenAnyAddressServesEveryDevice) {
  const std::map<std::string, std::string> devices = device_addresses();
  ASSERT_FALSE(devices.empty()) << "no RDMA device holds a non-loopback IPv4 address";
  const std::string server_host = devices.begin()->second;
  std::string text;
  NodeId client = 2;
  for (const auto& [device, address] : devices)
    text += "[rdma]\nNodeId1=1\nNodeId2=" + std::to_string(client++) + "\nHostName1=" + server_host +
            "\nHostName2=" + address + "\nPortNumber=0\nListenAnyAddress=1\n";
  auto table = load_links(text);
  ASSERT_TRUE(table) << table.status().to_string();
  auto listener = rdma_factory().listen(1, *table);
  ASSERT_TRUE(listener) << listener.status().to_string();
  EXPECT_NE((*listener)->endpoint().find("every RDMA device"), std::string::npos) << (*listener)->endpoint();
  client = 2;
  for (const auto& [device, address] : devices) {
    SCOPED_TRACE(device + " " + address);
    // The client dials the server's address on its own device.
    transport::LinkConfig link = client_view(*table->find(1, client), **listener);
    link.host1 = address;
    const DeadlineNs deadline = monotonic_ns() + 20 * kSecond;
    Result<std::unique_ptr<transport::Transporter>> connected(Status(StatusCode::kInternal, "not run"));
    std::thread connector([&] { connected = rdma_factory().connect(client, link, deadline); });
    auto accepted = (*listener)->accept(deadline);
    connector.join();
    ASSERT_TRUE(connected) << connected.status().to_string();
    ASSERT_TRUE(accepted) << accepted.status().to_string();
    auto info = rdma::link_info(**accepted);
    ASSERT_TRUE(info);
    EXPECT_EQ(info->device, device);
    EXPECT_EQ((*accepted)->remote_node(), client);
    EXPECT_EQ(stream(**connected, **accepted, 1000, 300), "");
    ++client;
  }
  std::printf("one listener (%s) served %zu device(s)\n", (*listener)->endpoint().c_str(), devices.size());
}

TEST_F(RdmaLink, SmallWritesAreInlineAndFewAreSignalled) {
  LinkPair p = pair("QueueDepth=64\n");
  ASSERT_TRUE(p.server && p.client);
  constexpr uint64_t kFrames = 1000;
  uint64_t next = 0;
  for (uint64_t s = 0; s < kFrames; ++s) {
    ASSERT_TRUE(send_sequenced(*p.client, s, 16)) << s;  // 64-byte frames, one flush each
    ASSERT_EQ(receive_sequenced(*p.server, &next, 1, 10 * kSecond), "");
  }
  auto info = rdma::link_info(*p.client);
  ASSERT_TRUE(info) << info.status().to_string();
  std::printf("%s: max inline %u, %lu writes, %lu inline, %lu of %lu requests signalled, %lu credit writes\n",
              info->where.c_str(), info->max_inline_bytes, static_cast<unsigned long>(info->data_writes),
              static_cast<unsigned long>(info->inline_writes), static_cast<unsigned long>(info->signaled),
              static_cast<unsigned long>(info->posted), static_cast<unsigned long>(info->credit_writes));
  EXPECT_EQ(info->queue_depth, 64u);
  EXPECT_GE(info->data_writes, kFrames);
  if (info->max_inline_bytes >= 64 + 16) {  // the frame plus its record header and trailer
    EXPECT_EQ(info->inline_writes, info->data_writes);
  }
  // One in queue_depth/4 requests asks for a completion.
  EXPECT_GE(info->signaled, 1u);
  EXPECT_LE(info->signaled, info->posted / 16 + 1);
  // Large frames are DMA'd from the send ring, not copied inline.
  const uint64_t inline_before = info->inline_writes;
  for (uint64_t s = kFrames; s < kFrames + 50; ++s) {
    ASSERT_TRUE(send_sequenced(*p.client, s, 4000));
    ASSERT_EQ(receive_sequenced(*p.server, &next, 1, 10 * kSecond), "");
  }
  EXPECT_EQ(rdma::link_info(*p.client)->inline_writes, inline_before);
  EXPECT_FALSE(rdma::link_info(*p.client)->device.empty());
}

TEST_F(RdmaLink, CreditsComeBackWithoutReverseTraffic) {
  // A 64 KB ring and 16 receives: a one-way stream of one-frame flushes can
  // only go on if the receiver returns byte and receive credits unasked.
  LinkPair p = pair("SendBufferMemory=64K\nQueueDepth=16\n");
  ASSERT_TRUE(p.server && p.client);
  constexpr uint64_t kFrames = 20000;
  std::string receive_error;
  std::thread receiver([&] {
    uint64_t next = 0;
    receive_error = receive_sequenced(*p.server, &next, kFrames, 60 * kSecond);
  });
  const uint64_t deadline = monotonic_ns() + 60 * kSecond;
  for (uint64_t s = 0; s < kFrames && monotonic_ns() < deadline;) {
    if (send_sequenced(*p.client, s, (s * 7) % 900))
      ++s;
    else
      ASSERT_TRUE(p.client->is_up()) << p.client->down_reason().to_string();
  }
  while (p.client->flush() == FlushStatus::kPending && monotonic_ns() < deadline) std::this_thread::yield();
  receiver.join();
  EXPECT_EQ(receive_error, "");
  auto sender = rdma::link_info(*p.client);
  auto receiver_info = rdma::link_info(*p.server);
  ASSERT_TRUE(sender && receiver_info);
  // Each credit write frees at most one ring's worth, so the stream needed
  // at least bytes / ring of them; and none went the other way unasked.
  EXPECT_GE(receiver_info->credit_writes, p.client->stats().bytes_sent / sender->ring_bytes);
  EXPECT_EQ(p.server->stats().frames_sent, 0u);
  EXPECT_EQ(p.client->stats().frames_sent, kFrames);
}

TEST_F(RdmaLink, SleepingReceiverWakesOnTheCompletionChannel) {
  LinkPair p = pair();
  ASSERT_TRUE(p.server && p.client);
  for (int round = 0; round < 20; ++round) {
    ASSERT_TRUE(p.server->arm_wakeup()) << "nothing has arrived, so the receiver may sleep";
    pollfd fd{p.server->wait_fd(), POLLIN, 0};
    EXPECT_EQ(::poll(&fd, 1, 0), 0) << "wait_fd readable with nothing sent";
    ASSERT_TRUE(send_sequenced(*p.client, static_cast<uint64_t>(round), 32));
    ASSERT_EQ(::poll(&fd, 1, 10'000), 1) << "round " << round << ": the frame did not wake the sleeper";
    p.server->disarm_wakeup();
    EXPECT_EQ(::poll(&fd, 1, 0), 0) << "disarm left wait_fd readable";
    // A frame already there: arming must refuse.
    EXPECT_FALSE(p.server->arm_wakeup());
    uint64_t next = static_cast<uint64_t>(round);
    ASSERT_EQ(receive_sequenced(*p.server, &next, 1, kSecond), "");
  }
  // Each of those frames had to raise a completion: the sleeper said so.
  EXPECT_GE(rdma::link_info(*p.client)->wakeups, 20u);
}

TEST_F(RdmaLink, QueuePairErrorTakesDownOnlyThatLink) {
  auto table = load_links(rdma_medium().section(1, 2, "") + rdma_medium().section(1, 3, ""));
  ASSERT_TRUE(table) << table.status().to_string();
  auto listener = rdma_factory().listen(1, *table);
  ASSERT_TRUE(listener) << listener.status().to_string();
  std::unique_ptr<transport::Transporter> client[4], server[4];
  for (NodeId n : {NodeId{2}, NodeId{3}}) {
    const transport::LinkConfig link = client_view(*table->find(1, n), **listener);
    Result<std::unique_ptr<transport::Transporter>> c(Status(StatusCode::kInternal, "not run"));
    std::thread t([&] { c = rdma_factory().connect(n, link, monotonic_ns() + 10 * kSecond); });
    auto s = (*listener)->accept(monotonic_ns() + 10 * kSecond);
    t.join();
    ASSERT_TRUE(c && s) << c.status().to_string() << " / " << s.status().to_string();
    client[n] = std::move(c).value();
    server[(*s)->remote_node()] = std::move(s).value();
  }
  ASSERT_TRUE(rdma::inject_qp_error(*server[2]).is_ok());
  const uint64_t deadline = monotonic_ns() + 20 * kSecond;
  while ((server[2]->is_up() || client[2]->is_up()) && monotonic_ns() < deadline) {
    (void)server[2]->receive();
    (void)client[2]->receive();
    (void)send_sequenced(*client[2], 0, 10);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(server[2]->state(), LinkState::kDown);
  EXPECT_NE(server[2]->down_reason().message().find("error"), std::string::npos) << server[2]->down_reason().message();
  EXPECT_EQ(client[2]->state(), LinkState::kDown) << "the peer of a failed queue pair must notice";
  std::printf("failed side: %s\npeer: %s\n", server[2]->down_reason().message().c_str(),
              client[2]->down_reason().message().c_str());
  // Link 1-3 goes on, both ways.
  EXPECT_EQ(stream(*client[3], *server[3], 2000, 200), "");
  EXPECT_EQ(stream(*server[3], *client[3], 2000, 200), "");
}

TEST_F(RdmaLink, RingSizeIsTheSmallerBufferAndIWarpUsesDoorbells) {
  LinkPair p = pair("SendBufferMemory=256K\nReceiveBufferMemory=128K\n");
  ASSERT_TRUE(p.server && p.client);
  auto info = rdma::link_info(*p.client);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->ring_bytes, 128u << 10);
  EXPECT_EQ(p.client->send_buffer_capacity(), 128u << 10);
  EXPECT_EQ(info->iwarp, info->device.rfind("siw", 0) == 0 || info->device.rfind("iw", 0) == 0) << info->device;
  EXPECT_EQ(stream(*p.server, *p.client, 500, 3000), "");
  EXPECT_EQ(stream(*p.client, *p.server, 500, 3000), "");
}

// The hot path allocates nothing: a busy stream both ways (credit writes,
// wraps, the periodic CQ and rdma_cm checks) and sleep/wake cycles (the
// announcement's WRITE + READ, the completion channel) once warmed up.
TEST_F(RdmaLink, SteadyStateAllocatesNothing) {
  LinkPair p = pair("SendBufferMemory=64K\n");
  ASSERT_TRUE(p.server && p.client);
  uint64_t seq[2] = {0, 0}, next[2] = {0, 0};
  transport::Transporter* from[2] = {p.client.get(), p.server.get()};
  transport::Transporter* to[2] = {p.server.get(), p.client.get()};
  bool ok = true;
  const auto busy = [&](int rounds) {
    for (int i = 0; i < rounds && ok; ++i) {
      const int d = i % 2;
      while (!send_sequenced(*from[d], seq[d], 200)) (void)to[d]->receive();
      ++seq[d];
      while (from[d]->flush() == FlushStatus::kPending) {
      }
      for (;;) {
        transport::ReceiveBatch b = to[d]->receive();
        if (b.frames == 0) continue;
        frame::FrameCursor cursor(b.bytes);
        frame::SignalView view;
        while (cursor.next(view)) ok = ok && (view.word(0) | (uint64_t{view.word(1)} << 32)) == next[d]++;
        to[d]->release(b.bytes.size());
        if (next[d] == seq[d]) break;
      }
    }
  };
  const auto sleepy = [&](int rounds) {
    for (int i = 0; i < rounds && ok; ++i) {
      if (!p.server->arm_wakeup()) continue;
      ok = ok && send_sequenced(*p.client, seq[0]++, 16);
      pollfd fd{p.server->wait_fd(), POLLIN, 0};
      ok = ok && ::poll(&fd, 1, 10'000) == 1;
      p.server->disarm_wakeup();
      while (next[0] < seq[0]) {
        transport::ReceiveBatch b = p.server->receive();
        frame::FrameCursor cursor(b.bytes);
        frame::SignalView view;
        while (cursor.next(view)) ++next[0];
        p.server->release(b.bytes.size());
      }
    }
  };
  busy(4000);  // warm up: thread-local buffers, every ring offset, first credits
  sleepy(20);
  ASSERT_TRUE(ok);
  g_count_allocations = true;
  busy(20000);
  sleepy(50);
  g_count_allocations = false;
  EXPECT_EQ(g_allocations.load(), 0u) << "allocations on the hot path"
                                      << "\n"
                                      << fjord::test::first_allocation();
  EXPECT_TRUE(ok) << "frames out of order or a wake-up missing";
  EXPECT_TRUE(p.client->is_up() && p.server->is_up());
  EXPECT_GE(rdma::link_info(*p.client)->wakeups, 50u);
}

// A server slower to answer than the client's hello repeat (300 ms): on
// iWARP the client sends its hello again (at most twice), and each repeat
// lands in one of the server's data receives, which the server's data path
// counts as taken by a wake-up and reposts. The client must count them too,
// or the server, once it reposts (QueueDepth=16: after 8 wake-ups), reports
// more receives than the client ever used, and the client takes the link
// down with a protocol error. On rxe0 nothing is repeated: the client waits.
TEST_F(RdmaLink, RepeatedHellosAreCountedAsUsedReceives) {
  rdma::delay_handshake_replies(kSecond);
  LinkPair p = pair("QueueDepth=16\n");
  rdma::delay_handshake_replies(0);
  ASSERT_TRUE(p.server && p.client);
  const auto info = rdma::link_info(*p.client);
  ASSERT_TRUE(info) << info.status().to_string();
  if (info->iwarp) {
    EXPECT_GE(info->hello_repeats, 1u) << "no reply for a second, so the hello was sent again";
    EXPECT_LE(info->hello_repeats, 2u);
  } else {
    EXPECT_EQ(info->hello_repeats, 0u);
  }
  // Both ends sleep for every frame: each one is a wake-up that uses a
  // receive of the other end, reposted in batches of 8. Each side busy-waits
  // before it sends, so the other has gone to sleep (and said so) by then,
  // however fast the medium answers.
  constexpr uint64_t kFrames = 40;
  const auto let_the_peer_sleep = [] {
    for (const uint64_t until = monotonic_ns() + 2'000'000; monotonic_ns() < until;) cpu_relax();
  };
  std::string echo_error;
  std::thread echo([&] {
    for (uint64_t seq = 0; seq < kFrames && echo_error.empty(); ++seq) {
      echo_error = receive_frame(*p.server, seq, true, 30 * kSecond);
      let_the_peer_sleep();
      if (echo_error.empty()) echo_error = send_frame(*p.server, seq, 30 * kSecond);
    }
  });
  std::string error;
  for (uint64_t seq = 0; seq < kFrames && error.empty(); ++seq) {
    if (seq != 0) let_the_peer_sleep();
    error = send_frame(*p.client, seq, 30 * kSecond);
    if (error.empty()) error = receive_frame(*p.client, seq, true, 30 * kSecond);
  }
  if (!error.empty()) p.client->close("the test failed");  // ends the echo thread's wait
  echo.join();
  EXPECT_EQ(error, "");
  EXPECT_EQ(echo_error, "");
  // At least one batch of the server's receives was used up and reposted.
  const uint64_t wakeups = rdma::link_info(*p.client)->wakeups;
  EXPECT_GE(wakeups, 8u);
  std::printf("%s: %u hello repeats, then %lu wake-ups of the server\n", info->where.c_str(), info->hello_repeats,
              static_cast<unsigned long>(wakeups));
}

// ---- connections from another process -------------------------------------------

// A child process (posix_spawn: verbs state must not be forked) with its
// stdout and stderr in a file, reaped exactly once, killed if left running.
class ChildProcess {
 public:
  ChildProcess(const std::vector<std::string>& argv, const std::string& log_path) : log_path_(log_path) {
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    spawn_error_ = ::posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (spawn_error_ != 0) pid_ = -1;
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() {
    if (running()) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status_, 0);
    }
    ::unlink(log_path_.c_str());
  }

  std::string spawn_error() const { return spawn_error_ == 0 ? "" : std::strerror(spawn_error_); }
  bool running() {
    if (pid_ <= 0 || reaped_) return false;
    reaped_ = ::waitpid(pid_, &status_, WNOHANG) == pid_;
    return !reaped_;
  }
  // Waits up to timeout_ns; then "exit 0", "exit 3", "killed by signal 9",
  // or "still running" (it is killed when this object goes).
  std::string wait(uint64_t timeout_ns) {
    const uint64_t deadline = monotonic_ns() + timeout_ns;
    while (running() && monotonic_ns() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!reaped_) return "still running";
    if (WIFEXITED(status_)) return "exit " + std::to_string(WEXITSTATUS(status_));
    return "killed by signal " + std::to_string(WTERMSIG(status_));
  }
  std::string output() const {
    std::ifstream in(log_path_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  std::string log_path_;
  pid_t pid_ = -1;
  int spawn_error_ = 0;
  bool reaped_ = false;
  int status_ = 0;
};

// Accepts the way an event loop or a polling tool does: accept() with a
// short deadline, kTimeout meaning "no connection attempt waiting yet".
// slice_ns 0: wait for the listener's fd, then accept with a deadline that
// has already passed.
Result<std::unique_ptr<transport::Transporter>> accept_in_slices(transport::Listener& listener, uint64_t slice_ns,
                                                                 ChildProcess& peer) {
  const uint64_t give_up = monotonic_ns() + 60 * kSecond;
  for (;;) {
    if (slice_ns == 0) {
      pollfd fd{listener.fd(), POLLIN, 0};
      (void)::poll(&fd, 1, 100);
    }
    auto accepted = listener.accept(monotonic_ns() + slice_ns);
    if (accepted || accepted.status().code() != StatusCode::kTimeout) return accepted;
    if (!peer.running()) return Status(StatusCode::kUnavailable, "the peer process ended before a connection came up");
    if (monotonic_ns() > give_up) return Status(StatusCode::kTimeout, "no connection within 60 s");
  }
}

// Connections from another process, many in a row, each used at once: what
// latency_bench does (a listener here, a peer process connecting as node 2)
// and what a restarting peer node does. The listener is polled with short
// accept() deadlines (none, 10 ms, 100 ms): a set-up that has begun must
// finish however short the deadline that found it. Each link carries 40
// frames each way, one at a time, both ends busy-polling or both sleeping
// on the completion channel (QueueDepth=16, so the receives that wake-ups
// consume run out and are reposted several times per link).
TEST_F(RdmaLink, ConnectionsFromAnotherProcessComeUpEveryTime) {
  const char* peer = ::getenv("FJORD_RDMA_PEER");
  ASSERT_NE(peer, nullptr) << "FJORD_RDMA_PEER must name the rdma_peer program (meson and guest_checks.sh set it)";
  const std::string text = rdma_medium().section(1, 2, "QueueDepth=16\n");
  auto table = load_links(text);
  ASSERT_TRUE(table) << table.status().to_string();
  const std::string base = ::testing::TempDir() + "rdma_peer_" + std::to_string(::getpid());
  const std::string config_path = base + ".ini";
  {
    std::ofstream out(config_path);
    out << text;
  }
  auto listener = rdma_factory().listen(1, *table);
  ASSERT_TRUE(listener) << listener.status().to_string();
  const std::string port = std::to_string(client_view(*table->find(1, 2), **listener).port);

  constexpr int kConnections = 30;
  constexpr uint64_t kFrames = 40;
  constexpr uint64_t kSlicesMs[] = {0, 10, 100};
  int good = 0;
  std::string failures;
  for (int i = 0; i < kConnections; ++i) {
    const bool sleep = i % 2 == 1;
    const uint64_t slice_ms = kSlicesMs[(i / 2) % 3];  // every slice with both modes
    ChildProcess child({peer, "--config", config_path, "--port", port, "--mode", sleep ? "sleep" : "busy", "--frames",
                        std::to_string(kFrames)},
                       base + "_" + std::to_string(i) + ".log");
    std::string error = child.spawn_error();
    Result<std::unique_ptr<transport::Transporter>> link(Status(StatusCode::kInternal, "not accepted"));
    if (error.empty()) {
      link = accept_in_slices(**listener, slice_ms * 1'000'000, child);
      if (!link) error = "accept: " + link.status().to_string();
    }
    for (uint64_t seq = 0; error.empty() && seq < kFrames; ++seq) {
      error = send_frame(**link, seq, 30 * kSecond);
      if (error.empty()) error = receive_frame(**link, seq, sleep, 30 * kSecond);
    }
    if (link) {
      (*link)->close("the test is done with it");  // the peer's signal to exit
      link = Status(StatusCode::kInternal, "closed");
    }
    const std::string exit = child.wait(30 * kSecond);
    if (error.empty() && exit == "exit 0") {
      ++good;
      continue;
    }
    failures += "connection " + std::to_string(i) + (sleep ? " (sleep" : " (busy") + ", accept slices of " +
                std::to_string(slice_ms) + " ms): " + (error.empty() ? "" : error + "; ") + "peer " + exit + ": " +
                child.output() + "\n";
  }
  ::unlink(config_path.c_str());
  EXPECT_EQ(good, kConnections) << failures;
  std::printf("%d of %d connections from another process came up and carried %lu frames each way\n", good, kConnections,
              static_cast<unsigned long>(kFrames));
}

// Destructive: makes an RDMA device disappear by deleting the network
// interface under it (the driver then unregisters the device, and rdma_cm
// tells every cm_id on it), so it runs only where the runner asks for it:
// last, inside the guest (tests/rdma/guest_checks.sh), which has rxe0 and
// siw0 on separate interfaces. The device does not come back: the kernel
// finishes unregistering it only once this process has exited (siw cannot
// detach live user contexts, and librdmacm keeps one open).
TEST_F(RdmaLink, DeviceRemovalTakesDownOnlyItsLinks) {
  const char* netdev = ::getenv("FJORD_RDMA_REMOVE_NETDEV");  // dummy1 (siw0)
  const char* ip = ::getenv("FJORD_RDMA_REMOVE_IP");          // 10.11.13.1
  if (!netdev || !ip)
    GTEST_SKIP() << "removes a device: runs only with FJORD_RDMA_REMOVE_NETDEV and FJORD_RDMA_REMOVE_IP set "
                    "(tests/rdma/guest_checks.sh sets them inside the guest)";
  LinkPair stays = pair();  // on RXE_IP's device
  ASSERT_TRUE(stays.server && stays.client);
  const std::string other_ip = ::getenv("RXE_IP") ? ::getenv("RXE_IP") : "";
  ::setenv("RXE_IP", ip, 1);
  LinkPair goes = pair();
  ::setenv("RXE_IP", other_ip.c_str(), 1);
  ASSERT_TRUE(goes.server && goes.client);
  const std::string removed_device = rdma::link_info(*goes.client)->device;
  ASSERT_NE(rdma::link_info(*stays.client)->device, removed_device);

  // In the background: the interface's unregistration waits for the
  // device's last user (this process) to exit, but tells the device first.
  const std::string command = std::string("ip link delete ") + netdev + " &";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const uint64_t deadline = monotonic_ns() + 30 * kSecond;
  while ((goes.server->is_up() || goes.client->is_up()) && monotonic_ns() < deadline) {
    (void)goes.server->receive();
    (void)goes.client->receive();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(goes.client->state(), LinkState::kDown) << removed_device << " is gone but its link is up";
  ASSERT_EQ(goes.server->state(), LinkState::kDown);
  // The first sign may be a flushed receive, a disconnect or the removal
  // event; whichever it is, the reason says the device is gone and names it.
  const std::string reason = goes.client->down_reason().message() + " / " + goes.server->down_reason().message();
  EXPECT_NE(reason.find("device " + removed_device), std::string::npos) << reason;
  EXPECT_TRUE(reason.find("no longer answers") != std::string::npos || reason.find("removed") != std::string::npos ||
              reason.find("device port is") != std::string::npos)
      << reason;
  std::printf("links on the removed %s: %s\n", removed_device.c_str(), reason.c_str());
  goes = LinkPair{};
  // The link on the other device goes on, both ways.
  EXPECT_EQ(stream(*stays.client, *stays.server, 2000, 200), "");
  EXPECT_EQ(stream(*stays.server, *stays.client, 2000, 200), "");
}

}  // namespace
}  // namespace fjord::test
