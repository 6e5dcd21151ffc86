// TCP links with TLS (RequireTls, TlsSearchPath): what is refused at set-up
// and with which reason, and that a listener refusing a peer goes on serving.
// The data path itself runs the whole contract suite as the tcp_tls medium.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <fstream>
#include <thread>
#include <vector>

#include "fjord/base/clock.h"
#include "fjord/base/fd.h"
#include "fjord/base/log.h"
#include "fjord/tcp/tls_credentials.h"
#include "fjord/transport/handshake.h"
#include "fjord/transport/pending_handshakes.h"
#include "link_harness.h"
#include "tls_client_hello.h"
#include "tls_directory.h"

namespace fjord::test {
namespace {

constexpr uint64_t kSecond = 1'000'000'000ULL;

std::string tls_lines(const std::string& search_path) { return "RequireTls=1\nTlsSearchPath=" + search_path + "\n"; }

std::string tcp_section(NodeId a, NodeId b, const std::string& extra) {
  return find_medium("tcp")->section(a, b, extra);
}

void copy_file(const std::string& from, const std::string& to, mode_t mode) {
  std::ifstream in(from, std::ios::binary);
  std::ofstream out(to, std::ios::binary | std::ios::trunc);
  out << in.rdbuf();
  out.close();
  ASSERT_TRUE(in.good() || in.eof()) << from;
  ASSERT_EQ(::chmod(to.c_str(), mode), 0) << to;
}

// Frames pass both ways over a connected pair.
void expect_frames_pass(LinkPair& pair) {
  ASSERT_TRUE(send_sequenced(*pair.client, 0, 100));
  uint64_t next = 0;
  EXPECT_EQ(receive_sequenced(*pair.server, &next, 1, 5 * kSecond), "");
  ASSERT_TRUE(send_sequenced(*pair.server, 0, 3000));
  next = 0;
  EXPECT_EQ(receive_sequenced(*pair.client, &next, 1, 5 * kSecond), "");
}

class TcpTlsTest : public ::testing::Test {
 protected:
  static constexpr NodeId kNodes[] = {1, 2, 5};
  TlsDirectory cluster_{kNodes};
};

TEST_F(TcpTlsTest, BothEndsWithTlsCarryFrames) {
  auto table = load_links(tcp_section(1, 2, tls_lines(cluster_.path())));
  ASSERT_TRUE(table) << table.status().to_string();
  auto pair = connect_pair(*table, 1, *table->find(1, 2), 2);
  ASSERT_TRUE(pair) << pair.status().to_string();
  expect_frames_pass(*pair);
}

TEST_F(TcpTlsTest, RequireTlsWithoutASearchPathIsAConfigErrorNamingTheKey) {
  auto table = load_links(tcp_section(1, 2, "RequireTls=1\n"));
  ASSERT_FALSE(table);
  EXPECT_NE(table.status().message().find("TlsSearchPath"), std::string::npos) << table.status().message();
}

// The server requires TLS, the client's config does not: the client's plain
// handshake is refused naming the setting, on both sides.
TEST_F(TcpTlsTest, APlainPeerOnARequireTlsLinkIsRefusedNamingTheSetting) {
  auto server_table = load_links(tcp_section(1, 2, tls_lines(cluster_.path())));
  ASSERT_TRUE(server_table) << server_table.status().to_string();
  auto client_table = load_links(tcp_section(1, 2, ""));
  ASSERT_TRUE(client_table) << client_table.status().to_string();
  Status server_status;
  auto refused = connect_pair(*server_table, 1, *client_table->find(1, 2), 2, &server_status);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.status().code(), StatusCode::kRejected) << refused.status().to_string();
  EXPECT_NE(refused.status().message().find("requires TLS"), std::string::npos) << refused.status().message();
  EXPECT_NE(refused.status().message().find("RequireTls=1"), std::string::npos) << refused.status().message();
  EXPECT_NE(server_status.message().find("node 2 connected without it"), std::string::npos) << server_status.message();
}

// The client requires TLS, the listener has no credentials: a plain
// refusal that the client reports as such, not a TLS error on garbage.
TEST_F(TcpTlsTest, ATlsPeerOfAListenerWithoutTlsIsRefusedWithTheListenersReason) {
  auto server_table = load_links(tcp_section(1, 2, ""));
  ASSERT_TRUE(server_table) << server_table.status().to_string();
  auto client_table = load_links(tcp_section(1, 2, tls_lines(cluster_.path())));
  ASSERT_TRUE(client_table) << client_table.status().to_string();
  Status server_status;
  auto refused = connect_pair(*server_table, 1, *client_table->find(1, 2), 2, &server_status);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.status().code(), StatusCode::kRejected) << refused.status().to_string();
  EXPECT_NE(refused.status().message().find("without TLS"), std::string::npos) << refused.status().message();
  EXPECT_NE(refused.status().message().find("node 1 has no TLS credentials"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(server_status.code(), StatusCode::kRejected) << server_status.to_string();
}

// Node 2 presents a certificate signed by another cluster's CA.
TEST_F(TcpTlsTest, ACertificateFromAnotherClusterIsRefused) {
  static constexpr NodeId kOther[] = {2};
  TlsDirectory other(kOther);
  ASSERT_EQ(::unlink(other.file(std::string(tcp::kTlsCaCertificateFile)).c_str()), 0);
  auto server_table = load_links(tcp_section(1, 2, tls_lines(cluster_.path())));
  ASSERT_TRUE(server_table) << server_table.status().to_string();
  // Node 2's own files from the other cluster, the CA from this one.
  auto client_table = load_links(tcp_section(1, 2, tls_lines(other.path() + ":" + cluster_.path())));
  ASSERT_TRUE(client_table) << client_table.status().to_string();
  Status server_status;
  auto refused = connect_pair(*server_table, 1, *client_table->find(1, 2), 2, &server_status);
  ASSERT_FALSE(refused);
  ASSERT_FALSE(server_status);
  EXPECT_NE(server_status.message().find("certificate verify failed"), std::string::npos) << server_status.message();
  // The server's alert ends the client's handshake exchange.
  EXPECT_NE(refused.status().message().find("alert"), std::string::npos) << refused.status().message();
}

// Node 2 holds node 5's certificate and key (valid in this cluster) and
// connects as node 2: a certificate lends no other node's id.
TEST_F(TcpTlsTest, ACertificateOfAnotherNodeIsRefusedNamingBoth) {
  TlsDirectory stolen({});
  ASSERT_NO_FATAL_FAILURE(copy_file(cluster_.file(tcp::tls_node_certificate_file(5)),
                                    stolen.file(tcp::tls_node_certificate_file(2)), 0644));
  ASSERT_NO_FATAL_FAILURE(
      copy_file(cluster_.file(tcp::tls_node_key_file(5)), stolen.file(tcp::tls_node_key_file(2)), 0600));
  auto server_table = load_links(tcp_section(1, 2, tls_lines(cluster_.path())));
  ASSERT_TRUE(server_table) << server_table.status().to_string();
  auto client_table = load_links(tcp_section(1, 2, tls_lines(stolen.path() + ":" + cluster_.path())));
  ASSERT_TRUE(client_table) << client_table.status().to_string();
  Status server_status;
  auto refused = connect_pair(*server_table, 1, *client_table->find(1, 2), 2, &server_status);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.status().code(), StatusCode::kRejected) << refused.status().to_string();
  EXPECT_NE(refused.status().message().find("names node 5"), std::string::npos) << refused.status().message();
  EXPECT_NE(server_status.message().find("names node 5"), std::string::npos) << server_status.message();
}

TEST_F(TcpTlsTest, AKeyOthersCanReadIsRefusedNamingTheFile) {
  const std::string key = cluster_.file(tcp::tls_node_key_file(1));
  ASSERT_EQ(::chmod(key.c_str(), 0644), 0);
  auto table = load_links(tcp_section(1, 2, tls_lines(cluster_.path())));
  ASSERT_TRUE(table) << table.status().to_string();
  auto listener = test_registry().find("tcp")->listen(1, *table);
  ASSERT_FALSE(listener);
  EXPECT_NE(listener.status().message().find(key + " is readable by others"), std::string::npos)
      << listener.status().message();
}

UniqueFd connect_raw(uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) return UniqueFd();
  return fd;
}

// Whether the listener closed `fd`: what it sent read away, then the end of
// the stream or a reset.
bool closed_by_listener(int fd) {
  std::byte bytes[4096];
  for (int reads = 0; reads < 64; ++reads) {
    const ssize_t n = ::recv(fd, bytes, sizeof bytes, MSG_DONTWAIT);
    if (n > 0) continue;
    if (n == 0) return true;
    return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
  }
  return false;
}

// Reads the listener's greeting, sent in the clear as it accepts.
bool read_greeting(int fd, DeadlineNs deadline) {
  std::byte greeting[transport::kHandshakeGreetingBytes];
  std::size_t got = 0;
  while (got < sizeof greeting && monotonic_ns() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = ::recv(fd, greeting + got, sizeof greeting - got, MSG_DONTWAIT);
    if (n <= 0) return false;
    got += static_cast<std::size_t>(n);
  }
  return got == sizeof greeting;
}

// The process's log, copied to a file for as long as this lives.
class LogFile {
 public:
  explicit LogFile(std::string path) : path_(std::move(path)) { EXPECT_TRUE(log_set_file(path_)) << path_; }
  ~LogFile() {
    log_set_file("");
    ::unlink(path_.c_str());
  }
  LogFile(const LogFile&) = delete;
  LogFile& operator=(const LogFile&) = delete;
  std::size_t lines_with(const std::string& text) const {
    std::ifstream in(path_);
    std::size_t n = 0;
    for (std::string line; std::getline(in, line);) n += line.find(text) != std::string::npos ? 1 : 0;
    return n;
  }

 private:
  std::string path_;
};

// Calls `listener`'s accept() in short slices on a thread of its own until
// stopped (at the latest when this goes), counting what it returns other
// than "no connection attempt".
class AcceptLoop {
 public:
  explicit AcceptLoop(transport::Listener& listener)
      : thread_([this, &listener] {
          while (!stop_.load()) {
            auto accepted = listener.accept(monotonic_ns() + kSecond / 10);
            if (accepted || accepted.status().message().find("no connection attempt") == std::string::npos) ++served_;
          }
        }) {}
  ~AcceptLoop() { (void)stop(); }
  AcceptLoop(const AcceptLoop&) = delete;
  AcceptLoop& operator=(const AcceptLoop&) = delete;
  int stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return served_.load();
  }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> served_{0};
  std::thread thread_;  // last: starts once the counters exist
};

// A good peer connects to `listener` and frames pass both ways.
void expect_a_good_peer_connects(const transport::LinkTable& table, transport::Listener& listener) {
  const DeadlineNs deadline = monotonic_ns() + 10 * kSecond;
  const transport::LinkConfig client_link = client_view(*table.find(1, 2), listener);
  Result<std::unique_ptr<transport::Transporter>> client(Status(StatusCode::kInternal, "not run"));
  std::thread connector([&] { client = test_registry().find("tcp")->connect(2, client_link, deadline); });
  auto server = listener.accept(deadline);
  connector.join();
  ASSERT_TRUE(server) << server.status().to_string();
  ASSERT_TRUE(client) << client.status().to_string();
  LinkPair pair{nullptr, std::move(server).value(), std::move(client).value()};
  expect_frames_pass(pair);
}

// A plain peer speaking garbage, and one whose garbage starts like a TLS
// record, are refused with reasons; the listener then accepts a good peer.
TEST_F(TcpTlsTest, GarbageOnATlsListenerIsRefusedAndTheListenerServesOn) {
  auto table = load_links(tcp_section(1, 2, tls_lines(cluster_.path())));
  ASSERT_TRUE(table) << table.status().to_string();
  auto listener = test_registry().find("tcp")->listen(1, *table);
  ASSERT_TRUE(listener) << listener.status().to_string();
  std::vector<UniqueFd> garbage;
  for (const bool tls_like : {false, true}) {
    std::vector<uint8_t> bytes(300);
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 37 + 11);
    if (tls_like) bytes[0] = 0x16, bytes[1] = 0x03, bytes[2] = 0x01;
    garbage.push_back(connect_raw((*listener)->port()));
    ASSERT_TRUE(garbage.back().valid());
    ASSERT_EQ(::send(garbage.back().get(), bytes.data(), bytes.size(), MSG_NOSIGNAL), 300);
  }
  std::vector<std::string> refusals;
  const DeadlineNs deadline = monotonic_ns() + 10 * kSecond;
  while (refusals.size() < 2 && monotonic_ns() < deadline) {
    auto accepted = (*listener)->accept(std::min(deadline, monotonic_ns() + kSecond));
    ASSERT_FALSE(accepted) << "garbage was accepted as a link";
    if (accepted.status().code() != StatusCode::kTimeout) refusals.push_back(accepted.status().message());
  }
  ASSERT_EQ(refusals.size(), 2u);
  std::string all = refusals[0] + "\n" + refusals[1];
  EXPECT_NE(all.find("TLS handshake"), std::string::npos) << all;
  EXPECT_NE(all.find("rejected tcp connection"), std::string::npos) << all;

  const transport::LinkConfig client_link = client_view(*table->find(1, 2), **listener);
  Result<std::unique_ptr<transport::Transporter>> client(Status(StatusCode::kInternal, "not run"));
  std::thread connector([&] { client = test_registry().find("tcp")->connect(2, client_link, deadline); });
  auto server = (*listener)->accept(deadline);
  connector.join();
  ASSERT_TRUE(server) << server.status().to_string();
  ASSERT_TRUE(client) << client.status().to_string();
  LinkPair pair{nullptr, std::move(server).value(), std::move(client).value()};
  expect_frames_pass(pair);
}

// One recv() takes several records; those not yet decrypted wait inside the
// session, where wait_fd() does not show them. A receiver that arms its
// wake-up right after releasing each batch (as a node's poll loop does)
// must never be put to sleep while they do: once the sender has sent all,
// a sleep that ends on its timeout with frames still to come is a lost
// wake-up.
TEST_F(TcpTlsTest, ArmingAfterEachBatchLosesNoWakeUpToBytesInsideTheSession) {
  auto table = load_links(tcp_section(1, 2, tls_lines(cluster_.path()) + "ReceiveBufferMemory=64K\n"));
  ASSERT_TRUE(table) << table.status().to_string();
  auto pair = connect_pair(*table, 1, *table->find(1, 2), 2);
  ASSERT_TRUE(pair) << pair.status().to_string();
  constexpr uint64_t kFrames = 600;
  std::atomic<bool> sent_all{false};
  std::thread sender([&] {
    const DeadlineNs give_up = monotonic_ns() + 30 * kSecond;
    for (uint64_t seq = 0; seq < kFrames && monotonic_ns() < give_up;)
      if (send_sequenced(*pair->client, seq, 3000))
        ++seq;
      else
        std::this_thread::yield();
    while (pair->client->flush() == transport::FlushStatus::kPending && monotonic_ns() < give_up)
      std::this_thread::yield();
    sent_all = true;
  });
  uint64_t next = 0;
  int slept_out = 0;
  const DeadlineNs deadline = monotonic_ns() + 60 * kSecond;
  while (next < kFrames && monotonic_ns() < deadline && pair->server->is_up()) {
    const transport::ReceiveBatch batch = pair->server->receive();
    frame::FrameCursor cursor(batch.bytes);
    frame::SignalView view;
    while (cursor.next(view)) {
      ASSERT_EQ(check_sequenced(view, next), "");
      ++next;
    }
    pair->server->release(batch.bytes.size());
    if (next == kFrames || !pair->server->arm_wakeup()) continue;
    const bool all_were_sent = sent_all;
    pollfd p{pair->server->wait_fd(), POLLIN, 0};
    if (::poll(&p, 1, 3000) == 0 && all_were_sent) ++slept_out;
    pair->server->disarm_wakeup();
  }
  sender.join();
  EXPECT_EQ(next, kFrames) << pair->server->down_reason().to_string();
  EXPECT_EQ(slept_out, 0) << "a sleep ended on its timeout with frames waiting";
}

// A peer that starts a TLS record and stops waits for the rest of it in its
// own slot, as a silent plain peer does: a good peer behind it connects at
// once, no refusal comes of the stalled one, and it stays open (until its
// set-up deadline).
TEST_F(TcpTlsTest, AStalledTlsPeerHoldsTheListenerOnlyBriefly) {
  auto table = load_links(tcp_section(1, 2, tls_lines(cluster_.path())));
  ASSERT_TRUE(table) << table.status().to_string();
  auto listener = test_registry().find("tcp")->listen(1, *table);
  ASSERT_TRUE(listener) << listener.status().to_string();
  // A record header announcing 128 bytes, then 11 of them, then silence.
  const uint8_t partial[16] = {0x16, 0x03, 0x01, 0x00, 0x80, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  UniqueFd stalled = connect_raw((*listener)->port());
  ASSERT_TRUE(stalled.valid());
  ASSERT_EQ(::send(stalled.get(), partial, sizeof partial, MSG_NOSIGNAL), 16);
  const uint64_t start = monotonic_ns();
  const DeadlineNs deadline = start + 20 * kSecond;
  const transport::LinkConfig client_link = client_view(*table->find(1, 2), **listener);
  Result<std::unique_ptr<transport::Transporter>> client(Status(StatusCode::kInternal, "not run"));
  std::thread connector([&] { client = test_registry().find("tcp")->connect(2, client_link, deadline); });
  Result<std::unique_ptr<transport::Transporter>> server(Status(StatusCode::kInternal, "not run"));
  std::string refusals;
  while (!server && monotonic_ns() < deadline) {
    server = (*listener)->accept(std::min(deadline, monotonic_ns() + kSecond));
    if (!server && server.status().message().find("no connection attempt") == std::string::npos)
      refusals += server.status().message() + "\n";
  }
  connector.join();
  ASSERT_TRUE(server) << server.status().to_string() << "\n" << refusals;
  ASSERT_TRUE(client) << client.status().to_string();
  EXPECT_LT(monotonic_ns() - start, 8 * kSecond) << "the stalled peer held the listener for its whole set-up budget";
  EXPECT_EQ(refusals, "") << "the stalled peer was refused before its set-up deadline";
  EXPECT_FALSE(closed_by_listener(stalled.get())) << "the stalled peer lost its slot with room to spare";
  LinkPair pair{nullptr, std::move(server).value(), std::move(client).value()};
  expect_frames_pass(pair);
}

// Stalled TLS set-ups wait under the bounds of every set-up: a source's
// connections past its bound close its oldest stalled one, whatever step of
// TLS it stalled at, and the others are closed at their set-up deadline.
// None reaches accept()'s caller, and the listener serves a good peer after.
TEST_F(TcpTlsTest, StalledTlsSetUpsPastTheBoundAreClosedOldestFirstThenAtTheirDeadline) {
  auto table = load_links(tcp_section(1, 2, tls_lines(cluster_.path())));
  ASSERT_TRUE(table) << table.status().to_string();
  auto listener = test_registry().find("tcp")->listen(1, *table);
  ASSERT_TRUE(listener) << listener.status().to_string();
  const std::vector<uint8_t> hello = tls_client_hello();
  ASSERT_GT(hello.size(), 64u);
  LogFile log("/tmp/fjord-tls-stall-test-" + std::to_string(::getpid()) + ".log");
  AcceptLoop server(**listener);
  constexpr std::size_t kEvicted = 8;
  constexpr std::size_t kStalled = transport::PendingHandshakes::kMaxPendingPerSource + kEvicted;
  const uint64_t start = monotonic_ns();
  std::vector<UniqueFd> peers;
  for (std::size_t i = 0; i < kStalled && monotonic_ns() < start + 20 * kSecond; ++i) {
    peers.push_back(connect_raw((*listener)->port()));
    ASSERT_TRUE(peers.back().valid()) << "peer " << i;
    // The greeting in the clear, then the whole ClientHello or half of it.
    EXPECT_TRUE(read_greeting(peers.back().get(), start + 20 * kSecond)) << "peer " << i;
    const std::size_t bytes = i % 2 == 0 ? hello.size() : hello.size() / 2;
    EXPECT_EQ(::send(peers.back().get(), hello.data(), bytes, MSG_NOSIGNAL), static_cast<ssize_t>(bytes));
  }
  ASSERT_EQ(peers.size(), kStalled) << "the listener took too long to greet the stalled peers";
  std::size_t closed = 0;
  for (const uint64_t give_up = monotonic_ns() + 5 * kSecond; closed < kEvicted && monotonic_ns() < give_up;) {
    closed = 0;
    for (std::size_t i = 0; i < kEvicted; ++i) closed += closed_by_listener(peers[i].get()) ? 1 : 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(closed, kEvicted) << "the oldest stalled set-ups kept their slots past the bound of their source";
  for (std::size_t i = kEvicted; i < kStalled; ++i)
    EXPECT_FALSE(closed_by_listener(peers[i].get())) << "peer " << i << " lost its slot with room to spare";
  // The rest, at their set-up deadline (kSetupBudgetNs after their accept).
  const uint64_t give_up = start + transport::kSetupBudgetNs + 10 * kSecond;
  for (std::size_t i = kEvicted; i < kStalled; ++i) {
    while (!closed_by_listener(peers[i].get()) && monotonic_ns() < give_up)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_TRUE(closed_by_listener(peers[i].get())) << "peer " << i << " outlived its set-up deadline";
  }
  EXPECT_EQ(server.stop(), 0) << "a stalled set-up reached accept()'s caller";
  EXPECT_GE(log.lines_with("still waiting for its handshake to make room"), 1u);
  EXPECT_GE(log.lines_with("that sent no whole handshake in"), 1u);
  peers.clear();
  expect_a_good_peer_connects(*table, **listener);
}

}  // namespace
}  // namespace fjord::test
