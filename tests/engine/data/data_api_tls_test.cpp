// The API end to end over TCP links with TLS (RequireTls on every link of
// the data node): rows written and read back through the encrypted link,
// and an API whose config leaves TLS out refused with the reason while the
// node and its rows carry on.
#include <gtest/gtest.h>

#include <string>

#include "data_api_fixture.h"
#include "tls_directory.h"

namespace fjord::test {
namespace {

class DataApiTlsTest : public DataApiTest {
 protected:
  static constexpr NodeId kNodes[] = {1, 50, 51, 52, 53, 54, 55};
  void SetUp() override {
    ClusterOptions options;
    options.extra_ndbd = "[tcp default]\nRequireTls=1\nTlsSearchPath=" + credentials_.path() + "\n";
    start(options);
  }
  TlsDirectory credentials_{kNodes};
};

TEST_F(DataApiTlsTest, RowsWrittenOverTlsReadBackOverTlsFromAnotherApiNode) {
  constexpr uint64_t kRows = 200;
  for (uint64_t id = 1; id <= kRows; ++id)
    ASSERT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(id, static_cast<int64_t>(id) * 7)); }));
  auto other = cluster_->connect(51);
  ASSERT_TRUE(other) << other.status().to_string();
  for (uint64_t id = 1; id <= kRows; ++id) {
    api::Transaction& tx = (*other)->start_transaction();
    api::Operation& op = tx.read(*table_, key_of(id));
    const Status s = tx.execute(api::ExecType::kCommit);
    ASSERT_TRUE(s) << "row " << id << ": " << s.to_string();
    EXPECT_EQ(op.value(kBalance).as_int64(), static_cast<int64_t>(id) * 7) << "row " << id;
    tx.close();
  }
}

TEST_F(DataApiTlsTest, AnApiWithoutTlsIsRefusedWithTheReasonAndRowsStayIntact) {
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(1, 100)); }));
  api::ConnectOptions plain = cluster_->connect_options(52);
  const std::string require = "RequireTls=1";
  const std::size_t at = plain.config_text.find(require);
  ASSERT_NE(at, std::string::npos);
  plain.config_text.replace(at, require.size(), "RequireTls=0");
  auto refused = api::Connection::connect(plain);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.status().message().find("requires TLS"), std::string::npos) << refused.status().message();
  EXPECT_EQ(balance_of(1), 100);
  auto again = cluster_->connect(52);  // the node id is free for a peer with TLS
  ASSERT_TRUE(again) << again.status().to_string();
}

}  // namespace
}  // namespace fjord::test
