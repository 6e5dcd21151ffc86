// A data node with a ClusterKeyFile, over TCP and SHM: API nodes holding
// its key connect; an API node without a key, or with another key, is
// refused at set-up with the reason, sends nothing the node acts on, and
// the node goes on serving with its committed rows intact.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "data_api_fixture.h"
#include "fjord/base/clock.h"
#include "fjord/engine/data_node.h"
#include "key_files.h"

namespace fjord::test {
namespace {

using api::ExecType;

class DataApiAuthTest : public DataApiTest, public ::testing::WithParamInterface<const char*> {
 protected:
  void SetUp() override {
    key_ = keys_.write("cluster.key", std::string(48, 'a') + "\n");
    other_key_ = keys_.write("other.key", std::string(48, 'b') + "\n");
    ClusterOptions options;
    options.medium = GetParam();
    options.extra_ndbd = "ClusterKeyFile=" + key_ + "\n" + api_keys(key_);
    start(options);
  }

  static std::string api_keys(const std::string& key) {
    return key.empty() ? "" : "[api default]\nClusterKeyFile=" + key + "\n";
  }

  // API node `id` connecting with `key` as its ClusterKeyFile ("" = none).
  Result<std::unique_ptr<api::Connection>> connect_with(NodeId id, const std::string& key) {
    api::ConnectOptions options = cluster_->connect_options(id);
    const std::string ours = api_keys(key_);
    const std::size_t at = options.config_text.find(ours);
    EXPECT_NE(at, std::string::npos);
    if (at != std::string::npos) options.config_text.replace(at, ours.size(), api_keys(key));
    options.connect_timeout_ms = 5000;
    return api::Connection::connect(options);
  }

  KeyFiles keys_;
  std::string key_;
  std::string other_key_;
};

TEST_P(DataApiAuthTest, PeersWithoutTheKeyAreRefusedAndTheNodeKeepsItsRows) {
  for (uint64_t id = 1; id <= 3; ++id)
    ASSERT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(id, static_cast<int64_t>(100 * id))); }));

  auto keyless = connect_with(51, "");
  ASSERT_FALSE(keyless.is_ok());
  EXPECT_EQ(keyless.status().code(), StatusCode::kRejected) << keyless.status().to_string();
  EXPECT_NE(keyless.status().message().find("node 51 offered no proof of the cluster key, but node 1 requires one"),
            std::string::npos)
      << keyless.status().message();

  auto wrong = connect_with(51, other_key_);
  ASSERT_FALSE(wrong.is_ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kRejected) << wrong.status().to_string();
  EXPECT_NE(wrong.status().message().find("node 51's proof does not match the cluster key of node 1"),
            std::string::npos)
      << wrong.status().message();

  // The node is up, its rows are intact, and an API node with the key reads them.
  EXPECT_EQ(*engine::control_request(cluster_->node().control_socket(), "ping", 2000), "pong 1\n");
  auto keyed = connect_with(52, key_);
  ASSERT_TRUE(keyed) << keyed.status().to_string();
  for (uint64_t id = 1; id <= 3; ++id) {
    api::Transaction& tx = (*keyed)->start_transaction();
    api::Operation& op = tx.read(*table_, key_of(id));
    ASSERT_TRUE(tx.execute(ExecType::kCommit)) << "row " << id;
    EXPECT_EQ(op.value(kBalance).as_int64(), static_cast<int64_t>(100 * id));
    tx.close();
  }
  EXPECT_EQ(balance_of(2), 200);
}

// An API node whose own key file is unusable is told so at once, with the
// file named: retrying until the connect timeout cannot mend a file.
TEST_P(DataApiAuthTest, AnApiNodesUnusableKeyFileFailsAtOnceNamingTheFile) {
  const std::string readable = keys_.write("readable.key", std::string(48, 'a') + "\n");
  ASSERT_EQ(::chmod(readable.c_str(), 0644), 0);
  const uint64_t t0 = monotonic_ns();
  auto insecure = connect_with(51, readable);  // a connect timeout of 5 s
  const uint64_t took_ms = (monotonic_ns() - t0) / 1'000'000;
  ASSERT_FALSE(insecure.is_ok());
  EXPECT_NE(insecure.status().message().find(readable), std::string::npos) << insecure.status().message();
  EXPECT_NE(insecure.status().message().find("0644"), std::string::npos) << insecure.status().message();
  EXPECT_LT(took_ms, 2500u) << "the API retried a local key file problem until its connect timeout";
  auto keyed = connect_with(51, key_);  // the node and the id are unharmed
  ASSERT_TRUE(keyed) << keyed.status().to_string();
}

INSTANTIATE_TEST_SUITE_P(TcpAndShm, DataApiAuthTest, ::testing::Values("tcp", "shm"));

}  // namespace
}  // namespace fjord::test
