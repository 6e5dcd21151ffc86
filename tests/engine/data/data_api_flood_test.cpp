// Set-up under a flood: a thousand connections to the data node's TCP port
// that never send a whole handshake (silent ones, and slow ones that
// trickle a few bytes, or stall in a TLS handshake), from several loopback
// addresses, hold neither the slot nor the descriptor a well-behaved API
// node needs: it connects and reads the committed rows, the node keeps a
// bounded number of descriptors for them, and its log says so in a few
// lines a second.
#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "data_api_fixture.h"
#include "fjord/base/clock.h"
#include "fjord/base/fd.h"
#include "fjord/base/log.h"
#include "fjord/transport/handshake.h"
#include "fjord/transport/pending_handshakes.h"
#include "tls_client_hello.h"
#include "tls_directory.h"

namespace fjord::test {
namespace {

using transport::PendingHandshakes;

constexpr int kFloodConnections = 1000;
constexpr int kSources = 8;    // 127.0.0.1 .. 127.0.0.8; the API node's own among them
constexpr int kSlowEvery = 5;  // every fifth connection trickles bytes

std::size_t open_descriptors() {
  std::size_t n = 0;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  while (const dirent* e = ::readdir(dir))
    if (e->d_name[0] != '.') ++n;
  ::closedir(dir);
  return n;
}

// A non-blocking connect to the node's port from 127.0.0.<source>.
UniqueFd flood_connection(uint16_t port, int source) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  sockaddr_in from{};
  from.sin_family = AF_INET;
  from.sin_addr.s_addr = htonl(INADDR_LOOPBACK + static_cast<uint32_t>(source) - 1);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) return {};
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof to) != 0 && errno != EINPROGRESS) return {};
  return fd;
}

// Waits (bounded) until every connection has completed or failed.
int wait_connected(const std::vector<UniqueFd>& fds, uint64_t deadline_ns) {
  int connected = 0;
  for (const UniqueFd& fd : fds) {
    pollfd p{fd.get(), POLLOUT, 0};
    while (monotonic_ns() < deadline_ns && ::poll(&p, 1, 100) == 0) {
    }
    int error = 0;
    socklen_t len = sizeof error;
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &len);
    if ((p.revents & POLLOUT) != 0 && error == 0) ++connected;
  }
  return connected;
}

// The slow ones send the first bytes of a handshake request (its magic),
// one byte at a time, never the whole prefix.
void trickle(const std::vector<UniqueFd>& fds, const std::atomic<bool>& stop) {
  const uint32_t magic = transport::kHandshakeRequestMagic;
  for (std::size_t sent = 0; sent < sizeof magic && !stop.load(); ++sent) {
    for (std::size_t i = 0; i < fds.size(); i += kSlowEvery)
      (void)::send(fds[i].get(), reinterpret_cast<const char*>(&magic) + sent, 1, MSG_NOSIGNAL);
    for (int slept = 0; slept < 10 && !stop.load(); ++slept) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::size_t lines_with(const std::string& path, const std::string& text) {
  std::ifstream in(path);
  std::size_t n = 0;
  for (std::string line; std::getline(in, line);) n += line.find(text) != std::string::npos ? 1 : 0;
  return n;
}

TEST_F(DataApiTest, AThousandSilentOrSlowConnectionsLeaveRoomForAWellBehavedClient) {
  rlimit limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_max < 2 * kFloodConnections)
    GTEST_SKIP() << "the descriptor limit (" << limit.rlim_max << ") is below the flood's needs";
  const rlimit saved = limit;
  limit.rlim_cur = limit.rlim_max;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &limit), 0);
  for (uint64_t id = 1; id <= 20; ++id)
    ASSERT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(id, static_cast<int64_t>(id) * 7)); }));
  const std::string log_path = "/tmp/fjord-flood-test-" + std::to_string(::getpid()) + ".log";
  ASSERT_TRUE(log_set_file(log_path));

  const std::size_t before = open_descriptors();
  const uint64_t flood_start = monotonic_ns();
  std::vector<UniqueFd> flood;
  for (int i = 0; i < kFloodConnections; ++i) {
    flood.push_back(flood_connection(cluster_->server_port(), 1 + i % kSources));
    ASSERT_TRUE(flood.back().valid()) << "flood connection " << i << ": " << std::strerror(errno);
  }
  const int connected = wait_connected(flood, monotonic_ns() + 20'000'000'000ULL);
  std::atomic<bool> stop{false};
  std::thread slow([&] { trickle(flood, stop); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the node has taken what it will

  const uint64_t t0 = monotonic_ns();
  auto fresh = cluster_->connect(51);
  const uint64_t connect_ns = monotonic_ns() - t0;
  stop = true;
  slow.join();
  ASSERT_TRUE(fresh) << fresh.status().to_string();
  std::printf("a well-behaved API node connected in %.1f ms with %d flood connections open (%d accepted)\n",
              static_cast<double>(connect_ns) / 1e6, kFloodConnections, connected);
  EXPECT_LT(connect_ns, transport::kSetupBudgetNs / 2) << "the flood held the new client for most of its budget";
  // The node holds at most kMaxPending descriptors for the flood (the test
  // holds one per flood connection, the new link a few).
  const std::size_t node_extra = open_descriptors() - before - flood.size();
  EXPECT_LE(node_extra, PendingHandshakes::kMaxPending + 16);

  auto table = (*fresh)->get_table("accounts");
  ASSERT_TRUE(table) << table.status().to_string();
  for (uint64_t id = 1; id <= 20; ++id) {
    api::Transaction& tx = (*fresh)->start_transaction();
    api::Operation& op = tx.read(**table, key_of(id));
    ASSERT_TRUE(tx.execute(api::ExecType::kCommit)) << "row " << id;
    EXPECT_EQ(op.value(kBalance).as_int64(), static_cast<int64_t>(id) * 7);
    tx.close();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // the last second's summary is due
  log_set_file("");
  flood.clear();
  const double seconds = static_cast<double>(monotonic_ns() - flood_start) / 1e9;
  const std::size_t closed_lines = lines_with(log_path, "closed a connection from") +
                                   lines_with(log_path, "pending set-ups closed in the last second");
  EXPECT_GE(lines_with(log_path, "pending set-ups closed in the last second, most"), 1u);
  EXPECT_LE(static_cast<double>(closed_lines), 2 * seconds + 4) << "flood log lines are not rate-limited";
  ::unlink(log_path.c_str());
  ::setrlimit(RLIMIT_NOFILE, &saved);
}

// The same flood against a node whose links require TLS, where a set-up
// has more steps to stall at: silent connections, and connections that
// read the greeting (in the clear) and then send half a ClientHello, or all
// of it, and stop mid-handshake. A well-behaved API node still connects
// through TLS and reads the committed rows, and the node holds a bounded
// number of descriptors for the flood.
class DataApiTlsFloodTest : public DataApiTest {
 protected:
  static constexpr NodeId kNodes[] = {1, 50, 51, 52};
  void SetUp() override {
    ClusterOptions options;
    options.extra_ndbd = "[tcp default]\nRequireTls=1\nTlsSearchPath=" + credentials_.path() + "\n";
    start(options);
  }
  TlsDirectory credentials_{kNodes};
};

// Each open connection but every third reads the greeting (bounded by
// `deadline` in all) and sends the ClientHello, whole or half of it: the
// flood's connections in each step of a TLS set-up. Returns how many were
// sent, some perhaps to connections the node had closed by then.
int stall_in_tls(const std::vector<UniqueFd>& fds, const std::vector<uint8_t>& hello, uint64_t deadline_ns) {
  int sent = 0;
  for (std::size_t i = 0; i < fds.size(); ++i) {
    if (i % 3 == 0) continue;  // silent
    std::byte greeting[transport::kHandshakeGreetingBytes];
    std::size_t got = 0;
    while (got < sizeof greeting && monotonic_ns() < deadline_ns) {
      pollfd p{fds[i].get(), POLLIN, 0};
      if (::poll(&p, 1, 10) <= 0) break;  // no greeting now: the node has not taken it, or closed it
      const ssize_t n = ::recv(fds[i].get(), greeting + got, sizeof greeting - got, MSG_DONTWAIT);
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    if (got < sizeof greeting) continue;
    const std::size_t bytes = i % 3 == 1 ? hello.size() / 2 : hello.size();
    if (::send(fds[i].get(), hello.data(), bytes, MSG_NOSIGNAL) == static_cast<ssize_t>(bytes)) ++sent;
  }
  return sent;
}

TEST_F(DataApiTlsFloodTest, StalledTlsHandshakesLeaveRoomForAWellBehavedTlsClient) {
  rlimit limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_max < 2 * kFloodConnections)
    GTEST_SKIP() << "the descriptor limit (" << limit.rlim_max << ") is below the flood's needs";
  const rlimit saved = limit;
  limit.rlim_cur = limit.rlim_max;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &limit), 0);
  for (uint64_t id = 1; id <= 20; ++id)
    ASSERT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(id, static_cast<int64_t>(id) * 7)); }));
  const std::vector<uint8_t> hello = tls_client_hello();
  ASSERT_GT(hello.size(), 64u);
  uint64_t t0 = monotonic_ns();
  auto quiet = cluster_->connect(52);
  const uint64_t quiet_ns = monotonic_ns() - t0;
  ASSERT_TRUE(quiet) << quiet.status().to_string();

  const std::size_t before = open_descriptors();
  std::vector<UniqueFd> flood;
  for (int i = 0; i < kFloodConnections; ++i) {
    flood.push_back(flood_connection(cluster_->server_port(), 1 + i % kSources));
    ASSERT_TRUE(flood.back().valid()) << "flood connection " << i << ": " << std::strerror(errno);
  }
  const int connected = wait_connected(flood, monotonic_ns() + 20'000'000'000ULL);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the node has taken what it will
  const int sent = stall_in_tls(flood, hello, monotonic_ns() + 10'000'000'000ULL);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // and answered the whole ClientHellos

  t0 = monotonic_ns();
  auto fresh = cluster_->connect(51);
  const uint64_t connect_ns = monotonic_ns() - t0;
  ASSERT_TRUE(fresh) << fresh.status().to_string();
  std::printf(
      "a well-behaved API node connected over TLS in %.1f ms with %d flood connections open (%d accepted, %d sent all "
      "or half of a ClientHello); %.1f ms without a flood\n",
      static_cast<double>(connect_ns) / 1e6, kFloodConnections, connected, sent, static_cast<double>(quiet_ns) / 1e6);
  EXPECT_GT(sent, 0) << "no flood connection got as far as TLS";
  // Ten times the target (100 ms), far above what a TLS set-up costs on a
  // loaded host; a TLS set-up that waits for any stalled one takes longer.
  EXPECT_LT(connect_ns, 1'000'000'000ULL) << "the flood held the new client up";
  const std::size_t node_extra = open_descriptors() - before - flood.size();
  EXPECT_LE(node_extra, PendingHandshakes::kMaxPending + 16);

  for (uint64_t id = 1; id <= 20; ++id) {
    api::Transaction& tx = (*fresh)->start_transaction();
    api::Operation& op = tx.read(*table_, key_of(id));
    ASSERT_TRUE(tx.execute(api::ExecType::kCommit)) << "row " << id;
    EXPECT_EQ(op.value(kBalance).as_int64(), static_cast<int64_t>(id) * 7);
    tx.close();
  }
  flood.clear();
  ::setrlimit(RLIMIT_NOFILE, &saved);
}

}  // namespace
}  // namespace fjord::test
