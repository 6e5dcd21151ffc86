// `fjord-config --check` warns about links that leave the host without
// authentication (naming the link and its config line), and about links
// where only one node has a ClusterKeyFile; local and keyed links pass
// quietly. It prints the config's checksum, its node groups and each
// partition's primary and backups.
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
  std::string check(const std::string& config, int* status, const std::string& flags = "") {
    const std::string path = dir_ + "/cluster.ini";
    std::ofstream(path) << config;
    return run("--check " + path + flags, status);
  }
  std::string run(const std::string& args, int* status) {
    std::string out;
    FILE* p = ::popen((tool_ + " " + args + " 2>&1").c_str(), "r");
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

TEST_F(ConfigCheckTest, NodeGroupsChecksumAndEachPartitionsReplicasArePrinted) {
  int status = -1;
  const std::string config =
      "[ndbd default]\nNoOfReplicas=2\n[ndbd]\nNodeId=1\n[ndbd]\nNodeId=2\n[ndbd]\nNodeId=3\n[ndbd]\nNodeId=4\n"
      "[api]\nNodeId=50\n";
  std::string out = check(config, &status);
  EXPECT_EQ(status, 0) << out;
  const std::size_t checksum = out.find("  checksum ");
  ASSERT_NE(checksum, std::string::npos) << out;
  const std::string sum = out.substr(checksum + 11, out.find('\n', checksum) - checksum - 11);
  EXPECT_EQ(sum.size(), 64u) << out;
  EXPECT_NE(out.find("  node groups (NoOfReplicas=2):\n"
                     "    node group 0: data nodes 1, 2\n"
                     "    node group 1: data nodes 3, 4\n"
                     "  partitions of a table (PartitionsPerTable=8):\n"
                     "    partition 0: node group 0, primary 1, backup 2\n"
                     "    partition 1: node group 1, primary 3, backup 4\n"
                     "    partition 2: node group 0, primary 2, backup 1\n"
                     "    partition 3: node group 1, primary 4, backup 3\n"
                     "    partition 4: node group 0, primary 1, backup 2\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("tcp link 1-2 (default tcp link)"), std::string::npos) << out;
  // Comments and another order: the same checksum.
  out = check(
      "# four data nodes\n[api]\nNodeId=50\n[ndbd]\nNodeId=4\n[ndbd]\nNodeId=3\n[ndbd]\nNodeId=2\n"
      "[ndbd]\nNodeId=1\n[ndbd default]\nNoOfReplicas=2\n",
      &status);
  EXPECT_NE(out.find("  checksum " + sum + "\n"), std::string::npos) << out;
  // A long partition list is one line unless --partitions asks for it.
  const std::string many = config + "[ndbd default]\nPartitionsPerTable=64\n";
  out = check(many, &status);
  EXPECT_NE(out.find("    64 partitions over 2 node groups (--partitions lists each)\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("partition 17:"), std::string::npos) << out;
  out = check(many, &status, " --partitions");
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("    partition 63: node group 1, primary 4, backup 3\n"), std::string::npos) << out;
  out = run("--help", &status);
  EXPECT_EQ(status, 0);
  EXPECT_NE(out.find("--partitions"), std::string::npos) << out;
}

TEST_F(ConfigCheckTest, AnImpossibleLayoutIsAnErrorNamingItsLine) {
  int status = -1;
  const std::string out =
      check("[ndbd default]\nNoOfReplicas=2\n[ndbd]\nNodeId=1\n[ndbd]\nNodeId=2\n[ndbd]\nNodeId=3\n", &status);
  EXPECT_EQ(status, 1) << out;
  EXPECT_NE(out.find(path() + ":2: [ndbd default] NoOfReplicas=2 does not divide the 3 data nodes (1, 2, 3)"),
            std::string::npos)
      << out;
}

}  // namespace
