// libfjord-sockets (tools/sockets): two processes run tools/sockets/
// sockets_peer with and without the library under LD_PRELOAD; every byte of
// the echoed stream is checked, and FJORD_SOCKETS_LOG=1 tells which path
// each connection took. Fjord's TCP transporter (latency_bench ping) and
// real programs (sockperf, redis, when installed) run under it too.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool program_exists(const std::string& name) {
  return std::system(("command -v " + name + " >/dev/null 2>&1").c_str()) == 0;
}

// A child process with extra environment, its stdout and stderr in files.
// Killed (and reaped) when the test ends, whatever happened.
class Process {
 public:
  Process(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
    static int counter = 0;
    const std::string base = "/tmp/fjord-sockets-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    out_path_ = base + ".out";
    err_path_ = base + ".err";
    pid_ = ::fork();
    if (pid_ == 0) {
      for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));
      if (!std::freopen(out_path_.c_str(), "w", stdout) || !std::freopen(err_path_.c_str(), "w", stderr)) _exit(126);
      std::vector<char*> args;
      for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execvp(args[0], args.data());
      _exit(127);
    }
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process() {
    if (pid_ > 0 && !done_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::remove(out_path_.c_str());
    std::remove(err_path_.c_str());
  }

  // The exit status (as waitpid), or -1 if it did not end within `limit`.
  int wait(std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done_) {
      const pid_t r = ::waitpid(pid_, &status_, WNOHANG);
      if (r == pid_)
        done_ = true;
      else if (std::chrono::steady_clock::now() > deadline)
        return -1;
      else
        std::this_thread::sleep_for(5ms);
    }
    return status_;
  }
  void kill_now() { ::kill(pid_, SIGKILL); }
  std::string out() const { return read_file(out_path_); }
  std::string err() const { return read_file(err_path_); }
  // The first line of stdout (a server's port), waiting for it up to `limit`.
  std::string first_line(std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      const std::string text = out();
      if (const auto end = text.find('\n'); end != std::string::npos) return text.substr(0, end);
      std::this_thread::sleep_for(5ms);
    }
    return "";
  }

 private:
  pid_t pid_ = -1;
  int status_ = 0;
  bool done_ = false;
  std::string out_path_;
  std::string err_path_;
};

// A port nobody listens on now (the kernel's pick for port 0).
std::string free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &length);
  ::close(fd);
  return std::to_string(ntohs(a.sin_port));
}

// Waits until something accepts connections on 127.0.0.1:port.
bool wait_listening(const std::string& port, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(std::stoi(port)));
    const bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    if (up) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

bool exited_ok(int status) { return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0; }

class SocketsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    library_ = env_or_empty("FJORD_SOCKETS_LIB");
    peer_ = env_or_empty("FJORD_SOCKETS_PEER");
    ASSERT_FALSE(library_.empty()) << "FJORD_SOCKETS_LIB is not set (meson test sets it)";
    ASSERT_FALSE(peer_.empty()) << "FJORD_SOCKETS_PEER is not set (meson test sets it)";
  }
  std::vector<std::string> with_library() const { return {"LD_PRELOAD=" + library_, "FJORD_SOCKETS_LOG=1"}; }
  static std::vector<std::string> without_library() { return {"FJORD_SOCKETS_LOG=1"}; }

  struct Outcome {
    std::string server_err;
    std::string client_out;
    std::string client_err;
  };
  // Runs one echo: the server in `mode`, the client sending `bytes`.
  Outcome echo(const std::vector<std::string>& server_env, const std::vector<std::string>& client_env,
               const std::string& mode, uint64_t bytes, bool banner = false, bool nonblocking_connect = false,
               bool receive_timeout = false) {
    std::vector<std::string> server_args = {peer_, "server", mode};
    if (banner) server_args.push_back("banner");
    Process server(server_args, server_env);
    const std::string port = server.first_line(10s);
    EXPECT_FALSE(port.empty()) << "the server printed no port: " << server.err();
    std::vector<std::string> client_args = {peer_, "client", port, std::to_string(bytes), "12345"};
    if (banner) client_args.push_back("banner");
    if (nonblocking_connect) client_args.push_back("nonblocking-connect");
    if (receive_timeout) client_args.push_back("rcvtimeo");
    Process client(client_args, client_env);
    const int client_status = client.wait(30s);
    const int server_status = server.wait(10s);
    Outcome o{server.err(), client.out(), client.err()};
    EXPECT_TRUE(exited_ok(client_status)) << "client status " << client_status << ": " << o.client_err;
    EXPECT_TRUE(exited_ok(server_status)) << "server status " << server_status << ": " << o.server_err;
    EXPECT_EQ(o.client_out, "ok " + std::to_string(bytes) + "\n");
    return o;
  }

  std::string library_;
  std::string peer_;
};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST_F(SocketsTest, BlockingEchoMovesToShmAndKeepsEveryByte) {
  const Outcome o = echo(with_library(), with_library(), "blocking", 6'000'000);
  EXPECT_TRUE(contains(o.server_err, "shm (accepted)")) << o.server_err;
  EXPECT_TRUE(contains(o.client_err, ": shm (port")) << o.client_err;
}

TEST_F(SocketsTest, PollServerOnShmKeepsEveryByte) {
  const Outcome o = echo(with_library(), with_library(), "poll", 6'000'000);
  EXPECT_TRUE(contains(o.server_err, "shm (accepted)")) << o.server_err;
}

TEST_F(SocketsTest, EdgeTriggeredEpollServerOnShmKeepsEveryByte) {
  const Outcome o = echo(with_library(), with_library(), "epoll", 6'000'000);
  EXPECT_TRUE(contains(o.server_err, "shm (accepted)")) << o.server_err;
}

TEST_F(SocketsTest, ServerThatSpeaksFirstOnShm) {
  const Outcome o = echo(with_library(), with_library(), "epoll", 100'000, true);
  EXPECT_TRUE(contains(o.server_err, "shm (accepted)")) << o.server_err;
}

// SO_RCVTIMEO bounds a blocking receive on SHM as on the kernel's TCP.
TEST_F(SocketsTest, ReceiveTimeoutEndsABlockingReadOnShm) {
  const Outcome o = echo(with_library(), with_library(), "blocking", 100'000, false, false, true);
  EXPECT_TRUE(contains(o.client_err, ": shm (port")) << o.client_err;
}

// shutdown() from another thread ends a receive blocked on SHM with end of
// file (a common way to stop a reader thread).
TEST_F(SocketsTest, ShutdownFromAnotherThreadEndsABlockedReceive) {
  Process server({peer_, "server", "blocking"}, with_library());
  const std::string port = server.first_line(10s);
  ASSERT_FALSE(port.empty()) << server.err();
  Process client({peer_, "client", port, "0", "1", "shutdown-wakes"}, with_library());
  EXPECT_TRUE(exited_ok(client.wait(10s))) << client.err();
  EXPECT_EQ(client.out(), "ok shutdown\n");
  EXPECT_TRUE(contains(client.err(), ": shm (port")) << client.err();
  EXPECT_TRUE(exited_ok(server.wait(10s))) << server.err();
}

// The parent closes its copy right after fork: the connection stays up
// for the child, which echoes everything and then ends it.
TEST_F(SocketsTest, ForkingServerHandsTheConnectionToItsChild) {
  const Outcome o = echo(with_library(), with_library(), "fork", 2'000'000);
  EXPECT_TRUE(contains(o.server_err, "shm (accepted)")) << o.server_err;
}

// One thread connects to its own listener before accepting: no answer can
// come in time, so the connecting side aborts; the accepting side answers
// late (blocking connect) or finds the hello late (non-blocking connect).
// Either way every agreement byte is taken off the streams and the
// messages arrive exact over the kernel.
TEST_F(SocketsTest, SelfConnectBeforeAcceptFallsBackWithExactStreams) {
  for (const bool nonblocking : {false, true}) {
    std::vector<std::string> env = with_library();
    env.emplace_back("FJORD_SOCKETS_CONNECT_WAIT_MS=30");
    env.emplace_back("FJORD_SOCKETS_ACCEPT_WAIT_MS=0");
    std::vector<std::string> args = {peer_, "self"};
    if (nonblocking) args.emplace_back("nonblocking-connect");
    Process self(args, env);
    EXPECT_TRUE(exited_ok(self.wait(10s))) << "non-blocking " << nonblocking << ": " << self.err();
    EXPECT_EQ(self.out(), "ok self\n");
    EXPECT_TRUE(contains(self.err(), "kernel (no answer in time)")) << self.err();
  }
}

// The agreement runs at the first data call once the connect completed; the
// epoll registration made while connecting moves to the library's.
TEST_F(SocketsTest, NonBlockingConnectMovesToShmAtTheFirstWrite) {
  const Outcome o = echo(with_library(), with_library(), "epoll", 2'000'000, false, true);
  EXPECT_TRUE(contains(o.server_err, "shm (accepted)")) << o.server_err;
  EXPECT_TRUE(contains(o.client_err, ": shm (port")) << o.client_err;
}

TEST_F(SocketsTest, ClientWithoutLibraryStaysOnKernelWithServerSpeakingFirst) {
  const Outcome o = echo(with_library(), without_library(), "blocking", 200'000, true);
  EXPECT_TRUE(contains(o.server_err, "kernel (no hello from the peer)")) << o.server_err;
}

TEST_F(SocketsTest, ClientWithoutLibraryStaysOnKernelWithPollServer) {
  const Outcome o = echo(with_library(), without_library(), "poll", 200'000);
  EXPECT_TRUE(contains(o.server_err, "kernel (no hello from the peer)")) << o.server_err;
}

TEST_F(SocketsTest, SilentServerWithoutLibrary) {
  const Outcome o = echo(without_library(), with_library(), "blocking", 200'000);
  EXPECT_TRUE(contains(o.client_err, "kernel (no library listener")) << o.client_err;
}

TEST_F(SocketsTest, ServerWithoutLibrarySpeaksFirst) {
  const Outcome o = echo(without_library(), with_library(), "poll", 200'000, true);
  EXPECT_TRUE(contains(o.client_err, "kernel (no library listener")) << o.client_err;
}

TEST_F(SocketsTest, OffSwitchKeepsTheKernelPath) {
  std::vector<std::string> off = with_library();
  off.push_back("FJORD_SOCKETS=off");
  const Outcome o = echo(off, off, "epoll", 200'000);
  EXPECT_FALSE(contains(o.server_err, "libfjord-sockets")) << o.server_err;
  EXPECT_FALSE(contains(o.client_err, "libfjord-sockets")) << o.client_err;
}

// A client killed -9 in the middle of a stream: the server's blocked call
// fails with a reset, as it does on the kernel's TCP, rather than wait.
TEST_F(SocketsTest, KilledPeerEndsTheOtherSide) {
  Process server({peer_, "server", "blocking"}, with_library());
  const std::string port = server.first_line(10s);
  ASSERT_FALSE(port.empty()) << server.err();
  Process client({peer_, "client", port, "1000000000000", "1"}, with_library());
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!contains(client.err(), ": shm") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(contains(client.err(), ": shm")) << client.err();
  std::this_thread::sleep_for(50ms);
  client.kill_now();
  const int status = server.wait(10s);
  ASSERT_NE(status, -1) << "the server still waits on a dead peer: " << server.err();
  EXPECT_TRUE(contains(server.err(), "Connection reset by peer")) << "status " << status << ": " << server.err();
}

// The server killed -9 while the client streams: the client's calls fail
// with a reset, as on the kernel's TCP.
TEST_F(SocketsTest, KilledServerResetsTheClient) {
  Process server({peer_, "server", "blocking"}, with_library());
  const std::string port = server.first_line(10s);
  ASSERT_FALSE(port.empty()) << server.err();
  Process client({peer_, "client", port, "1000000000000", "1"}, with_library());
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!contains(server.err(), "shm (accepted)") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(contains(server.err(), "shm (accepted)")) << server.err();
  std::this_thread::sleep_for(50ms);
  server.kill_now();
  const int status = client.wait(10s);
  ASSERT_NE(status, -1) << "the client still waits on a dead server: " << client.err();
  EXPECT_TRUE(contains(client.err(), "Connection reset by peer")) << "status " << status << ": " << client.err();
}

// Fjord's own TCP transporter, unmodified, moves onto SHM under the library:
// latency_bench ping starts its peer process, which inherits LD_PRELOAD.
TEST_F(SocketsTest, FjordTcpTransporterUnderTheLibrary) {
  const std::string bench = env_or_empty("FJORD_LATENCY_BENCH");
  ASSERT_FALSE(bench.empty()) << "FJORD_LATENCY_BENCH is not set (meson test sets it)";
  Process ping({bench, "ping", "--transporter", "tcp", "--iterations", "2000"}, with_library());
  EXPECT_TRUE(exited_ok(ping.wait(60s))) << ping.out() << ping.err();
  EXPECT_TRUE(contains(ping.out(), "\nfjord tcp ")) << ping.out();
  EXPECT_TRUE(contains(ping.err(), "shm (accepted)")) << ping.err();
}

TEST_F(SocketsTest, SockperfPingPongUnderTheLibrary) {
  if (!program_exists("sockperf")) GTEST_SKIP() << "sockperf is not installed (tools/dev.sh run installs it)";
  const std::string port = free_port();
  Process server({"sockperf", "sr", "--tcp", "-i", "127.0.0.1", "-p", port}, with_library());
  ASSERT_TRUE(wait_listening(port, 10s)) << server.out() << server.err();
  Process client({"sockperf", "pp", "--tcp", "-i", "127.0.0.1", "-p", port, "-t", "1", "-m", "64"}, with_library());
  const int status = client.wait(30s);
  EXPECT_TRUE(exited_ok(status)) << client.out() << client.err();
  EXPECT_TRUE(contains(client.out() + client.err(), "out-of-order messages = 0")) << client.out();
  EXPECT_TRUE(contains(client.out() + client.err(), "dropped messages = 0")) << client.out();
  EXPECT_TRUE(contains(server.err(), "shm (accepted)")) << server.err();
}

TEST_F(SocketsTest, RedisUnderTheLibrary) {
  if (!program_exists("redis-server") || !program_exists("redis-cli") || !program_exists("redis-benchmark"))
    GTEST_SKIP() << "redis-server/redis-tools are not installed (tools/dev.sh run installs them)";
  const std::string port = free_port();
  Process server({"redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"},
                 with_library());
  std::vector<std::string> cli = {"redis-cli", "-p", port};
  bool up = false;
  for (int i = 0; i < 200 && !up; ++i) {
    Process ping({"redis-cli", "-p", port, "ping"}, with_library());
    up = exited_ok(ping.wait(5s)) && contains(ping.out(), "PONG");
    if (!up) std::this_thread::sleep_for(25ms);
  }
  ASSERT_TRUE(up) << server.out() << server.err();
  Process bench({"redis-benchmark", "-p", port, "-n", "2000", "-c", "4", "-t", "set,get", "-q"}, with_library());
  EXPECT_TRUE(exited_ok(bench.wait(60s))) << bench.out() << bench.err();
  EXPECT_TRUE(contains(bench.out(), "SET") && contains(bench.out(), "GET")) << bench.out();
  Process set({"redis-cli", "-p", port, "set", "fjord-key", "fjord-value"}, with_library());
  EXPECT_TRUE(exited_ok(set.wait(10s)));
  Process get({"redis-cli", "-p", port, "get", "fjord-key"}, with_library());
  EXPECT_TRUE(exited_ok(get.wait(10s)));
  EXPECT_EQ(get.out(), "fjord-value\n");
  // redis-cli and redis-benchmark connect without blocking: their
  // connections moved to SHM at their first request.
  EXPECT_TRUE(contains(server.err(), "shm (accepted)")) << server.err();
}

}  // namespace
