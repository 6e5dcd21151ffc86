// A data node against a peer data node that breaks the protocol. The test
// plays data node 2 over a sim link and sends the node's blocks internal
// signals (schema installs, LDM answers, install confirmations) that are
// malformed or answer nothing that was asked: each is refused, the node
// stays up, and its committed rows are intact and readable by a fresh API.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "builtin_transporters.h"
#include "data_api_fixture.h"
#include "fjord/base/clock.h"
#include "fjord/base/tuning.h"
#include "fjord/engine/protocol.h"

namespace fjord::test {
namespace {

using api::ExecType;
using engine::TableDef;
namespace block_numbers = engine::block_numbers;
namespace gsn = engine::protocol::gsn;
namespace protocol = engine::protocol;

constexpr NodeId kPeer = 2;
constexpr uint64_t kRows = 8;
constexpr BlockRef kTc{block_numbers::kTc, 0};
constexpr BlockRef kLdm{block_numbers::kLdm, 0};
constexpr BlockRef kDict{block_numbers::kDict, 0};

class PeerDataNodeTest : public DataApiTest {
 protected:
  void SetUp() override {
    ClusterOptions o;
    o.medium = "sim";
    o.sim_faults = false;
    o.peer_data_nodes = {kPeer};
    start(o);
    ASSERT_TRUE(run([&](api::Transaction& tx) {
      for (uint64_t id = 1; id <= kRows; ++id) tx.insert(*table_, account(id, static_cast<int64_t>(id * 10)));
    }));
    const transport::LinkConfig* link = cluster_->node().config().links.find(1, kPeer);
    ASSERT_NE(link, nullptr);
    auto t = tools::builtin_registry().find("sim")->connect(kPeer, *link, monotonic_ns() + 10'000'000'000ULL);
    ASSERT_TRUE(t) << t.status().to_string();
    peer_ = std::move(t).value();
  }
  void TearDown() override { peer_.reset(); }

  // Sends one signal from "TC 0 of node 2" (or `from`).
  void send(const protocol::SignalOut& out, BlockRef to, BlockRef from = kTc) {
    ASSERT_TRUE(peer_->send_signal({out.number, to, from, 0}, out.data(), out.section_list()));
  }
  void send_words(uint16_t number, BlockRef to, std::vector<uint32_t> words) {
    ASSERT_TRUE(peer_->send_signal({number, to, kTc, 0}, words));
  }
  // An ApiRegReq to DICT, and its answer: the node (one thread, one link)
  // has executed everything sent before it.
  void sync() {
    send(protocol::encode(protocol::ApiRegReq{77}), kDict);
    const uint64_t deadline = monotonic_ns() + 20'000'000'000ULL;
    while (monotonic_ns() < deadline) {
      ASSERT_TRUE(peer_->is_up()) << peer_->down_reason().to_string();
      const transport::ReceiveBatch batch = peer_->receive();
      frame::FrameCursor cursor(batch.bytes);
      bool answered = false;
      for (frame::SignalView v; cursor.next(v);) {
        answered |= v.header.signal_number == gsn::kApiRegConf;
        ++received_[v.header.signal_number];
      }
      peer_->release(batch.bytes.size());
      if (answered) return;
    }
    FAIL() << "no ApiRegConf from node 1 within 20 s";
  }
  // Every committed row reads back through a fresh API connection.
  void expect_rows_intact() {
    auto fresh = cluster_->connect(51);
    ASSERT_TRUE(fresh) << fresh.status().to_string();
    auto table = (*fresh)->get_table("accounts");
    ASSERT_TRUE(table) << table.status().to_string();
    for (uint64_t id = 1; id <= kRows; ++id) {
      api::Transaction& tx = (*fresh)->start_transaction();
      api::Operation& op = tx.read(**table, key_of(id));
      ASSERT_TRUE(tx.execute(ExecType::kCommit)) << "row " << id;
      EXPECT_EQ(op.value(kBalance).as_int64(), static_cast<int64_t>(id * 10)) << "row " << id;
      tx.close();
    }
  }

  std::unique_ptr<transport::Transporter> peer_;
  std::map<uint16_t, int> received_;  // signals node 1 sent node 2, by number
};

std::vector<std::byte> table_bytes(uint32_t id, uint32_t partitions) {
  TableDef t = accounts_def("installed");
  t.indexes.clear();
  t.table_id = id;
  t.version = 1;
  t.partitions = partitions;
  return protocol::encode_table(t);
}

// Installs that name no table, a drop with one, a table id no array holds,
// a table whose id is not the one named, and a table of 0 or too many
// partitions: each refused by TC and by LDM, which keep the accounts table.
TEST_F(PeerDataNodeTest, MalformedSchemaInstallsAreRefused) {
  const std::vector<std::byte> good = table_bytes(500, 4);
  const std::vector<std::byte> no_partitions = table_bytes(501, 0);
  const std::vector<std::byte> too_many = table_bytes(502, engine::kMaxPartitions + 1);
  const protocol::SchemaInstall installs[] = {
      {1, 500, false, {}},        {2, 500, true, good},
      {3, 0xFFFF'FFFF, true, {}}, {4, 0xFFFF'FFFF, false, good},
      {5, 600, false, good},      {6, 501, false, no_partitions},
      {7, 502, false, too_many},  {8, table_->table_id, true, {}},
  };
  for (const protocol::SchemaInstall& m : installs) {
    // The drop of the accounts table is well formed: the test sends it
    // malformed (a section it must not have) instead.
    protocol::SignalOut out = protocol::encode(m);
    if (m.table_id == table_->table_id) out.section_count = 1, out.sections[0] = good;
    send(out, kTc);
    send(out, kLdm);
  }
  send_words(gsn::kSchemaInstall, kTc, {9});
  send_words(gsn::kSchemaInstall, kLdm, {9});
  // A commit and an abort of the all-ones transaction id (an empty slot's
  // key in LDM's map of transactions).
  for (uint16_t n : {gsn::kLqhCommitReq, gsn::kLqhAbortReq})
    send(protocol::encode(n, protocol::LqhTxReq{{UINT64_MAX}, 0}), kLdm);
  sync();
  expect_rows_intact();
}

// LDM answers (key operations, commit and abort, scan rounds) come only
// from the node's own LDM instances: TC refuses them from node 2, malformed
// or not.
TEST_F(PeerDataNodeTest, LdmAnswersFromAnotherNodeAreRefused) {
  api::Transaction& open = conn_->start_transaction();
  open.update(*table_, key_of(1), api::Row().set(kBalance, int64_t{-1}));
  ASSERT_TRUE(open.execute(ExecType::kNoCommit));
  const protocol::TxId tx = {uint64_t{50} << 48 | 1};
  send(protocol::encode(protocol::LqhKeyConf{0, tx, false, {}, {}, {}}), kTc, kLdm);
  send(protocol::encode(protocol::LqhKeyRef{0, tx, protocol::ErrorCode::kNoSuchRow}), kTc, kLdm);
  for (uint16_t n = 0; n < 4; ++n)
    send(protocol::encode(gsn::kLqhCommitConf, protocol::LqhTxConf{{uint64_t{50} << 48 | n}, 0, 1}), kTc, kLdm);
  send(protocol::encode(protocol::ScanFragConf{0, 7, 1, 1, true}), kTc, kLdm);
  send(protocol::encode(protocol::ScanFragRef{0, 7, protocol::ErrorCode::kScanError}), kTc, kLdm);
  for (uint16_t number : {gsn::kLqhKeyConf, gsn::kLqhKeyRef, gsn::kLqhCommitConf, gsn::kLqhAbortConf,
                          gsn::kScanFragConf, gsn::kScanFragRef})
    send_words(number, kTc, {1});
  sync();
  ASSERT_TRUE(open.execute(ExecType::kRollback));
  open.close();
  expect_rows_intact();
}

// DICT confirms its installs only from its own node's TC and LDM instances.
TEST_F(PeerDataNodeTest, InstallConfirmationsFromAnotherNodeAreRefused) {
  for (uint32_t id = 0; id < 4; ++id) send(protocol::encode(protocol::SchemaInstallConf{id}), kDict);
  send_words(gsn::kSchemaInstallConf, kDict, {});
  sync();
  auto created = conn_->create_table(accounts_def("after_the_confirmations"));
  ASSERT_TRUE(created) << created.status().to_string();
  expect_rows_intact();
}

// Read results and scan rows go to an API node's receiver: a request that
// names this data node as the API node is refused (an LqhKeyRef or a
// ScanFragRef to its sender), where the results would have gone to a block
// the node does not have.
TEST_F(PeerDataNodeTest, RequestsWhoseResultsGoToThisDataNodeAreRefused) {
  const api::Row key = key_of(3);
  protocol::LqhKeyReq read;
  read.tc_op = 1;
  read.tx = {uint64_t{kPeer} << 48 | 1};
  read.table_id = table_->table_id;
  read.table_version = table_->version;
  read.result_to = protocol::ResultTo::kApi;
  read.api_node = 1;
  read.key = key.entries();
  std::byte encoded[engine::kMaxKeyBytes];
  auto length = protocol::encode_key_section(engine::KeyCodec::for_primary_key(*table_), read.key, encoded);
  ASSERT_TRUE(length) << length.status().to_string();
  const uint64_t hash = engine::hash_key(encoded, length.value());
  read.key_hash = static_cast<uint32_t>(hash);
  read.partition = engine::partition_of(hash, table_->partitions);
  send(protocol::encode(read), kLdm);
  for (uint32_t p = 0; p < table_->partitions; ++p) {
    protocol::ScanFragReq scan;
    scan.tc_scan = p;
    scan.table_id = table_->table_id;
    scan.table_version = table_->version;
    scan.partition = p;
    scan.batch_rows = 16;
    scan.api_node = 1;
    send(protocol::encode(scan), kLdm);
  }
  sync();
  EXPECT_EQ(received_[gsn::kLqhKeyRef], 1);
  EXPECT_EQ(received_[gsn::kScanFragRef], static_cast<int>(table_->partitions));
  EXPECT_EQ(received_[gsn::kKeyData] + received_[gsn::kScanRows], 0);
  expect_rows_intact();
}

// TC's periodic timer signal is its own (sent to itself with a delay): one
// from node 2 is refused, where each would start another chain of timers
// until the thread's timer queue overflowed.
TEST_F(PeerDataNodeTest, TimerSignalsFromAnotherNodeAreRefused) {
  constexpr uint16_t kTcTimer = engine::runtime_signals::kFirstUser;
  for (uint32_t i = 0; i < tuning::kTimerCapacity + 16; ++i) {
    ASSERT_TRUE(peer_->send_signal({kTcTimer, kTc, kTc, 0}, {}, {}, /*flush_now=*/false));
    if (i % 256 == 255) sync();  // the link's send memory holds a few hundred at a time
  }
  sync();
  expect_rows_intact();
}

}  // namespace
}  // namespace fjord::test
