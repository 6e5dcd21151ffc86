// `fjord-config --check` warns about links that leave the host without
// authentication (naming the link and its config line), and about links
// where only one node has a ClusterKeyFile; local and keyed links pass
// quietly.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

class ConfigCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tool = std::getenv("FJORD_CONFIG_TOOL");
    ASSERT_NE(tool, nullptr) << "meson sets FJORD_CONFIG_TOOL";
    tool_ = tool;
    std::string pattern = (std::filesystem::temp_directory_path() / "fjord-check-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }

  // Writes the config and runs --check on it: its stdout and stderr
  // together, and the exit status in *status.
  std::string check(const std::string& config, int* status) {
    const std::string path = dir_ + "/cluster.ini";
    std::ofstream(path) << config;
    std::string out;
    FILE* p = ::popen((tool_ + " --check " + path + " 2>&1").c_str(), "r");
    if (!p) return out;
    std::array<char, 4096> buf;
    std::size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
    const int raw = ::pclose(p);
    *status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    return out;
  }
  std::string path() const { return dir_ + "/cluster.ini"; }

  std::string tool_;
  std::string dir_;
};

TEST_F(ConfigCheckTest, AnExplicitLinkBetweenHostsWithoutAKeyIsWarnedAboutWithItsLine) {
  int status = -1;
  const std::string out = check(
      "[ndbd]\nNodeId=1\nHostName=10.0.0.1\n"
      "[api]\nNodeId=50\nHostName=10.0.0.2\n"
      "[tcp]\nNodeId1=1\nNodeId2=50\n",
      &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find(path() + ":7: warning: tcp link 1-50 (" + path() +
                     ":7) leaves the host (node 1 on 10.0.0.1, node 50 on 10.0.0.2) without authentication"),
            std::string::npos)
      << out;
}

TEST_F(ConfigCheckTest, ADefaultLinkToAnApiOnAnyHostIsWarnedAboutWithTheNodesLines) {
  int status = -1;
  const std::string out = check("[ndbd]\nNodeId=1\nHostName=db1.example\n[api]\nNodeId=50\n", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find(path() + ":1 and " + path() + ":4: warning: tcp link 1-50 (default tcp link) leaves the host " +
                     "(node 1 on db1.example, node 50 on any host) without authentication"),
            std::string::npos)
      << out;
}

TEST_F(ConfigCheckTest, LocalLinksAndKeyedLinksPassWithoutAWarning) {
  int status = -1;
  std::string out = check("[ndbd]\nNodeId=1\n[api]\nNodeId=50\n", &status);  // localhost: loopback only
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out.find("warning"), std::string::npos) << out;
  out = check(
      "[ndbd]\nNodeId=1\nHostName=10.0.0.1\nClusterKeyFile=/etc/fjord/cluster.key\n"
      "[api]\nNodeId=50\nHostName=10.0.0.2\nClusterKeyFile=/etc/fjord/cluster.key\n",
      &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out.find("warning"), std::string::npos) << out;
  out = check("[ndbd]\nNodeId=1\nHostName=10.0.0.1\n[api]\nNodeId=50\nHostName=10.0.0.1\n", &status);
  EXPECT_EQ(out.find("warning"), std::string::npos) << "both on one host: " << out;
}

TEST_F(ConfigCheckTest, AKeyOnOneEndOnlyIsWarnedAbout) {
  int status = -1;
  const std::string out = check(
      "[ndbd default]\nClusterKeyFile=/etc/fjord/cluster.key\n"
      "[ndbd]\nNodeId=1\n[api]\nNodeId=50\n",
      &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("tcp link 1-50 (default tcp link): node 1 has a ClusterKeyFile but node 50 has none, so the "
                     "link is refused at set-up"),
            std::string::npos)
      << out;
}

}  // namespace
