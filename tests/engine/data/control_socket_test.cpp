// The data node's control socket as a name nobody else can take: by default
// a path in a directory private to the node's user under DataDir (found by
// fjord-stats from the config); a directory of another owner or open mode
// is refused; a configured abstract name that another user holds is
// reported as squatted; and a client believes no reply from another user's
// process.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "builtin_transporters.h"
#include "fjord/base/fd.h"
#include "fjord/base/unix_address.h"
#include "fjord/engine/data_node.h"
#include "node_cluster.h"

namespace fjord::test {
namespace {

constexpr uid_t kNobody = 65534;

// A scratch DataDir, removed with everything in it.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = "/tmp/fjord-control-test.XXXXXX";
    path_ = ::mkdtemp(pattern.data()) != nullptr ? pattern : "";
  }
  ~ScratchDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The TestCluster config of one data node with DataDir `data_dir`, and
// ControlSocket `control` (none if empty).
std::string config_with(const std::string& data_dir, const std::string& control) {
  std::string text = cluster_config_text(ClusterOptions{}, free_tcp_port());
  const std::size_t at = text.find("ControlSocket=");
  text.erase(at, text.find('\n', at) + 1 - at);
  const std::size_t dir = text.find("DataDir=/tmp\n");
  text.replace(dir, 13, "DataDir=" + data_dir + "\n" + (control.empty() ? "" : "ControlSocket=" + control + "\n"));
  return text;
}

Result<std::unique_ptr<engine::DataNode>> start_node(const std::string& config) {
  engine::DataNodeOptions o;
  o.config_text = config;
  o.node_id = 1;
  o.registry = &tools::builtin_registry();
  auto node = engine::DataNode::create(o);
  if (!node) return node.status();
  if (Status s = (*node)->start(); !s) return s;
  return node;
}

// Runs `body` in a forked child as nobody; the child signals `ready` once
// set up and lives until `done` is closed by the test. -1 on failure.
template <typename Body>
pid_t fork_as_nobody(int ready_write, int done_read, int done_write, Body body) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::close(done_write);
  if (::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) ::_exit(30);
  ::_exit(body(ready_write, done_read));
}

int wait_child(pid_t child) {
  int status = 0;
  ::waitpid(child, &status, 0);
  return status;
}

// A process of another user holding `name` (abstract): while it lives it
// answers every connection with "pong 1\n" (what a node says to "ping").
class ForeignHolder {
 public:
  explicit ForeignHolder(const std::string& name) {
    if (::pipe(ready_) != 0 || ::pipe(done_) != 0) return;
    child_ = fork_as_nobody(ready_[1], done_[0], done_[1], [&](int ready, int done) {
      UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
      sockaddr_un addr;
      const socklen_t len = unix_address(name, addr);
      if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd.get(), 4) != 0) return 31;
      (void)!::write(ready, "r", 1);
      for (;;) {
        pollfd p[2] = {{fd.get(), POLLIN, 0}, {done, POLLIN, 0}};
        if (::poll(p, 2, 30'000) <= 0 || p[1].revents != 0) return 0;  // the test is done (or gone)
        UniqueFd conn(::accept(fd.get(), nullptr, nullptr));
        (void)!::send(conn.get(), "pong 1\n", 7, MSG_NOSIGNAL);
      }
    });
    char byte = 0;
    started_ = ::read(ready_[0], &byte, 1) == 1;
  }
  ~ForeignHolder() {
    ::close(done_[1]);
    if (child_ > 0) status_ = wait_child(child_);
    for (int fd : {ready_[0], ready_[1], done_[0]}) ::close(fd);
  }
  bool started() const { return started_; }
  pid_t pid() const { return child_; }

 private:
  int ready_[2] = {-1, -1};
  int done_[2] = {-1, -1};
  pid_t child_ = -1;
  bool started_ = false;
  int status_ = 0;
};

std::string run_stats(const std::string& arguments, int* exit_code) {
  const char* tool = std::getenv("FJORD_STATS_TOOL");
  std::string out;
  FILE* pipe = ::popen((std::string(tool) + " " + arguments + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return out;
  char buf[512];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = ::pclose(pipe);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

TEST(ControlSocketTest, ByDefaultItIsAPathInADirectoryPrivateToTheNodesUser) {
  ScratchDir data;
  ASSERT_FALSE(data.path().empty());
  const std::string config = config_with(data.path(), "");
  auto node = start_node(config);
  ASSERT_TRUE(node) << node.status().to_string();
  const std::string dir = data.path() + "/fjord-control";
  EXPECT_EQ((*node)->control_socket(), dir + "/node-1");
  struct stat st {};
  ASSERT_EQ(::lstat(dir.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(st.st_uid, ::geteuid());
  auto pong = engine::control_request((*node)->control_socket(), "ping", 2000);
  ASSERT_TRUE(pong) << pong.status().to_string();
  EXPECT_EQ(*pong, "pong 1\n");
  // fjord-stats finds it from the config.
  if (std::getenv("FJORD_STATS_TOOL") == nullptr) GTEST_SKIP() << "FJORD_STATS_TOOL is not set (meson test sets it)";
  const std::string file = data.path() + "/cluster.ini";
  std::ofstream(file) << config;
  int code = -1;
  const std::string layout = run_stats("--config " + file + " --node 1 --layout", &code);
  EXPECT_EQ(code, 0) << layout;
  EXPECT_EQ(layout.rfind("node 1 thread layout", 0), 0u) << layout;
  (*node)->stop();
  EXPECT_NE(::access((dir + "/node-1").c_str(), F_OK), 0) << "the socket file outlived the node";
}

TEST(ControlSocketTest, AControlDirectoryOpenToOthersOrOfAnotherOwnerIsRefused) {
  ScratchDir data;
  ASSERT_FALSE(data.path().empty());
  const std::string dir = data.path() + "/fjord-control";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  auto open = start_node(config_with(data.path(), ""));
  ASSERT_FALSE(open);
  EXPECT_NE(open.status().message().find(dir + " (the control socket's directory) has mode 0777"), std::string::npos)
      << open.status().message();
  ASSERT_EQ(::rmdir(dir.c_str()), 0);
  // A link to a directory is not one (it could point anywhere).
  ASSERT_EQ(::symlink(data.path().c_str(), dir.c_str()), 0);
  auto linked = start_node(config_with(data.path(), ""));
  ASSERT_FALSE(linked);
  EXPECT_NE(linked.status().message().find("is not a directory"), std::string::npos) << linked.status().message();
  ASSERT_EQ(::unlink(dir.c_str()), 0);
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the directory to another user (chown to nobody)";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chown(dir.c_str(), kNobody, kNobody), 0);
  auto foreign = start_node(config_with(data.path(), ""));
  ASSERT_FALSE(foreign);
  EXPECT_NE(foreign.status().message().find("belongs to uid 65534, not to this node's user (uid 0)"), std::string::npos)
      << foreign.status().message();
}

TEST(ControlSocketTest, AnAbstractNameHeldByAnotherUserIsReportedAsSquatted) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to hold the name as another uid (setuid to nobody)";
  const std::string name = "@fjord-control-test-" + std::to_string(::getpid());
  ForeignHolder squatter(name);
  ASSERT_TRUE(squatter.started());
  auto node = start_node(config_with("/tmp", name));
  ASSERT_FALSE(node);
  EXPECT_EQ(node.status().code(), StatusCode::kAlreadyExists);
  const std::string& why = node.status().message();
  EXPECT_NE(why.find(name + " (the control socket of node 1) is held by pid " + std::to_string(squatter.pid()) +
                     " (uid 65534), another user's process: the name is squatted"),
            std::string::npos)
      << why;
}

TEST(ControlSocketTest, ANameHeldByARunningNodeOfThisUserIsNamedSo) {
  const std::string name = "@fjord-control-test-own-" + std::to_string(::getpid());
  auto first = start_node(config_with("/tmp", name));
  ASSERT_TRUE(first) << first.status().to_string();
  auto second = start_node(config_with("/tmp", name));
  ASSERT_FALSE(second);
  EXPECT_NE(second.status().message().find("a process of this user: is it still running?"), std::string::npos)
      << second.status().message();
}

// A client (fjord-stats, latency_bench) does not believe a reply from a
// process of another user: that process took the name, it is not the node.
TEST(ControlSocketTest, AReplyFromAnotherUsersProcessIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to answer as another uid (setuid to nobody)";
  const std::string name = "@fjord-control-test-fake-" + std::to_string(::getpid());
  ForeignHolder impostor(name);
  ASSERT_TRUE(impostor.started());
  auto reply = engine::control_request(name, "ping", 2000);
  ASSERT_FALSE(reply) << "the impostor's reply was believed: " << *reply;
  EXPECT_EQ(reply.status().code(), StatusCode::kRejected);
  EXPECT_NE(reply.status().message().find("runs as uid 65534, neither this user (uid 0) nor root"), std::string::npos)
      << reply.status().message();
  if (std::getenv("FJORD_STATS_TOOL") == nullptr) GTEST_SKIP() << "FJORD_STATS_TOOL is not set (meson test sets it)";
  int code = -1;
  const std::string out = run_stats("--socket " + name, &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_EQ(out.find("pong"), std::string::npos) << out;
  EXPECT_NE(out.find("runs as uid 65534"), std::string::npos) << out;
}

}  // namespace
}  // namespace fjord::test
