// The SHM transporter's own promises, beyond the contract suite (which runs
// it too): nothing left in the filesystem however a link ends, the peer-uid
// check, futex and eventfd wake-ups across processes, bounded dead-peer
// detection, back-pressure levels that follow the ring, configuration, and
// no allocation in steady state.
//
// Tests that need a second process fork() before any link exists, so the
// child inherits no link's life line.
#include <dirent.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <set>
#include <thread>

#include "counting_new.h"
#include "fjord/base/clock.h"
#include "fjord/base/fd.h"
#include "fjord/base/mirrored_map.h"
#include "fjord/base/unix_address.h"
#include "fjord/shm/shm.h"
#include "fjord/transport/handshake.h"
#include "link_harness.h"

// ---- allocation counting (SteadyStateAllocatesNothing) --------------------
using fjord::test::g_allocations;
using fjord::test::g_count_allocations;

namespace fjord::test {
namespace {

using transport::FlushStatus;
using transport::LinkConfig;
using transport::LinkState;
using transport::SendPressure;
using transport::Transporter;
using transport::WaitResult;

constexpr uint64_t kSecond = 1'000'000'000ULL;

const Medium& shm_medium() { return *find_medium("shm"); }

transport::TransporterFactory& shm_factory() { return *test_registry().find("shm"); }

// ---- what the process holds -------------------------------------------------

// Entries of `dir` whose names mention fjord (all our names do).
std::set<std::string> fjord_entries(const char* dir) {
  std::set<std::string> out;
  if (DIR* d = ::opendir(dir)) {
    while (dirent* e = ::readdir(d))
      if (std::string(e->d_name).find("fjord") != std::string::npos) out.insert(e->d_name);
    ::closedir(d);
  }
  return out;
}

std::vector<std::string> open_fd_targets() {
  std::vector<std::string> out;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      char target[512] = {};
      const std::string path = std::string("/proc/self/fd/") + e->d_name;
      if (::readlink(path.c_str(), target, sizeof target - 1) > 0) out.emplace_back(target);
    }
    ::closedir(d);
  }
  return out;
}

std::vector<std::string> lines_containing(const char* file, const std::string& needle) {
  std::vector<std::string> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);)
    if (line.find(needle) != std::string::npos) out.push_back(line);
  return out;
}

std::size_t shm_mappings() { return lines_containing("/proc/self/maps", "memfd:fjord-shm").size(); }

bool abstract_socket_exists(const std::string& name) {
  for (const std::string& line : lines_containing("/proc/net/unix", name))
    if (line.size() >= name.size() + 1 &&
        line.compare(line.size() - name.size() - 1, std::string::npos, "@" + name) == 0)
      return true;
  return false;
}

std::string shm_key_of(const LinkConfig& link) { return "fjord-shm-" + std::to_string(link.params.get_uint("ShmKey")); }

// Snapshot of what could leak, compared after the links are gone.
struct Footprint {
  std::set<std::string> dev_shm = fjord_entries("/dev/shm");
  std::set<std::string> tmp = fjord_entries("/tmp");
  std::vector<std::string> fd_targets = open_fd_targets();
  std::size_t fds = fd_targets.size();
  std::size_t mappings = shm_mappings();
};

void expect_nothing_left(const Footprint& before, const std::string& socket_name) {
  const Footprint after;
  EXPECT_EQ(after.dev_shm, before.dev_shm) << "new entries in /dev/shm";
  EXPECT_EQ(after.tmp, before.tmp) << "new entries in /tmp";
  EXPECT_EQ(after.fds, before.fds) << "file descriptors leaked";
  EXPECT_EQ(after.mappings, before.mappings) << "shared memory still mapped";
  EXPECT_FALSE(abstract_socket_exists(socket_name)) << "@" << socket_name << " still bound";
}

// ---- two processes ----------------------------------------------------------

// One 1-2 link over a fresh endpoint; both processes use this same table.
transport::LinkTable shm_table(const std::string& extra = "") {
  auto table = load_links(shm_medium().section(1, 2, extra));
  EXPECT_TRUE(table) << table.status().to_string();
  return table ? *table : transport::LinkTable();
}

// Runs `body` in a forked child, which exits with its return value. The
// child uses no gtest macros.
template <typename Body>
pid_t fork_child(Body body) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  return pid;
}

std::unique_ptr<Transporter> connect_client(const LinkConfig& link) {
  auto t = shm_factory().connect(2, link, monotonic_ns() + 20 * kSecond);
  return t ? std::move(t).value() : nullptr;
}

// The child's far end: connect, send `frames` sequenced frames, then wait to
// be killed.
int stream_then_wait(const LinkConfig& link, uint64_t frames) {
  std::unique_ptr<Transporter> t = connect_client(link);
  if (!t) return 10;
  for (uint64_t seq = 0; seq < frames;)
    if (send_sequenced(*t, seq, 100)) ++seq;
  for (;;) ::pause();
}

struct Accepted {
  std::unique_ptr<transport::Listener> listener;
  std::unique_ptr<Transporter> link;
};

// Listens as node 1, forks `child_body` and accepts its connection.
template <typename Body>
Accepted listen_fork_accept(const transport::LinkTable& table, pid_t& child, Body child_body) {
  Accepted out;
  auto listener = shm_factory().listen(1, table);
  EXPECT_TRUE(listener) << listener.status().to_string();
  if (!listener) return out;
  out.listener = std::move(listener).value();
  child = fork_child(child_body);
  auto accepted = out.listener->accept(monotonic_ns() + 20 * kSecond);
  EXPECT_TRUE(accepted) << accepted.status().to_string();
  if (accepted) out.link = std::move(accepted).value();
  return out;
}

int wait_child(pid_t child) {
  int status = 0;
  ::waitpid(child, &status, 0);
  return status;
}

uint64_t voluntary_context_switches() {
  for (const std::string& line : lines_containing("/proc/self/status", "voluntary_ctxt_switches"))
    if (line.rfind("voluntary_ctxt_switches:", 0) == 0) return std::strtoull(line.c_str() + 24, nullptr, 10);
  return 0;
}

// ---- the tests --------------------------------------------------------------

TEST(ShmTransporterTest, NothingInTheFilesystemWhileConnected) {
  const Footprint before;
  LinkPair p = make_pair(shm_medium()).value();
  const std::string name = shm_key_of(p.server->config());
  EXPECT_TRUE(abstract_socket_exists(name)) << "the listener should be on @" << name;
  for (const std::string& line : lines_containing("/proc/net/unix", "fjord-shm"))
    EXPECT_NE(line.find(" @fjord-shm"), std::string::npos) << "a Unix socket with a filesystem path: " << line;
  EXPECT_EQ(fjord_entries("/dev/shm"), before.dev_shm);
  EXPECT_EQ(fjord_entries("/tmp"), before.tmp);
  // The descriptors the link opened (not those inherited, such as an output
  // redirected to /tmp) name no file in /dev/shm or /tmp.
  const std::vector<std::string> inherited = before.fd_targets;
  for (const std::string& target : open_fd_targets()) {
    if (std::find(inherited.begin(), inherited.end(), target) != inherited.end()) continue;
    EXPECT_TRUE(target.rfind("/dev/shm/", 0) != 0 && target.rfind("/tmp/", 0) != 0) << target;
  }
  // Both ends map the segment; its fd is closed once mapped.
  const std::vector<std::string> maps = lines_containing("/proc/self/maps", "memfd:fjord-shm");
  ASSERT_FALSE(maps.empty());
  for (const std::string& target : open_fd_targets()) EXPECT_EQ(target.find("memfd:fjord-shm"), std::string::npos);
  // The segment is mode 0600 (map_files needs CAP_SYS_ADMIN: check it when root).
  if (::geteuid() == 0) {
    const std::string range = maps.front().substr(0, maps.front().find(' '));
    struct stat st {};
    ASSERT_EQ(::stat(("/proc/self/map_files/" + range).c_str(), &st), 0) << range;
    EXPECT_EQ(st.st_mode & 07777, 0600u);
  } else {
    std::printf("not root: cannot read /proc/self/map_files, segment mode not checked\n");
  }
}

TEST(ShmTransporterTest, NothingLeftAfterAnOrderlyClose) {
  (void)test_registry();
  const Footprint before;
  std::string name;
  {
    LinkPair p = make_pair(shm_medium()).value();
    name = shm_key_of(p.server->config());
    ASSERT_TRUE(send_sequenced(*p.client, 0, 100));
    p.client->close("maintenance window");
    uint64_t next = 0;
    EXPECT_EQ(receive_sequenced(*p.server, &next, 1, 10 * kSecond), "") << "sent before the close, so delivered";
    EXPECT_EQ(p.server->wait_for_receive(10 * kSecond, 0), WaitResult::kDown);
    const std::string reason = p.server->down_reason().message();
    EXPECT_NE(reason.find("node 2 closed the shm link"), std::string::npos) << reason;
    EXPECT_NE(reason.find("maintenance window"), std::string::npos) << reason;
  }
  expect_nothing_left(before, name);
}

TEST(ShmTransporterTest, NothingLeftAfterThePeerIsKilled) {
  (void)test_registry();
  const Footprint before;
  const transport::LinkTable table = shm_table();
  const LinkConfig link = *table.find(1, 2);
  pid_t child = -1;
  {
    Accepted a = listen_fork_accept(table, child, [&] { return stream_then_wait(link, 50); });
    ASSERT_TRUE(a.link);
    uint64_t next = 0;
    ASSERT_EQ(receive_sequenced(*a.link, &next, 50, 20 * kSecond), "");
    ::kill(child, SIGKILL);
    const int status = wait_child(child);
    EXPECT_TRUE(WIFSIGNALED(status)) << status;
    EXPECT_EQ(a.link->wait_for_receive(20 * kSecond, 0), WaitResult::kDown);
    EXPECT_NE(a.link->down_reason().message().find("is gone"), std::string::npos) << a.link->down_reason().message();
  }
  expect_nothing_left(before, shm_key_of(link));
}

TEST(ShmTransporterTest, PeerOfAnotherUidIsRejectedWithAReason) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run the peer as another uid (setuid to nobody)";
  const transport::LinkTable table = shm_table();
  const LinkConfig link = *table.find(1, 2);
  auto listener = shm_factory().listen(1, table);
  ASSERT_TRUE(listener) << listener.status().to_string();
  const pid_t child = fork_child([&] {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) return 20;
    auto t = shm_factory().connect(2, link, monotonic_ns() + 20 * kSecond);
    if (t) return 21;
    if (t.status().code() != StatusCode::kRejected) return 22;
    // The server's reason, relayed by the handshake.
    const std::string& why = t.status().message();
    return why.find("node 1 rejected the shm connection from node 2") != std::string::npos &&
                   why.find("runs as uid 65534 but this process runs as uid 0") != std::string::npos
               ? 0
               : 23;
  });
  auto accepted = (*listener)->accept(monotonic_ns() + 20 * kSecond);
  const int status = wait_child(child);
  ASSERT_FALSE(accepted.is_ok());
  EXPECT_EQ(accepted.status().code(), StatusCode::kRejected);
  EXPECT_NE(accepted.status().message().find("runs as uid 65534 but this process runs as uid 0"), std::string::npos)
      << accepted.status().message();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the child should be told the reason; exit status " << status;
}

// The client checks the server's uid too, before mapping anything it sends:
// a stand-in server running as nobody accepts the handshake, and the client
// must still refuse.
TEST(ShmTransporterTest, ServerOfAnotherUidIsRefusedByTheClient) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run the server as another uid (setuid to nobody)";
  const transport::LinkTable table = shm_table();
  const LinkConfig link = *table.find(1, 2);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = fork_child([&] {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) return 40;
    UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string name = shm_key_of(link);
    std::memcpy(addr.sun_path + 1, name.data(), name.size());
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(listener.get(), 1) != 0)
      return 41;
    (void)!::write(ready[1], "r", 1);
    UniqueFd conn(::accept(listener.get(), nullptr, nullptr));
    const DeadlineNs deadline = monotonic_ns() + 20 * kSecond;
    if (!transport::send_greeting(conn.get())) return 45;
    if (!transport::recv_handshake_message(conn.get(), transport::kHandshakeRequestMagic, deadline)) return 42;
    if (!transport::send_accept(conn.get(), transport::AcceptedRequest{}, {}, deadline)) return 43;
    char byte;
    return ::read(conn.get(), &byte, 1) == 0 ? 0 : 44;  // the client hangs up
  });
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1) << "stand-in server did not start";
  ::close(ready[0]);
  ::close(ready[1]);
  auto connected = shm_factory().connect(2, link, monotonic_ns() + 20 * kSecond);
  ASSERT_FALSE(connected.is_ok());
  EXPECT_EQ(connected.status().code(), StatusCode::kRejected);
  EXPECT_NE(connected.status().message().find("runs as uid 65534 but this process runs as uid 0"), std::string::npos)
      << connected.status().message();
  const int status = wait_child(child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "stand-in server status " << status;
}

// Both sides sleep on the futex for every message (no spinning), in two
// processes: a lost wake-up would hang a round until the 10 s timeout. Each
// side busy-waits a little before it answers, so the other has gone to sleep
// by then however fast the ring is (a busy wait: no context switch of its
// own to count).
TEST(ShmTransporterTest, FutexPingPongAcrossProcessesWithBothSidesSleeping) {
  constexpr uint64_t kRounds = 3000;
  constexpr uint64_t kAnswerDelayNs = 50'000;
  const auto busy_wait = [] {
    for (const uint64_t until = monotonic_ns() + kAnswerDelayNs; monotonic_ns() < until;) cpu_relax();
  };
  const transport::LinkTable table = shm_table("ShmSpintime=0\n");
  const LinkConfig link = *table.find(1, 2);
  pid_t child = -1;
  Accepted a = listen_fork_accept(table, child, [&] {
    std::unique_ptr<Transporter> t = connect_client(link);
    if (!t) return 30;
    uint64_t next = 0;
    for (uint64_t i = 0; i < kRounds; ++i) {
      if (t->wait_for_receive(10 * kSecond, 0) != WaitResult::kReady) return 31;
      if (!receive_sequenced(*t, &next, 1, kSecond).empty()) return 32;
      busy_wait();
      if (!send_sequenced(*t, i, 32)) return 33;
    }
    return 0;
  });
  ASSERT_TRUE(a.link);
  const uint64_t switches_before = voluntary_context_switches();
  uint64_t next = 0;
  for (uint64_t i = 0; i < kRounds; ++i) {
    if (i != 0) busy_wait();
    ASSERT_TRUE(send_sequenced(*a.link, i, 32))
        << "round " << i << ": " << a.link->down_reason().to_string() << ", child status " << wait_child(child);
    ASSERT_EQ(a.link->wait_for_receive(10 * kSecond, 0), WaitResult::kReady)
        << "round " << i << ": " << a.link->down_reason().to_string();
    ASSERT_EQ(receive_sequenced(*a.link, &next, 1, kSecond), "");
  }
  const uint64_t sleeps = voluntary_context_switches() - switches_before;
  const int status = wait_child(child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  // The futex path really ran: this thread slept for most answers.
  EXPECT_GE(sleeps, kRounds / 10) << "only " << sleeps << " sleeps in " << kRounds << " rounds";
}

// One thread serves three links through epoll on their wait_fd()s, sleeping
// with arm/disarm (the eventfd path), never spinning.
TEST(ShmTransporterTest, EpollOverManyLinksNeverLosesAWakeUp) {
  constexpr int kLinks = 3;
  constexpr uint64_t kRounds = 1500;
  std::vector<LinkPair> pairs;
  for (int i = 0; i < kLinks; ++i) pairs.push_back(make_pair(shm_medium()).value());
  std::atomic<bool> failed{false};
  std::string echo_error;
  std::thread echo([&] {
    UniqueFd ep(::epoll_create1(EPOLL_CLOEXEC));
    for (int i = 0; i < kLinks; ++i) {
      epoll_event e{};
      e.events = EPOLLIN;
      e.data.u32 = static_cast<uint32_t>(i);
      ::epoll_ctl(ep.get(), EPOLL_CTL_ADD, pairs[i].server->wait_fd(), &e);
    }
    std::vector<uint64_t> next(kLinks, 0);
    while (!failed) {
      bool all_done = true;
      for (int i = 0; i < kLinks; ++i) {
        Transporter& s = *pairs[i].server;
        const uint64_t before = next[i];
        if (next[i] < kRounds && !s.receive().bytes.empty()) {
          echo_error = receive_sequenced(s, &next[i], 1, kSecond);
          if (!echo_error.empty() || !send_sequenced(s, before, 16)) failed = true;
        }
        all_done = all_done && next[i] == kRounds;
      }
      if (all_done) return;
      bool armed = true;
      for (int i = 0; i < kLinks && armed; ++i) armed = pairs[i].server->arm_wakeup();
      if (armed) {
        epoll_event ready[kLinks];
        if (::epoll_wait(ep.get(), ready, kLinks, 10'000) == 0) {
          echo_error = "epoll_wait timed out: a wake-up was lost";
          failed = true;
        }
      }
      for (int i = 0; i < kLinks; ++i) pairs[i].server->disarm_wakeup();
    }
  });
  std::vector<uint64_t> got(kLinks, 0);
  for (uint64_t round = 0; round < kRounds && !failed; ++round) {
    for (int i = 0; i < kLinks; ++i) ASSERT_TRUE(send_sequenced(*pairs[i].client, round, 16));
    for (int i = 0; i < kLinks && !failed; ++i) {
      ASSERT_EQ(pairs[i].client->wait_for_receive(10 * kSecond, 0), WaitResult::kReady) << "round " << round;
      ASSERT_EQ(receive_sequenced(*pairs[i].client, &got[i], 1, kSecond), "");
    }
  }
  echo.join();
  EXPECT_FALSE(failed) << echo_error;
}

TEST(ShmTransporterTest, WaitFdBecomesReadableWhenThePeerIsKilled) {
  const transport::LinkTable table = shm_table();
  const LinkConfig link = *table.find(1, 2);
  pid_t child = -1;
  Accepted a = listen_fork_accept(table, child, [&] { return stream_then_wait(link, 0); });
  ASSERT_TRUE(a.link);
  ASSERT_TRUE(a.link->arm_wakeup()) << "nothing was sent, so the receiver may sleep";
  ::kill(child, SIGKILL);
  wait_child(child);
  pollfd p{a.link->wait_fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 10'000), 1) << "the peer's death must wake an epoll/poll sleeper";
  a.link->disarm_wakeup();
  EXPECT_TRUE(a.link->receive().bytes.empty());
  EXPECT_FALSE(a.link->arm_wakeup()) << "a dead link must not be slept on";
  EXPECT_EQ(a.link->state(), LinkState::kDown);
  EXPECT_NE(a.link->down_reason().message().find("is gone"), std::string::npos) << a.link->down_reason().message();
}

TEST(ShmTransporterTest, BusyPollingNoticesAKilledPeerWithinBoundedPolls) {
  const transport::LinkTable table = shm_table();
  const LinkConfig link = *table.find(1, 2);
  pid_t child = -1;
  Accepted a = listen_fork_accept(table, child, [&] { return stream_then_wait(link, 20); });
  ASSERT_TRUE(a.link);
  uint64_t next = 0;
  ASSERT_EQ(receive_sequenced(*a.link, &next, 20, 20 * kSecond), "");
  ::kill(child, SIGKILL);
  wait_child(child);  // reaped: the kernel has closed its end of the life line
  uint64_t polls = 0;
  while (a.link->is_up() && polls < 100 * shm::kLifeLineEmptyPolls) {
    ASSERT_TRUE(a.link->receive().bytes.empty());
    ++polls;
  }
  EXPECT_EQ(a.link->state(), LinkState::kDown);
  // Checked at a bounded rate, not on every poll, and not never.
  EXPECT_LE(polls, shm::kLifeLineEmptyPolls + 1);
}

// Each flush is one batch in the ring; receive() hands out one batch at a
// time and says that asking again costs only a memory poll, so a caller with
// budget left takes the next one in the same poll (the runtime does).
TEST(ShmTransporterTest, EachFlushIsOneBatchAndReceiveSaysAskAgain) {
  LinkPair p = make_pair(shm_medium()).value();
  ASSERT_TRUE(send_sequenced(*p.client, 0, 32));
  ASSERT_TRUE(send_sequenced(*p.client, 1, 32));
  for (uint64_t seq = 0; seq < 2; ++seq) {
    const transport::ReceiveBatch batch = p.server->receive();
    ASSERT_EQ(batch.frames, 1u) << "batch " << seq;
    EXPECT_TRUE(batch.ask_again) << "batch " << seq;
    frame::FrameCursor cursor(batch.bytes);
    frame::SignalView view;
    ASSERT_TRUE(cursor.next(view));
    EXPECT_EQ(check_sequenced(view, seq), "");
    p.server->release(batch.bytes.size());
  }
  const transport::ReceiveBatch none = p.server->receive();
  EXPECT_EQ(none.frames, 0u);
  EXPECT_FALSE(none.ask_again);
}

TEST(ShmTransporterTest, PressureLevelsFollowTheRingBothWays) {
  LinkPair p = make_pair(shm_medium(), "ShmSize=256K\n").value();
  Transporter& c = *p.client;
  EXPECT_EQ(c.send_buffer_capacity(), 256u << 10);
  uint64_t sent = 0;
  while (send_sequenced(c, sent, 1000)) ++sent;
  EXPECT_EQ(c.send_pressure(), SendPressure::kOverload);
  EXPECT_GT(c.send_buffer_used(), (256u << 10) - 2000);
  uint64_t received = 0;
  ASSERT_EQ(receive_sequenced(*p.server, &received, sent, 10 * kSecond), "");
  // The reader drained everything: the level must drop without the sender
  // having to reserve again.
  EXPECT_EQ(c.send_buffer_used(), 0u);
  EXPECT_EQ(c.send_pressure(), SendPressure::kNormal);
  EXPECT_GE(c.stats().overload_count, 1u);
}

TEST(ShmTransporterTest, ConfigurationIsCheckedWithRanges) {
  auto too_small = load_links(shm_medium().section(1, 2, "ShmSize=32K\n"));
  ASSERT_FALSE(too_small);
  EXPECT_NE(too_small.status().message().find("ShmSize"), std::string::npos) << too_small.status().message();
  auto spin = load_links(shm_medium().section(1, 2, "ShmSpintime=2001\n"));
  ASSERT_FALSE(spin);
  EXPECT_NE(spin.status().message().find("ShmSpintime"), std::string::npos) << spin.status().message();
  // Defaults: a 4 MB ring each way.
  LinkPair p = make_pair(shm_medium()).value();
  EXPECT_EQ(p.client->send_buffer_capacity(), 4u << 20);
  EXPECT_EQ(p.server->send_buffer_capacity(), 4u << 20);
  // An odd size is rounded up to whole pages.
  LinkPair odd = make_pair(shm_medium(), "ShmSize=100K\n").value();
  EXPECT_EQ(odd.client->send_buffer_capacity(), (102400 + page_size() - 1) / page_size() * page_size());
}

TEST(ShmTransporterTest, OneEndpointPerLink) {
  // Two links of node 1 with the same ShmKey cannot both be served.
  auto same = load_links("[shm]\nNodeId1=1\nNodeId2=2\nShmKey=424242\n[shm]\nNodeId1=1\nNodeId2=3\nShmKey=424242\n");
  ASSERT_TRUE(same) << same.status().to_string();
  auto listener = shm_factory().listen(1, *same);
  ASSERT_FALSE(listener);
  EXPECT_EQ(listener.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(listener.status().message().find("ShmKey"), std::string::npos) << listener.status().message();
  // A second listener on a key already served is refused, naming the link.
  LinkPair p = make_pair(shm_medium()).value();
  auto table = load_links(
      "[shm]\nNodeId1=1\nNodeId2=2\nShmKey=" + std::to_string(p.server->config().params.get_uint("ShmKey")) + "\n");
  auto second = shm_factory().listen(1, *table);
  ASSERT_FALSE(second);
  EXPECT_EQ(second.status().code(), StatusCode::kAlreadyExists) << second.status().to_string();
  // Without ShmKey the endpoint is derived from the node ids.
  auto derived = load_links("[shm]\nNodeId1=7\nNodeId2=5\n");
  ASSERT_TRUE(derived);
  auto l = shm_factory().listen(5, *derived);
  ASSERT_TRUE(l) << l.status().to_string();
  EXPECT_EQ((*l)->endpoint(), "@fjord-shm-5-7");
}

// Another user's process that binds a link's endpoint first keeps the
// server from listening (abstract names are open to every user); the error
// says the name is squatted and by whom, not that a listener of ours
// already has it.
TEST(ShmTransporterTest, AnEndpointSquattedByAnotherUserIsReportedAsSuch) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run the squatter as another uid (setuid to nobody)";
  const transport::LinkTable table = shm_table();
  const std::string name = shm_key_of(*table.find(1, 2));
  int ready[2], done[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(done), 0);
  const pid_t child = fork_child([&] {
    ::close(done[1]);  // so that the test's close is the end of the pipe
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) return 50;
    UniqueFd squat(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    const socklen_t len = unix_address("@" + name, addr);
    if (::bind(squat.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(squat.get(), 4) != 0) return 51;
    (void)!::write(ready[1], "r", 1);
    char byte;
    return ::read(done[0], &byte, 1) >= 0 ? 0 : 52;  // until the test is done
  });
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1) << "the squatter did not start";
  auto listener = shm_factory().listen(1, table);
  ::close(done[1]);
  const int status = wait_child(child);
  for (int fd : {ready[0], ready[1], done[0]}) ::close(fd);
  ASSERT_FALSE(listener);
  EXPECT_EQ(listener.status().code(), StatusCode::kAlreadyExists);
  const std::string& why = listener.status().message();
  EXPECT_NE(why.find("@" + name), std::string::npos) << why;
  EXPECT_NE(why.find("(uid 65534), another user's process: the name is squatted"), std::string::npos) << why;
  EXPECT_NE(why.find("pid " + std::to_string(child)), std::string::npos) << why;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "squatter status " << status;
}

// Connections of another user that never finish their handshake (a
// thousand of them, more than the listener keeps) leave room for this
// user's node: its set-up goes through.
TEST(ShmTransporterTest, AnotherUsersSilentConnectionsLeaveRoomForTheNode) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to open the flood as another uid (setuid to nobody)";
  const transport::LinkTable table = shm_table();
  const LinkConfig link = *table.find(1, 2);
  auto listener = shm_factory().listen(1, table);
  ASSERT_TRUE(listener) << listener.status().to_string();
  int ready[2], done[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(done), 0);
  const pid_t flood = fork_child([&] {
    ::close(done[1]);  // so that the test's close is the end of the pipe
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) return 60;
    std::vector<UniqueFd> held;
    sockaddr_un addr{};
    const socklen_t len = unix_address((*listener)->endpoint(), addr);
    for (int i = 0; i < 1000; ++i) {
      held.emplace_back(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      (void)::connect(held.back().get(), reinterpret_cast<sockaddr*>(&addr), len);
    }
    (void)!::write(ready[1], "r", 1);
    char byte;
    return ::read(done[0], &byte, 1) >= 0 ? 0 : 61;
  });
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1) << "the flood did not start";
  for (int i = 0; i < 8; ++i) (void)(*listener)->accept(monotonic_ns() + 50'000'000ULL);  // the node takes them
  pid_t client = -1;
  client = fork_child([&] { return connect_client(link) ? 0 : 70; });
  Result<std::unique_ptr<Transporter>> accepted = Status(StatusCode::kTimeout, "nothing");
  for (const uint64_t until = monotonic_ns() + 20 * kSecond; !accepted && monotonic_ns() < until;)
    accepted = (*listener)->accept(monotonic_ns() + 500'000'000ULL);
  ::close(done[1]);
  EXPECT_TRUE(accepted) << accepted.status().to_string();
  accepted = Status(StatusCode::kTimeout, "closed");
  const int client_status = wait_child(client);
  const int flood_status = wait_child(flood);
  for (int fd : {ready[0], ready[1], done[0]}) ::close(fd);
  EXPECT_TRUE(WIFEXITED(client_status) && WEXITSTATUS(client_status) == 0) << "client status " << client_status;
  EXPECT_TRUE(WIFEXITED(flood_status) && WEXITSTATUS(flood_status) == 0) << "flood status " << flood_status;
}

TEST(ShmTransporterTest, SteadyStateAllocatesNothing) {
  LinkPair p = make_pair(shm_medium(), "ShmSize=64K\n").value();
  Transporter& c = *p.client;
  Transporter& s = *p.server;
  const uint32_t data[] = {1, 2, 3, 4};
  std::byte payload[300] = {};
  const std::span<const std::byte> sections[] = {payload};
  const frame::SignalHeader header{kTestSignal, {2, 0}, {1, 0}, 0};
  const std::size_t bytes = frame::frame_bytes_for(4, std::array<std::size_t, 1>{sizeof payload}, false);
  uint64_t received = 0;
  auto round = [&](int frames) {
    for (int i = 0; i < frames; ++i) {
      std::span<std::byte> space = c.reserve(bytes);
      if (space.empty()) break;
      c.commit(frame::pack_frame(space, header, data, sections, false), 1);
    }
    (void)c.flush();
    transport::ReceiveBatch b = s.receive();
    received += b.frames;
    s.release(b.bytes.size());
  };
  for (int i = 0; i < 1000; ++i) round(8);  // warm up: laps the 64 KB ring
  const uint64_t warm = received;
  g_allocations = 0;
  g_count_allocations = true;
  for (int i = 0; i < 20000; ++i) round(1 + i % 16);
  g_count_allocations = false;
  EXPECT_EQ(g_allocations.load(), 0u) << "allocations on the hot path"
                                      << "\n"
                                      << fjord::test::first_allocation();
  EXPECT_GT(received - warm, 100000u) << "the loop must really move frames";
  EXPECT_TRUE(c.is_up() && s.is_up());
}

}  // namespace
}  // namespace fjord::test
