// Set-up under a flood: a thousand connections to the data node's TCP port
// that never send a whole handshake (silent ones, and slow ones that
// trickle a few bytes), from several loopback addresses, hold neither the
// slot nor the descriptor a well-behaved API node needs: it connects and
// reads the committed rows, the node keeps a bounded number of descriptors
// for them, and its log says so in a few lines a second.
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

}  // namespace
}  // namespace fjord::test
