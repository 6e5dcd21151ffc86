// The trust boundary of a data node's links, end to end: an API node that
// sends what only the node's own threads or data nodes may send (runtime
// signals, schema installs, LDM requests, a signal to the wrong block) over
// a real link. Each time the node stays up, refuses the frame before any
// block sees it, takes down only the offender's link with a reason naming
// the signal, counts the refusal in its link statistics, and every other
// connection and every committed row is as it was.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "builtin_transporters.h"
#include "data_api_fixture.h"
#include "fjord/base/clock.h"
#include "fjord/engine/cluster_config.h"
#include "fjord/engine/protocol.h"
#include "fjord/transport/config_file.h"

namespace fjord::test {
namespace {

using api::ExecType;
using api::Row;
namespace gsn = engine::protocol::gsn;
namespace block_numbers = engine::block_numbers;

constexpr NodeId kAttacker = 51;
constexpr NodeId kFresh = 52;
constexpr uint64_t kRows = 20;
constexpr uint64_t kSecond = 1'000'000'000ULL;

// A link to the data node as API node `api` over the cluster's medium,
// with no API library behind it: the test writes its frames.
std::unique_ptr<transport::Transporter> raw_api_link(const TestCluster& cluster, NodeId api) {
  auto file = config::parse_text(cluster.config_text(), "<test cluster>");
  EXPECT_TRUE(file) << file.status().to_string();
  if (!file) return nullptr;
  auto config = engine::load_cluster_config(*file, tools::builtin_registry());
  EXPECT_TRUE(config) << config.status().to_string();
  if (!config) return nullptr;
  const transport::LinkConfig* link = config->links.find(api, 1);
  EXPECT_NE(link, nullptr);
  if (link == nullptr) return nullptr;
  transport::TransporterFactory* factory = tools::builtin_registry().find(link->type);
  const uint64_t deadline = monotonic_ns() + 10 * kSecond;
  while (monotonic_ns() < deadline) {
    auto t = factory->connect(api, *link, std::min(deadline, monotonic_ns() + 2 * kSecond));
    if (t) return std::move(t).value();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "no link to the data node as API node " << api;
  return nullptr;
}

// Waits (at most 10 s) for the node to take `link` down, flushing what the
// test sent (a sim link may take several flushes); reads and drops
// whatever the node sends before.
bool went_down(transport::Transporter& link) {
  const uint64_t deadline = monotonic_ns() + 10 * kSecond;
  while (link.is_up() && monotonic_ns() < deadline) {
    (void)link.flush();
    (void)link.wait_for_receive(50'000'000ULL, 0);
    const transport::ReceiveBatch batch = link.receive();
    if (!batch.bytes.empty()) link.release(batch.bytes.size());
  }
  return !link.is_up();
}

// The object of `node` in the "links" array of the node's stats JSON, or
// empty.
std::string link_json(const std::string& json, NodeId node) {
  const std::string key = "{\"node\":" + std::to_string(node) + ",";
  const std::size_t links = json.find("\"links\":[");
  if (links == std::string::npos) return {};
  const std::size_t at = json.find(key, links);
  if (at == std::string::npos) return {};
  return json.substr(at, json.find('}', at) + 1 - at);
}

class LinkBoundaryTest : public DataApiTest, public ::testing::WithParamInterface<const char*> {
 protected:
  void SetUp() override {
    ClusterOptions options;
    options.medium = GetParam();
    options.single_threaded = false;  // DICT, TC and LDM each on their own thread, a receive thread
    options.thread_config = "ldm={count=2},tc={count=1},recv={count=1}";
    start(options);
    ASSERT_NE(table_, nullptr);
    ASSERT_TRUE(run([&](api::Transaction& tx) {
      for (uint64_t id = 1; id <= kRows; ++id) tx.insert(*table_, account(id, static_cast<int64_t>(100 + id)));
    }));
    attacker_ = raw_api_link(*cluster_, kAttacker);
    ASSERT_NE(attacker_, nullptr);
  }

  // Sends one frame as the attacker.
  void send(uint16_t number, BlockRef receiver, std::vector<uint32_t> words,
            std::span<const std::span<const std::byte>> sections = {}) {
    // The frame's sender field claims DICT of this very node: never believed.
    ASSERT_TRUE(attacker_->send_signal({number, receiver, {block_numbers::kDict, 0}, 0}, words, sections));
  }

  // What every refusal must leave: the attacker's link down, the refusal
  // counted and named (`named` in the reason), the node up, connection 50
  // still working, and the committed rows read back by a fresh connection.
  void expect_refused(const std::string& named) {
    EXPECT_TRUE(went_down(*attacker_)) << "the node kept the link of an API node that sent " << named;
    EXPECT_TRUE(cluster_->node().health()) << cluster_->node().health().to_string();
    std::string link;
    const uint64_t deadline = monotonic_ns() + 10 * kSecond;
    do {
      link = link_json(cluster_->node().stats_json(), kAttacker);
    } while (link.find("\"up\":false") == std::string::npos && monotonic_ns() < deadline);
    EXPECT_NE(link.find("\"peer_kind\":\"API node\""), std::string::npos) << link;
    EXPECT_NE(link.find("\"up\":false"), std::string::npos) << link;
    EXPECT_NE(link.find("\"refused_signals\":1,"), std::string::npos) << link;
    EXPECT_NE(link.find(named), std::string::npos) << link;
    EXPECT_NE(link.find("node 51 (API node)"), std::string::npos) << link;
    EXPECT_NE(cluster_->node().stats_text().find("refused signals 1 (last: node 51 (API node) sent " + named),
              std::string::npos);
    EXPECT_EQ(balance_of(1), 101) << "connection 50 was affected";
    expect_rows_intact();
  }

  void expect_rows_intact() {
    auto fresh = cluster_->connect(kFresh);
    ASSERT_TRUE(fresh) << fresh.status().to_string();
    auto table = (*fresh)->get_table("accounts");
    ASSERT_TRUE(table) << table.status().to_string();
    api::Transaction& tx = (*fresh)->start_transaction();
    std::vector<api::Operation*> reads;
    for (uint64_t id = 1; id <= kRows; ++id) reads.push_back(&tx.read(**table, key_of(id)));
    const Status s = tx.execute(ExecType::kCommit);
    ASSERT_TRUE(s) << s.to_string();
    for (uint64_t id = 1; id <= kRows; ++id)
      EXPECT_EQ(reads[id - 1]->value(kBalance).as_int64(), static_cast<int64_t>(100 + id)) << "row " << id;
    tx.close();
  }

  std::unique_ptr<transport::Transporter> attacker_;
};

TEST_P(LinkBoundaryTest, ANodeDisconnectedWithoutItsWordToTcIsRefused) {
  send(engine::runtime_signals::kNodeDisconnected, {block_numbers::kTc, 0}, {});
  expect_refused("signal 3 (one only the runtime of a node sends) to TC");
}

TEST_P(LinkBoundaryTest, ASchemaInstallToTcIsRefused) {
  const std::span<const std::byte> empty[1] = {};
  send(gsn::kSchemaInstall, {block_numbers::kTc, 0}, {1, table_->table_id, 1}, empty);
  expect_refused("signal 110 to TC");
}

// A drop of the table (an empty install, 40 bytes), straight to the LDM
// instance that holds its first partitions.
TEST_P(LinkBoundaryTest, ASchemaInstallToLdmIsRefusedAndTheRowsStay) {
  const std::span<const std::byte> empty[1] = {};
  send(gsn::kSchemaInstall, {block_numbers::kLdm, 0}, {1, table_->table_id, 1}, empty);
  expect_refused("signal 110 to LDM");
}

// API node 51 tells TC that API node 50 is gone while 50 holds a row lock
// in an open transaction: the transaction and its lock stay 50's.
TEST_P(LinkBoundaryTest, AForgedNodeDisconnectedLeavesAnotherApisTransactionAndLock) {
  api::Transaction& held = conn_->start_transaction();
  held.update(*table_, key_of(1), Row().set(kBalance, int64_t{555}));
  ASSERT_TRUE(held.execute(ExecType::kNoCommit));
  send(engine::runtime_signals::kNodeDisconnected, {block_numbers::kTc, 0}, {50});
  EXPECT_TRUE(went_down(*attacker_));
  {
    auto other = cluster_->connect(kFresh);
    ASSERT_TRUE(other) << other.status().to_string();
    auto table = (*other)->get_table("accounts");
    ASSERT_TRUE(table);
    api::Transaction& tx = (*other)->start_transaction();
    tx.update(**table, key_of(1), Row().set(kBalance, int64_t{777}));
    EXPECT_FALSE(tx.execute(ExecType::kCommit)) << "another transaction took the row 50 holds locked";
    tx.close();
  }
  const Status committed = held.execute(ExecType::kCommit);
  EXPECT_TRUE(committed) << committed.to_string();
  held.close();
  EXPECT_EQ(balance_of(1), 555);
  const std::string link = link_json(cluster_->node().stats_json(), kAttacker);
  EXPECT_NE(link.find("\"refused_signals\":1,"), std::string::npos) << link;
  EXPECT_NE(link.find("signal 3 (one only the runtime of a node sends) to TC"), std::string::npos) << link;
  // Put row 1 back for the rows check.
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.update(*table_, key_of(1), Row().set(kBalance, int64_t{101})); }));
  expect_rows_intact();
}

TEST_P(LinkBoundaryTest, AnLqhKeyReqFromAnApiNodeIsRefused) {
  send(gsn::kLqhKeyReq, {block_numbers::kLdm, 0}, std::vector<uint32_t>(12, 0));
  expect_refused("signal 300 to LDM");
}

TEST_P(LinkBoundaryTest, AScanFragReqFromAnApiNodeIsRefused) {
  send(gsn::kScanFragReq, {block_numbers::kLdm, 1}, std::vector<uint32_t>(8, 0));
  expect_refused("signal 330 to LDM");
}

TEST_P(LinkBoundaryTest, ATcRequestToDictIsRefused) {
  send(gsn::kTcKeyReq, {block_numbers::kDict, 0}, std::vector<uint32_t>(8, 0));
  expect_refused("signal 200 to DICT");
}

// What an API node may send still passes: a registration from the raw link
// is answered, and the link stays up.
TEST_P(LinkBoundaryTest, AnApiRequestToItsBlockPasses) {
  send(gsn::kApiRegReq, {block_numbers::kDict, 0}, {7});
  bool answered = false;
  const uint64_t deadline = monotonic_ns() + 10 * kSecond;
  while (!answered && attacker_->is_up() && monotonic_ns() < deadline) {
    (void)attacker_->flush();
    (void)attacker_->wait_for_receive(50'000'000ULL, 0);
    const transport::ReceiveBatch batch = attacker_->receive();
    frame::FrameCursor cursor(batch.bytes);
    for (frame::SignalView v; cursor.next(v);) answered |= v.header.signal_number == gsn::kApiRegConf;
    if (!batch.bytes.empty()) attacker_->release(batch.bytes.size());
  }
  EXPECT_TRUE(answered);
  EXPECT_TRUE(attacker_->is_up());
  const std::string link = link_json(cluster_->node().stats_json(), kAttacker);
  EXPECT_NE(link.find("\"refused_signals\":0,"), std::string::npos) << link;
}

INSTANTIATE_TEST_SUITE_P(Media, LinkBoundaryTest, ::testing::Values("tcp", "sim", "shm"),
                         [](const ::testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

}  // namespace
}  // namespace fjord::test
