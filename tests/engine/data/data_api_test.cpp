// End to end: a data node (DICT, TC, LDM on its own threads) and API
// connections over a real transporter. Every operation type and error,
// transactions, unique keys, scans, locks and timeouts, DataMemory, the
// asynchronous API, and node failure.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "builtin_transporters.h"
#include "cluster_harness.h"
#include "descriptors_used_up.h"
#include "fjord/base/clock.h"
#include "fjord/base/fd.h"
#include "fjord/base/unix_address.h"
#include "fjord/transport/handshake.h"

namespace fjord::test {
namespace {

using api::ExecType;
using api::Row;
using engine::ColumnType;
using engine::IndexKind;
using engine::protocol::ErrorCode;
using engine::protocol::LockMode;

constexpr uint16_t kId = 0, kEmail = 1, kName = 2, kBalance = 3, kTag = 4;

engine::TableDef accounts_def(const std::string& name = "accounts") {
  engine::TableDef t;
  t.name = name;
  t.columns = {{"id", ColumnType::kUint64, 0, false},
               {"email", ColumnType::kVarChar, 64, false},
               {"name", ColumnType::kVarChar, 32, true},
               {"balance", ColumnType::kInt64, 0, false},
               {"tag", ColumnType::kBinary, 4, true}};
  t.primary_key = {kId};
  t.indexes = {{"by_email", IndexKind::kUnique, {kEmail}, 0}, {"by_balance", IndexKind::kOrdered, {kBalance}, 0}};
  return t;
}

Row key_of(uint64_t id) { return Row().set(kId, id); }
Row account(uint64_t id, int64_t balance, const std::string& name = "") {
  Row r;
  r.set(kId, id).set(kEmail, "user" + std::to_string(id) + "@example.com").set(kBalance, balance);
  if (name.empty())
    r.set_null(kName);
  else
    r.set(kName, name);
  return r;
}

// An API node's tcp link whose receiving the test holds (while `held`): to
// the API, a data node that answers late or not at all. The fault is at the
// network seam, in a double of the production interface that delegates
// everything else to the real tcp transporter.
class HeldLink final : public transport::Transporter {
 public:
  HeldLink(std::unique_ptr<transport::Transporter> link, const std::atomic<bool>& held)
      : Transporter(link->config(), link->local_node()), link_(std::move(link)), held_(held) {}
  std::span<std::byte> reserve(std::size_t min_bytes) override { return link_->reserve(min_bytes); }
  void commit(std::size_t bytes, uint32_t frames) override { link_->commit(bytes, frames); }
  transport::FlushStatus flush() override {
    const transport::FlushStatus s = link_->flush();
    if (s == transport::FlushStatus::kDown) declare_down(link_->down_reason());
    return s;
  }
  std::size_t send_buffer_used() const override { return link_->send_buffer_used(); }
  std::size_t send_buffer_capacity() const override { return link_->send_buffer_capacity(); }
  transport::ReceiveBatch receive() override {
    if (!link_->is_up()) declare_down(link_->down_reason());
    return held_ ? transport::ReceiveBatch{} : link_->receive();
  }
  void release(std::size_t bytes) override { link_->release(bytes); }
  int wait_fd() const override { return link_->wait_fd(); }
  bool arm_wakeup() override { return link_->arm_wakeup(); }
  void disarm_wakeup() override { link_->disarm_wakeup(); }

 private:
  void on_down() override { link_->close(down_reason().message()); }
  std::unique_ptr<transport::Transporter> link_;
  const std::atomic<bool>& held_;
};

// The tcp factory, its links made HeldLinks (for a registry of the API's own).
class HeldTcpFactory final : public transport::TransporterFactory {
 public:
  explicit HeldTcpFactory(const std::atomic<bool>& held) : tcp_(*tools::builtin_registry().find("tcp")), held_(held) {}
  std::string_view name() const override { return tcp_.name(); }
  std::string_view description() const override { return "tcp, receiving held by the test"; }
  std::span<const config::ParamSpec> parameters() const override { return tcp_.parameters(); }
  Status validate(const transport::LinkConfig& link) const override { return tcp_.validate(link); }
  Result<std::unique_ptr<transport::Listener>> listen(NodeId self, const transport::LinkTable& links) override {
    return tcp_.listen(self, links);
  }
  Result<std::unique_ptr<transport::Transporter>> connect(NodeId self, const transport::LinkConfig& link,
                                                          DeadlineNs deadline) override {
    auto connected = tcp_.connect(self, link, deadline);
    if (!connected) return connected.status();
    return std::unique_ptr<transport::Transporter>(std::make_unique<HeldLink>(std::move(connected).value(), held_));
  }

 private:
  transport::TransporterFactory& tcp_;
  const std::atomic<bool>& held_;
};

class DataApiTest : public ::testing::Test {
 protected:
  void SetUp() override { start({}); }
  // A fresh cluster over shm: one data node thread, or TC, two LDMs and a
  // receive thread each on their own.
  void start_over_shm(bool single_threaded) {
    ClusterOptions options;
    options.medium = "shm";
    options.single_threaded = single_threaded;
    if (!single_threaded) options.thread_config = "ldm={count=2},tc={count=1},recv={count=1}";
    start(options);
  }
  void start(const ClusterOptions& options) {
    conn_.reset();
    cluster_.reset();
    auto c = TestCluster::start(options);
    ASSERT_TRUE(c) << c.status().to_string();
    cluster_ = std::move(c).value();
    auto conn = cluster_->connect(50);
    ASSERT_TRUE(conn) << conn.status().to_string();
    conn_ = std::move(conn).value();
    auto t = conn_->create_table(accounts_def());
    ASSERT_TRUE(t) << t.status().to_string();
    table_ = *t;
  }
  Status run(const std::function<void(api::Transaction&)>& define, ExecType type = ExecType::kCommit) {
    api::Transaction& tx = conn_->start_transaction();
    define(tx);
    Status s = tx.execute(type);
    tx.close();
    return s;
  }
  // Options for another connection to the cluster as API node `id`.
  api::ConnectOptions options_for(NodeId id) const {
    api::ConnectOptions o;
    o.config_text = cluster_->config_text();
    o.node_id = id;
    o.registry = &tools::builtin_registry();
    return o;
  }
  // A raw TCP connection to the data node's port (no handshake sent).
  UniqueFd connect_to_node_port() const {
    const std::string& config = cluster_->config_text();
    const std::size_t at = config.find("ServerPort=");
    EXPECT_NE(at, std::string::npos) << config;
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(std::stoi(config.substr(at + 11))));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
    return fd;
  }
  std::optional<int64_t> balance_of(uint64_t id, LockMode lock = LockMode::kCommitted) {
    api::Transaction& tx = conn_->start_transaction();
    api::Operation& op = tx.read(*table_, key_of(id), {}, lock);
    const Status s = tx.execute(ExecType::kCommit);
    std::optional<int64_t> out;
    if (s.is_ok()) out = op.value(kBalance).as_int64();
    tx.close();
    return out;
  }
  const engine::IndexDef& index(const std::string& name) {
    for (const auto& i : table_->indexes)
      if (i.name == name) return i;
    ADD_FAILURE() << "no index " << name;
    return table_->indexes.front();
  }

  std::unique_ptr<TestCluster> cluster_;
  std::unique_ptr<api::Connection> conn_;
  const engine::TableDef* table_ = nullptr;
};

TEST_F(DataApiTest, SchemaIsCreatedDescribedAndDropped) {
  EXPECT_GT(table_->table_id, 0u);
  EXPECT_EQ(table_->partitions, 8u);
  EXPECT_GT(table_->indexes[0].index_id, 0u);
  auto other = cluster_->connect(51);
  ASSERT_TRUE(other);
  auto described = (*other)->get_table("accounts");
  ASSERT_TRUE(described) << described.status().to_string();
  EXPECT_EQ((*described)->table_id, table_->table_id);
  EXPECT_EQ((*described)->columns.size(), 5u);
  EXPECT_EQ((*described)->columns[kEmail].type, ColumnType::kVarChar);
  auto duplicate = conn_->create_table(accounts_def());
  EXPECT_EQ(duplicate.status().message(), "721: Schema object with given name already exists");
  EXPECT_TRUE(conn_->drop_table("accounts"));
  EXPECT_EQ((*other)->drop_table("accounts").message(), "723: No such table existed");
  auto gone = cluster_->connect(52);
  EXPECT_EQ((*gone)->get_table("accounts").status().message(), "723: No such table existed");
  engine::TableDef bad = accounts_def("bad");
  bad.primary_key = {kName};  // nullable primary key column
  EXPECT_FALSE(conn_->create_table(bad));
}

// Limits the data node's table codec enforces (names of at most 128 bytes,
// at most 64 indexes, no '$' in a table name) were not checked by the API,
// so such a definition came back as a bare "4000: Malformed or
// inconsistent request" that named nothing.
TEST_F(DataApiTest, ADefinitionBeyondTheNodesLimitsIsRefusedNamingWhatIsWrong) {
  const auto refusal = [&](const engine::TableDef& t) {
    auto created = conn_->create_table(t);
    EXPECT_FALSE(created) << t.name;
    return created ? std::string() : created.status().message();
  };
  const std::string long_name(129, 'n');
  EXPECT_EQ(refusal(accounts_def(long_name)), "table name has 129 bytes, at most 128");
  engine::TableDef t = accounts_def("long_column");
  t.columns[kName].name = long_name;
  EXPECT_EQ(refusal(t), "table 'long_column': column 2's name has 129 bytes, at most 128");
  t = accounts_def("long_index");
  t.indexes[1].name = long_name;
  EXPECT_EQ(refusal(t), "table 'long_index': index 1's name has 129 bytes, at most 128");
  t = accounts_def("many_indexes");
  t.indexes.clear();
  for (int i = 0; i < 65; ++i) t.indexes.push_back({"i" + std::to_string(i), IndexKind::kOrdered, {kBalance}, 0});
  EXPECT_EQ(refusal(t), "table 'many_indexes': has 65 indexes, at most 64");
  EXPECT_EQ(refusal(accounts_def("a$b")),
            "table 'a$b': a table name cannot contain '$' (it names the hidden tables of unique indexes)");
  // At the limits the definition is accepted, and the node keeps working.
  t = accounts_def(std::string(128, 't'));
  t.columns[kName].name = std::string(128, 'c');
  t.indexes.clear();
  for (int i = 0; i < 64; ++i) t.indexes.push_back({std::to_string(i), IndexKind::kOrdered, {kBalance}, 0});
  auto at_limits = conn_->create_table(t);
  ASSERT_TRUE(at_limits) << at_limits.status().to_string();
  EXPECT_TRUE(run([&](api::Transaction& tx) { tx.insert(**at_limits, account(1, 1, "ann")); }));
  EXPECT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(1, 1)); }));
  EXPECT_EQ(balance_of(1), 1);
}

// A unique index lives in a hidden table named "table$index" whose columns
// are the index's and then the primary key's, renamed "$pk$column". A
// definition valid in itself could make that hidden table invalid (a name
// too long, two columns of one name): DICT installed it anyway and every TC
// and LDM asserted on it, taking the whole data node down.
TEST_F(DataApiTest, AUniqueIndexWhoseHiddenTableWouldBeInvalidIsRefusedAndTheNodeKeepsWorking) {
  const auto refusal = [&](const engine::TableDef& t) {
    auto created = conn_->create_table(t);
    EXPECT_FALSE(created) << t.name;
    return created ? std::string() : created.status().message();
  };
  engine::TableDef t = accounts_def(std::string(100, 't'));
  t.indexes[0].name = std::string(100, 'u');  // hidden table name: 201 bytes
  std::string why = refusal(t);
  EXPECT_NE(why.find("unique index '" + t.indexes[0].name + "'"), std::string::npos) << why;
  EXPECT_NE(why.find("name has 201 bytes, at most 128"), std::string::npos) << why;
  t = accounts_def("long_key_name");
  t.columns[kId].name = std::string(126, 'k');  // hidden column "$pk$kkk...": 130 bytes
  why = refusal(t);
  EXPECT_NE(why.find("unique index 'by_email'"), std::string::npos) << why;
  EXPECT_NE(why.find("name has 130 bytes, at most 128"), std::string::npos) << why;
  t = accounts_def("clashing_names");
  t.columns[kEmail].name = "$pk$id";  // the unique column and the renamed key column
  why = refusal(t);
  EXPECT_NE(why.find("unique index 'by_email'"), std::string::npos) << why;
  EXPECT_NE(why.find("column '$pk$id' is defined twice"), std::string::npos) << why;
  // The node is up and its tables work.
  EXPECT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(1, 1)); }));
  EXPECT_EQ(balance_of(1), 1);
  auto other = cluster_->connect(51);
  ASSERT_TRUE(other) << other.status().to_string();
  EXPECT_TRUE((*other)->get_table("accounts"));
  EXPECT_FALSE((*other)->get_table("clashing_names"));
}

// A unique index's hidden table ("table$index") is DICT's own: drop_table
// did not know it, but get_table described it, and a program could then
// write to it directly, so an insert of a value no row has was refused as a
// duplicate (893).
TEST_F(DataApiTest, AUniqueIndexsHiddenTableIsNoTableOfTheApi) {
  auto hidden = conn_->get_table("accounts$by_email");
  EXPECT_FALSE(hidden);
  EXPECT_EQ(hidden.status().message(), "723: No such table existed");
  EXPECT_EQ(conn_->drop_table("accounts$by_email").message(), "723: No such table existed");
  if (hidden) {
    const Row entry = Row().set(0, std::string("user2@example.com")).set(1, uint64_t{77});
    (void)run([&](api::Transaction& tx) { tx.insert(**hidden, entry); });
  }
  EXPECT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(2, 1)); }));
  EXPECT_EQ(balance_of(2), 1);
}

uint64_t data_memory_pages_in_use(TestCluster& cluster) {
  const std::string stats = cluster.node().stats_json();
  const std::string field = "\"pages_in_use\":";
  const std::size_t at = stats.find(field);
  EXPECT_NE(at, std::string::npos) << stats;
  return at == std::string::npos ? 0 : std::stoull(stats.substr(at + field.size()));
}

// Coverage: dropping a table returns every DataMemory page it held (rows,
// hash index, ordered index, the unique index's hidden table), also while a
// scan of it is open and another transaction has uncommitted writes on it;
// the scan then fails with 723, and the node keeps no scan record of it.
TEST_F(DataApiTest, DroppingATableReturnsAllItsPagesEvenWithAScanAndWritesInFlight) {
  ClusterOptions options;
  options.extra_ndbd = "MaxNoOfConcurrentScans=2\n";
  start(options);
  ASSERT_TRUE(conn_->drop_table("accounts"));
  const uint64_t baseline = data_memory_pages_in_use(*cluster_);
  auto other = cluster_->connect(51);
  ASSERT_TRUE(other) << other.status().to_string();
  for (int cycle = 0; cycle < 6; ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    auto t = conn_->create_table(accounts_def());
    ASSERT_TRUE(t) << t.status().to_string();
    for (uint64_t base = 0; base < 1000; base += 100)
      ASSERT_TRUE(run([&](api::Transaction& tx) {
        for (uint64_t id = base; id < base + 100; ++id) tx.insert(**t, account(id, static_cast<int64_t>(id), "name"));
      }));
    EXPECT_GT(data_memory_pages_in_use(*cluster_), baseline);
    api::ScanSpec spec;
    spec.table = *t;
    spec.batch_rows = 1;
    auto scan = conn_->scan(spec);
    ASSERT_TRUE(scan) << scan.status().to_string();
    api::RowView row;
    ASSERT_TRUE((*scan)->next(row));
    api::Transaction& pending = conn_->start_transaction();
    pending.insert(**t, account(5000, 1));
    pending.update(**t, key_of(3), Row().set(kBalance, int64_t{7}));
    ASSERT_TRUE(pending.execute(ExecType::kNoCommit));
    ASSERT_TRUE((*other)->drop_table("accounts"));
    while ((*scan)->next(row)) {
    }
    EXPECT_EQ((*scan)->status().message(), "723: No such table existed");
    (*scan)->close();
    (void)pending.execute(ExecType::kCommit);
    pending.close();
    EXPECT_EQ(data_memory_pages_in_use(*cluster_), baseline);
  }
}

// A transaction's uncommitted writes to a table that another connection
// then dropped went nowhere, yet its commit reported success. The commit
// now fails with 283, and the transaction ends aborted: its writes to a
// table that stays are undone and their locks freed. A transaction that
// only read the dropped table (with a lock) commits: its reads were true.
TEST_F(DataApiTest, ACommitAfterATableItWroteToWasDroppedFailsAndUndoesTheRest) {
  auto kept = conn_->create_table(accounts_def("kept"));
  ASSERT_TRUE(kept) << kept.status().to_string();
  ASSERT_TRUE(run([&](api::Transaction& tx) {
    tx.insert(*table_, account(1, 10));
    tx.insert(**kept, account(1, 10));
  }));
  auto other = cluster_->connect(51);
  ASSERT_TRUE(other) << other.status().to_string();
  api::Transaction& writer = conn_->start_transaction();
  writer.insert(*table_, account(2, 20));
  writer.update(**kept, key_of(1), Row().set(kBalance, int64_t{11}));
  writer.insert(**kept, account(2, 20));
  ASSERT_TRUE(writer.execute(ExecType::kNoCommit));
  api::Transaction& reader = conn_->start_transaction();
  api::Operation& read = reader.read(*table_, key_of(1), {}, LockMode::kShared);
  ASSERT_TRUE(reader.execute(ExecType::kNoCommit));
  EXPECT_EQ(read.value(kBalance).as_int64(), 10);

  ASSERT_TRUE((*other)->drop_table("accounts"));
  EXPECT_EQ(writer.execute(ExecType::kCommit).message(),
            "283: Table was dropped while the transaction was writing to it");
  EXPECT_EQ(writer.error(), ErrorCode::kTableDropped);
  writer.close();
  const Status reader_committed = reader.execute(ExecType::kCommit);
  EXPECT_TRUE(reader_committed) << reader_committed.to_string();
  reader.close();

  // The kept table as before, and nothing of it locked (a lock left behind
  // would fail this update with 266 after the deadlock timeout).
  table_ = *kept;
  EXPECT_EQ(balance_of(1), 10);
  EXPECT_EQ(balance_of(2), std::nullopt);
  const Status updated = run([&](api::Transaction& tx) {
    tx.update(**kept, key_of(1), Row().set(kBalance, int64_t{12}));
    tx.insert(**kept, account(2, 22));
  });
  EXPECT_TRUE(updated) << updated.to_string();
  EXPECT_EQ(balance_of(1), 12);
  EXPECT_EQ(balance_of(2), 22);
}

// Coverage: get_table describes exactly what was created, and ordered scans
// with bounds find the right rows for every column type (signed integers
// across zero, unsigned ones across 2^31 and 2^63, fixed and variable
// byte strings of different lengths).
TEST_F(DataApiTest, EveryColumnTypeIsDescribedAsCreatedAndBoundedByAnOrderedScan) {
  engine::TableDef def;
  def.name = "types";
  def.columns = {{"id", ColumnType::kUint32, 0, false},     {"i32", ColumnType::kInt32, 0, true},
                 {"u32", ColumnType::kUint32, 0, false},    {"i64", ColumnType::kInt64, 0, true},
                 {"u64", ColumnType::kUint64, 0, false},    {"bin", ColumnType::kBinary, 2, true},
                 {"vbin", ColumnType::kVarBinary, 5, true}, {"chr", ColumnType::kChar, 3, false},
                 {"vchr", ColumnType::kVarChar, 6, true}};
  def.primary_key = {0};
  for (uint16_t c = 1; c < def.columns.size(); ++c)
    def.indexes.push_back({"by_" + def.columns[c].name, IndexKind::kOrdered, {c}, 0});
  def.indexes.push_back({"by_u32_chr", IndexKind::kUnique, {2, 7}, 0});
  def.partitions = 3;
  auto created = conn_->create_table(def);
  ASSERT_TRUE(created) << created.status().to_string();
  const engine::TableDef& t = **created;
  auto other = cluster_->connect(51);
  ASSERT_TRUE(other) << other.status().to_string();
  auto described = (*other)->get_table("types");
  ASSERT_TRUE(described) << described.status().to_string();
  EXPECT_EQ(engine::protocol::encode_table(**described), engine::protocol::encode_table(t));
  EXPECT_EQ((*described)->partitions, 3u);
  for (std::size_t c = 0; c < def.columns.size(); ++c) {
    EXPECT_EQ((*described)->columns[c].name, def.columns[c].name);
    EXPECT_EQ((*described)->columns[c].type, def.columns[c].type);
    EXPECT_EQ((*described)->columns[c].length, def.columns[c].length);
    EXPECT_EQ((*described)->columns[c].nullable, def.columns[c].nullable);
  }
  EXPECT_EQ((*described)->primary_key, def.primary_key);
  ASSERT_EQ((*described)->indexes.size(), def.indexes.size());
  for (std::size_t i = 0; i < def.indexes.size(); ++i) {
    EXPECT_EQ((*described)->indexes[i].name, def.indexes[i].name);
    EXPECT_EQ((*described)->indexes[i].kind, def.indexes[i].kind);
    EXPECT_EQ((*described)->indexes[i].columns, def.indexes[i].columns);
    EXPECT_EQ((*described)->indexes[i].index_id, t.indexes[i].index_id);
  }

  // Row v (-20..19): every column's value grows with v, so a bound on any
  // column between the values of rows lo and hi selects exactly lo..hi.
  const auto row_of = [](int v) {
    const int k = v + 20;  // 0..39
    Row r;
    r.set(0, static_cast<uint32_t>(k));
    r.set(1, static_cast<int32_t>(v * 1000));
    r.set(2, static_cast<uint32_t>(0x7FFF'FFF0u + static_cast<uint32_t>(k)));
    r.set(3, static_cast<int64_t>(v) * int64_t{10'000'000'000});
    r.set(4, uint64_t{0x7FFF'FFFF'FFFF'FFF0} + static_cast<uint64_t>(k));
    r.set(5, std::string{static_cast<char>(0x70 + k), '\0'});  // crosses 0x80: bytes compare unsigned
    r.set(6, std::string(static_cast<std::size_t>(k / 8), '\xF0') + std::string(1, static_cast<char>(k)));
    r.set(7, std::string{'a', static_cast<char>('a' + k / 26), static_cast<char>('a' + k % 26)});
    r.set(8, std::string(static_cast<std::size_t>(1 + k / 8), 'm') + std::string(1, static_cast<char>('a' + k % 8)));
    return r;
  };
  ASSERT_TRUE(run([&](api::Transaction& tx) {
    for (int v = -20; v < 20; ++v) tx.insert(t, row_of(v));
  }));
  for (uint16_t c = 1; c < def.columns.size(); ++c) {
    SCOPED_TRACE("column " + def.columns[c].name);
    const Row lo = row_of(-7), hi = row_of(11);
    for (const bool inclusive : {true, false}) {
      api::ScanSpec spec;
      spec.table = &t;
      spec.index = &t.indexes[c - 1];
      spec.has_lower = spec.has_upper = true;
      spec.lower_inclusive = spec.upper_inclusive = inclusive;
      spec.lower.set(c, api::RowView(lo.entries()).value(c).bytes);
      spec.upper.set(c, api::RowView(hi.entries()).value(c).bytes);
      auto scan = conn_->scan(spec);
      ASSERT_TRUE(scan) << scan.status().to_string();
      std::set<uint32_t> ids;
      api::RowView row;
      while ((*scan)->next(row)) EXPECT_TRUE(ids.insert(row.value(0).as_uint32()).second);
      EXPECT_TRUE((*scan)->status()) << (*scan)->status().to_string();
      (*scan)->close();
      std::set<uint32_t> expected;
      for (int v = inclusive ? -7 : -6; v <= (inclusive ? 11 : 10); ++v) expected.insert(static_cast<uint32_t>(v + 20));
      EXPECT_EQ(ids, expected) << (inclusive ? "inclusive" : "exclusive");
    }
  }
}

// A write reports a row's unique-index columns (and primary key) to TC
// twice, before and after, in one signal. A table whose unique columns
// could not fit was created all the same, and every write to it was then
// refused with a bare "4000: Malformed or inconsistent request".
TEST_F(DataApiTest, ATableWhoseUniqueColumnsCannotBeReportedInOneSignalIsRefusedAtCreate) {
  engine::TableDef t;
  t.name = "wide_uniques";
  t.columns = {{"id", ColumnType::kUint32, 0, false}};
  t.primary_key = {0};
  for (uint16_t i = 1; i <= 32; ++i) {
    t.columns.push_back({"u" + std::to_string(i), ColumnType::kVarBinary, 500, false});
    t.indexes.push_back({"by_u" + std::to_string(i), IndexKind::kUnique, {i}, 0});
  }
  auto created = conn_->create_table(t);
  EXPECT_FALSE(created);
  EXPECT_EQ(created.status().message(),
            "table 'wide_uniques': its unique index columns and primary key take 16268 bytes in a signal, at most "
            "16256");
  if (created) {
    Row row;
    row.set(0, uint32_t{1});
    for (uint16_t i = 1; i <= 32; ++i) row.set(i, std::string(10, static_cast<char>(i)));
    const Status inserted = run([&](api::Transaction& tx) { tx.insert(**created, row); });
    EXPECT_TRUE(inserted) << "created, yet: " << inserted.to_string();
  }
  // One unique column fewer fits, and takes writes.
  t.name = "narrower_uniques";
  t.columns.pop_back();
  t.indexes.pop_back();
  auto narrower = conn_->create_table(t);
  ASSERT_TRUE(narrower) << narrower.status().to_string();
  Row row;
  row.set(0, uint32_t{1});
  for (uint16_t i = 1; i <= 31; ++i) row.set(i, std::string(500, static_cast<char>(i)));
  EXPECT_TRUE(run([&](api::Transaction& tx) { tx.insert(**narrower, row); }));
}

TEST_F(DataApiTest, EveryOperationTypeAndItsErrors) {
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(1, 100, "ann")); }));
  EXPECT_EQ(balance_of(1), 100);
  // insert duplicate
  Status dup = run([&](api::Transaction& tx) { tx.insert(*table_, account(1, 5)); });
  EXPECT_EQ(dup.message(), "630: Tuple already existed when attempting to insert (operation 0)");
  // update, write (as update and as insert), delete
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.update(*table_, key_of(1), Row().set(kBalance, int64_t{150})); }));
  EXPECT_EQ(balance_of(1), 150);
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.write(*table_, account(1, 160, "ann")); }));
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.write(*table_, account(2, 200)); }));
  EXPECT_EQ(balance_of(1), 160);
  EXPECT_EQ(balance_of(2), 200);
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.remove(*table_, key_of(2)); }));
  EXPECT_FALSE(balance_of(2).has_value());
  // errors on missing rows
  EXPECT_EQ(run([&](api::Transaction& tx) { tx.read(*table_, key_of(9)); }).message(),
            "626: Tuple did not exist (operation 0)");
  EXPECT_EQ(
      run([&](api::Transaction& tx) { tx.update(*table_, key_of(9), Row().set(kBalance, int64_t{1})); }).message(),
      "626: Tuple did not exist (operation 0)");
  EXPECT_EQ(run([&](api::Transaction& tx) { tx.remove(*table_, key_of(9)); }).message(),
            "626: Tuple did not exist (operation 0)");
  // malformed values: a string too long, a wrong-width integer, NULL in NOT NULL
  Row too_long = account(3, 1);
  too_long.set(kName, std::string(40, 'x'));
  EXPECT_EQ(run([&](api::Transaction& tx) { tx.insert(*table_, too_long); }).message().substr(0, 4), "4000");
  EXPECT_EQ(run([&](api::Transaction& tx) { tx.update(*table_, key_of(1), Row().set(kBalance, int32_t{5})); })
                .message()
                .substr(0, 4),
            "4000");
  EXPECT_EQ(run([&](api::Transaction& tx) { tx.update(*table_, key_of(1), Row().set_null(kBalance)); })
                .message()
                .substr(0, 4),
            "4000");
  // The failures changed nothing.
  EXPECT_EQ(balance_of(1), 160);
  // Only the requested columns come back; NULL reads as NULL.
  api::Transaction& tx = conn_->start_transaction();
  const uint16_t cols[] = {kName, kTag};
  api::Operation& read = tx.read(*table_, key_of(1), cols);
  ASSERT_TRUE(tx.execute(ExecType::kCommit));
  EXPECT_EQ(read.value(kName).as_string(), "ann");
  EXPECT_TRUE(read.value(kTag).is_null);
  EXPECT_FALSE(read.row().has(kBalance));
  tx.close();
}

TEST_F(DataApiTest, StaleTableVersionIsRefused) {
  const engine::TableDef old = *table_;
  ASSERT_TRUE(conn_->drop_table("accounts"));
  ASSERT_TRUE(conn_->create_table(accounts_def()));
  api::Transaction& tx = conn_->start_transaction();
  tx.read(old, key_of(1));
  const Status s = tx.execute(ExecType::kCommit);
  EXPECT_TRUE(s.message().rfind("241:", 0) == 0 || s.message().rfind("723:", 0) == 0) << s.message();
  tx.close();
}

// get_table() caches. When another connection dropped the table and
// created it again differently, the cached definition's operations were
// refused (723 or 241) but get_table() kept returning that same stale
// definition, so the connection could never use the table again.
TEST_F(DataApiTest, AStaleCachedDefinitionIsRefusedAndGetTableThenFetchesTheNewOne) {
  auto other_conn = cluster_->connect(51);
  ASSERT_TRUE(other_conn) << other_conn.status().to_string();
  api::Connection& other = **other_conn;
  const auto is_stale_table_error = [](const Status& s) {
    return s.message().rfind("241:", 0) == 0 || s.message().rfind("723:", 0) == 0;
  };
  for (const bool by_scan : {false, true}) {
    SCOPED_TRACE(by_scan ? "found stale by a scan" : "found stale by a read");
    auto cached = other.get_table("accounts");
    ASSERT_TRUE(cached) << cached.status().to_string();
    const engine::TableDef* old = *cached;
    const std::size_t old_columns = old->columns.size();
    ASSERT_TRUE(conn_->drop_table("accounts"));
    engine::TableDef changed = accounts_def();
    while (changed.columns.size() <= old_columns)  // one column more than the cached definition
      changed.columns.push_back({"extra" + std::to_string(changed.columns.size()), ColumnType::kUint32, 0, true});
    auto created = conn_->create_table(changed);
    ASSERT_TRUE(created) << created.status().to_string();
    table_ = *created;

    if (by_scan) {
      api::ScanSpec spec;
      spec.table = old;
      auto scan = other.scan(spec);
      const Status s = scan ? (*scan)->status() : scan.status();
      EXPECT_TRUE(is_stale_table_error(s)) << s.to_string();
      if (scan) (*scan)->close();
    } else {
      api::Transaction& tx = other.start_transaction();
      tx.read(*old, key_of(1));
      const Status s = tx.execute(ExecType::kCommit);
      EXPECT_TRUE(is_stale_table_error(s)) << s.to_string();
      tx.close();
    }
    EXPECT_EQ(old->columns.size(), old_columns) << "the old definition stays readable";

    auto fresh = other.get_table("accounts");
    ASSERT_TRUE(fresh) << fresh.status().to_string();
    EXPECT_EQ((*fresh)->table_id, table_->table_id);
    EXPECT_EQ((*fresh)->version, table_->version);
    EXPECT_EQ((*fresh)->columns.size(), old_columns + 1);
    api::Transaction& tx = other.start_transaction();
    tx.insert(**fresh, account(1, 42));
    EXPECT_TRUE(tx.execute(ExecType::kCommit)) << tx.status().to_string();
    tx.close();
    EXPECT_EQ(balance_of(1), 42);
  }
}

// create_table() added its definition to the cache beside any older one of
// the same name (cached before another connection dropped the table), and
// get_table() went on answering with the older one.
TEST_F(DataApiTest, GetTableAnswersWithTheDefinitionThisConnectionCreatedLast) {
  auto other = cluster_->connect(51);
  ASSERT_TRUE(other) << other.status().to_string();
  ASSERT_TRUE((*other)->drop_table("accounts"));
  engine::TableDef changed = accounts_def();
  changed.columns.push_back({"extra", ColumnType::kUint32, 0, true});
  auto created = conn_->create_table(changed);
  ASSERT_TRUE(created) << created.status().to_string();
  auto cached = conn_->get_table("accounts");
  ASSERT_TRUE(cached) << cached.status().to_string();
  EXPECT_EQ(*cached, *created);
  EXPECT_EQ((*cached)->columns.size(), 6u);
  EXPECT_EQ(table_->columns.size(), 5u) << "the older definition stays readable";
  api::Transaction& tx = conn_->start_transaction();
  tx.insert(**cached, account(1, 1));
  EXPECT_TRUE(tx.execute(ExecType::kCommit)) << tx.status().to_string();
  tx.close();
  table_ = *created;
  EXPECT_EQ(balance_of(1), 1);
}

TEST_F(DataApiTest, BatchesNoCommitCommitAndRollback) {
  // 20 inserts in one round trip, not committed yet.
  api::Transaction& tx = conn_->start_transaction();
  for (uint64_t id = 10; id < 30; ++id) tx.insert(*table_, account(id, static_cast<int64_t>(id)));
  ASSERT_TRUE(tx.execute(ExecType::kNoCommit));
  EXPECT_FALSE(balance_of(10).has_value()) << "read committed must not see uncommitted rows";
  // The same transaction sees its own rows.
  api::Operation& own = tx.read(*table_, key_of(15), {}, LockMode::kShared);
  ASSERT_TRUE(tx.execute(ExecType::kNoCommit));
  EXPECT_EQ(own.value(kBalance).as_int64(), 15);
  ASSERT_TRUE(tx.execute(ExecType::kCommit));
  tx.close();
  EXPECT_EQ(balance_of(29), 29);
  // Rollback undoes a batch.
  api::Transaction& tx2 = conn_->start_transaction();
  tx2.update(*table_, key_of(10), Row().set(kBalance, int64_t{-1}));
  tx2.remove(*table_, key_of(11));
  tx2.insert(*table_, account(99, 99));
  ASSERT_TRUE(tx2.execute(ExecType::kNoCommit));
  ASSERT_TRUE(tx2.execute(ExecType::kRollback));
  tx2.close();
  EXPECT_EQ(balance_of(10), 10);
  EXPECT_EQ(balance_of(11), 11);
  EXPECT_FALSE(balance_of(99).has_value());
  // An error in the middle of a batch aborts all of it.
  api::Transaction& tx3 = conn_->start_transaction();
  tx3.update(*table_, key_of(12), Row().set(kBalance, int64_t{-5}));
  tx3.insert(*table_, account(13, 0));  // duplicate
  tx3.update(*table_, key_of(14), Row().set(kBalance, int64_t{-5}));
  EXPECT_EQ(tx3.execute(ExecType::kCommit).message(),
            "630: Tuple already existed when attempting to insert (operation 1)");
  EXPECT_EQ(tx3.error(), ErrorCode::kDuplicateKey);
  tx3.close();
  EXPECT_EQ(balance_of(12), 12);
  EXPECT_EQ(balance_of(14), 14);
}

// A rollback ends the transaction, as a commit does, whether or not the
// node had started it: a later execute says it has finished (the node no
// longer knows it), and what it did stays undone.
TEST_F(DataApiTest, ARolledBackTransactionIsFinished) {
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(1, 1)); }));
  api::Transaction& tx = conn_->start_transaction();
  tx.update(*table_, key_of(1), Row().set(kBalance, int64_t{5}));
  ASSERT_TRUE(tx.execute(ExecType::kNoCommit));
  ASSERT_TRUE(tx.execute(ExecType::kRollback));
  EXPECT_TRUE(tx.finished());
  tx.update(*table_, key_of(1), Row().set(kBalance, int64_t{6}));
  const Status s = tx.execute(ExecType::kCommit);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_EQ(s.message(), "the transaction has finished");
  tx.close();
  EXPECT_EQ(balance_of(1), 1);
  api::Transaction& unstarted = conn_->start_transaction();
  ASSERT_TRUE(unstarted.execute(ExecType::kRollback));
  EXPECT_TRUE(unstarted.finished());
  unstarted.close();
}

// Each operation of a batch carries its own key, values, column list and
// lock, and each read gets its own row back, in a batch that mixes them and
// in the next batch of the same transaction (the buffers are reused).
TEST_F(DataApiTest, EachOperationOfAMixedBatchGetsItsOwnRequestAndRow) {
  ASSERT_TRUE(run([&](api::Transaction& tx) {
    for (uint64_t id = 1; id <= 4; ++id)
      tx.insert(*table_, account(id, static_cast<int64_t>(id) * 10, "n" + std::to_string(id)));
  }));
  const uint16_t name_only[] = {kName};
  const uint16_t balance_and_id[] = {kBalance, kId};
  api::Transaction& tx = conn_->start_transaction();
  api::Operation& all = tx.read(*table_, key_of(3));
  tx.update(*table_, key_of(1), Row().set(kBalance, int64_t{-1}));
  api::Operation& name = tx.read(*table_, key_of(2), name_only);
  tx.insert(*table_, account(5, 50, "five"));
  api::Operation& by_email = tx.read_unique(*table_, index("by_email"), Row().set(kEmail, "user4@example.com"),
                                            balance_and_id, LockMode::kShared);
  ASSERT_TRUE(tx.execute(ExecType::kNoCommit));
  EXPECT_EQ(all.value(kId).as_uint64(), 3u);
  EXPECT_EQ(all.value(kName).as_string(), "n3");
  EXPECT_EQ(all.value(kBalance).as_int64(), 30);
  EXPECT_EQ(name.value(kName).as_string(), "n2");
  EXPECT_FALSE(name.row().has(kBalance));
  EXPECT_EQ(by_email.value(kId).as_uint64(), 4u);
  EXPECT_EQ(by_email.value(kBalance).as_int64(), 40);
  EXPECT_FALSE(by_email.row().has(kName));
  // A second batch: its own writes and reads, and the first batch's rows.
  tx.write(*table_, account(2, 22, "two"));
  api::Operation& own_insert = tx.read(*table_, key_of(5), name_only, LockMode::kShared);
  api::Operation& own_update = tx.read(*table_, key_of(1), balance_and_id, LockMode::kExclusive);
  api::Operation& own_write = tx.read(*table_, key_of(2), {}, LockMode::kShared);
  ASSERT_TRUE(tx.execute(ExecType::kCommit));
  EXPECT_EQ(own_insert.value(kName).as_string(), "five");
  EXPECT_EQ(own_update.value(kBalance).as_int64(), -1);
  EXPECT_EQ(own_update.value(kId).as_uint64(), 1u);
  EXPECT_EQ(own_write.value(kName).as_string(), "two");
  EXPECT_EQ(own_write.value(kBalance).as_int64(), 22);
  EXPECT_EQ(tx.operation_count(), 9u);
  tx.close();
  EXPECT_EQ(balance_of(2), 22);
  EXPECT_EQ(balance_of(5), 50);
}

// A batch whose requests fill the link's 64 KB ring several times over: the
// API waits for room (receiving meanwhile) and packs the rest into the next
// reservations; every operation arrives once and in order.
TEST_F(DataApiTest, ABatchLargerThanTheSendBufferIsSentWhole) {
  ClusterOptions options;
  options.medium = "shm";
  options.extra_link = "ShmSize=64K\n";
  start(options);
  constexpr uint64_t kRows = 1500;  // about 200 KB of requests each way
  const std::string name(30, 'x');
  api::Transaction& tx = conn_->start_transaction();
  for (uint64_t id = 0; id < kRows; ++id) tx.insert(*table_, account(id, static_cast<int64_t>(id), name));
  ASSERT_TRUE(tx.execute(ExecType::kNoCommit));
  std::vector<api::Operation*> reads;
  for (uint64_t id = 0; id < kRows; ++id) reads.push_back(&tx.read(*table_, key_of(id), {}, LockMode::kShared));
  ASSERT_TRUE(tx.execute(ExecType::kCommit));
  for (uint64_t id = 0; id < kRows; ++id) {
    ASSERT_TRUE(reads[id]->has_row()) << id;
    EXPECT_EQ(reads[id]->value(kId).as_uint64(), id);
    EXPECT_EQ(reads[id]->value(kBalance).as_int64(), static_cast<int64_t>(id));
  }
  tx.close();
  EXPECT_EQ(balance_of(kRows - 1), static_cast<int64_t>(kRows - 1));
}

// Signals executed so far by the data node's thread `name` ("tc 1"), from
// its statistics text.
uint64_t thread_signals(const std::string& stats, const std::string& name) {
  const std::string label = "thread " + name + ": loops ";
  const std::size_t at = stats.find(label);
  if (at == std::string::npos) {
    ADD_FAILURE() << "no " << name << " in " << stats;
    return 0;
  }
  const std::size_t signals = stats.find("signals ", at);
  return std::stoull(stats.substr(signals + 8));
}

// A batch goes to TC as trains of up to 32 requests, and the reads TC runs
// itself answer in KeyDataTrains that fill a frame and go on in the next:
// batches of 2..70 reads of rows up to 6 KB (a train's answer many frames
// long), with a missing row among them or not, get every row whole, in
// both layouts (single-threaded: trains answered whole by TC; with TC and
// LDM on their own threads: each read answered by the LDM).
TEST_F(DataApiTest, BatchesGoAsTrainsAndEveryRowComesBackWhole) {
  for (const bool single : {true, false}) {
    SCOPED_TRACE(single ? "single-threaded" : "multi-threaded");
    start_over_shm(single);
    engine::TableDef big;
    big.name = "big";
    big.columns = {{"id", ColumnType::kUint64, 0, false}, {"blob", ColumnType::kVarBinary, 6000, false}};
    big.primary_key = {0};
    auto created = conn_->create_table(big);
    ASSERT_TRUE(created) << created.status().to_string();
    const engine::TableDef& t = **created;
    constexpr uint64_t kRows = 70;
    const auto blob_of = [](uint64_t id) {
      std::string b(static_cast<std::size_t>(id * 85 % 6001), 'a');
      for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<char>('a' + (id + i) % 26);
      return b;
    };
    for (uint64_t id = 0; id < kRows; id += 10)
      ASSERT_TRUE(run([&](api::Transaction& tx) {
        for (uint64_t k = id; k < id + 10; ++k) tx.insert(t, Row().set(0, k).set(1, blob_of(k)));
      }));
    for (const std::size_t batch :
         {std::size_t{2}, std::size_t{31}, std::size_t{32}, std::size_t{33}, std::size_t{64}, std::size_t{70}}) {
      SCOPED_TRACE("batch of " + std::to_string(batch));
      api::Transaction& tx = conn_->start_transaction();
      std::vector<api::Operation*> reads;
      for (std::size_t i = 0; i < batch; ++i) reads.push_back(&tx.read(t, Row().set(0, uint64_t{(i * 37) % kRows})));
      ASSERT_TRUE(tx.execute(ExecType::kCommit));
      for (std::size_t i = 0; i < batch; ++i) {
        const uint64_t id = (i * 37) % kRows;
        ASSERT_TRUE(reads[i]->has_row()) << "read " << i;
        EXPECT_EQ(reads[i]->value(0).as_uint64(), id);
        EXPECT_EQ(reads[i]->value(1).as_string(), blob_of(id)) << "read " << i;
      }
      tx.close();
      // The same with a missing row in the middle: the batch fails naming it.
      api::Transaction& bad = conn_->start_transaction();
      for (std::size_t i = 0; i < batch; ++i) bad.read(t, Row().set(0, i == batch / 2 ? uint64_t{999} : uint64_t{i}));
      const Status s = bad.execute(ExecType::kCommit);
      EXPECT_EQ(s.message(), "626: Tuple did not exist (operation " + std::to_string(batch / 2) + ")");
      bad.close();
    }
  }
}

// A batch mixing reads by primary and by unique key (column subsets too)
// goes as trains; every operation gets its own row, and a unique value
// nobody has fails the batch naming that operation. Single-threaded, the
// unique lookups run in TC's own LDM and answer inside the train.
TEST_F(DataApiTest, BatchedUniqueKeyReadsGetTheirRowsInBothLayouts) {
  for (const bool single : {true, false}) {
    SCOPED_TRACE(single ? "single-threaded" : "multi-threaded");
    start_over_shm(single);
    ASSERT_TRUE(run([&](api::Transaction& tx) {
      for (uint64_t id = 0; id < 40; ++id) tx.insert(*table_, account(id, static_cast<int64_t>(id) * 3, "n"));
    }));
    const uint16_t balance_only[] = {kBalance};
    const auto email_of = [](uint64_t id) { return "user" + std::to_string(id) + "@example.com"; };
    for (const std::size_t batch : {std::size_t{1}, std::size_t{2}, std::size_t{20}, std::size_t{45}}) {
      SCOPED_TRACE("batch of " + std::to_string(batch));
      api::Transaction& tx = conn_->start_transaction();
      std::vector<api::Operation*> ops;
      for (std::size_t i = 0; i < batch; ++i) {
        const uint64_t id = (i * 7) % 40;
        if (i % 3 == 0)
          ops.push_back(&tx.read(*table_, key_of(id)));
        else
          ops.push_back(
              &tx.read_unique(*table_, index("by_email"), Row().set(kEmail, email_of(id)),
                              i % 3 == 2 ? std::span<const uint16_t>(balance_only) : std::span<const uint16_t>()));
      }
      ASSERT_TRUE(tx.execute(ExecType::kCommit));
      for (std::size_t i = 0; i < batch; ++i) {
        const uint64_t id = (i * 7) % 40;
        ASSERT_TRUE(ops[i]->has_row()) << "operation " << i;
        EXPECT_EQ(ops[i]->value(kBalance).as_int64(), static_cast<int64_t>(id) * 3) << "operation " << i;
        if (i % 3 == 2) {
          EXPECT_FALSE(ops[i]->row().has(kId)) << "operation " << i;
        } else {
          EXPECT_EQ(ops[i]->value(kId).as_uint64(), id) << "operation " << i;
          EXPECT_EQ(ops[i]->value(kEmail).as_string(), email_of(id)) << "operation " << i;
        }
      }
      tx.close();
      api::Transaction& bad = conn_->start_transaction();
      for (std::size_t i = 0; i < batch; ++i)
        bad.read_unique(*table_, index("by_email"), Row().set(kEmail, i == batch / 2 ? "nobody" : email_of(i % 40)));
      const Status s = bad.execute(ExecType::kCommit);
      EXPECT_EQ(s.message(), "626: Tuple did not exist (operation " + std::to_string(batch / 2) + ")");
      bad.close();
    }
  }
}

// start_transaction(table, &key) picks the TC of the key's partition
// (partition % TC count, the partition from the hash of the encoded key):
// transactions whose keys all belong to one TC keep the other one idle.
TEST_F(DataApiTest, AHintedTransactionGoesToTheTcOfItsKeysPartition) {
  ClusterOptions options;
  options.single_threaded = false;
  options.thread_config = "ldm={count=1},tc={count=2},recv={count=1}";
  start(options);
  ASSERT_TRUE(run([&](api::Transaction& tx) {
    for (uint64_t id = 0; id < 64; ++id) tx.insert(*table_, account(id, static_cast<int64_t>(id)));
  }));
  const engine::KeyCodec codec = engine::KeyCodec::for_primary_key(*table_);
  auto tc_of = [&](uint64_t id) {
    std::byte key[engine::kMaxKeyBytes];
    const engine::ValueRef value = engine::ValueRef::of(id);
    auto n = codec.encode({&value, 1}, key);
    EXPECT_TRUE(n);
    return engine::partition_of(engine::hash_key(key, *n), table_->partitions) % 2;
  };
  constexpr int kTransactions = 60;
  for (uint32_t target = 0; target < 2; ++target) {
    const std::string busy = "tc " + std::to_string(target), idle = "tc " + std::to_string(1 - target);
    const std::string before = cluster_->node().stats_text();
    int done = 0;
    for (uint64_t id = 0; done < kTransactions; id = (id + 1) % 64) {
      if (tc_of(id) != target) continue;
      const Row key = key_of(id);
      api::Transaction& tx = conn_->start_transaction(table_, &key);
      api::Operation& read = tx.read(*table_, key);
      ASSERT_TRUE(tx.execute(ExecType::kCommit));
      EXPECT_EQ(read.value(kId).as_uint64(), id);
      tx.close();
      ++done;
    }
    const std::string after = cluster_->node().stats_text();
    EXPECT_GE(thread_signals(after, busy) - thread_signals(before, busy), uint64_t{kTransactions});
    EXPECT_LT(thread_signals(after, idle) - thread_signals(before, idle), uint64_t{kTransactions / 4}) << after;
  }
}

TEST_F(DataApiTest, UniqueIndexReadsAndConstraints) {
  ASSERT_TRUE(run([&](api::Transaction& tx) {
    tx.insert(*table_, account(1, 10));
    tx.insert(*table_, account(2, 20));
  }));
  const engine::IndexDef& by_email = index("by_email");
  auto read_email = [&](const std::string& email) -> std::optional<uint64_t> {
    api::Transaction& tx = conn_->start_transaction();
    api::Operation& op = tx.read_unique(*table_, by_email, Row().set(kEmail, email));
    const Status s = tx.execute(ExecType::kCommit);
    std::optional<uint64_t> out;
    if (s)
      out = op.value(kId).as_uint64();
    else
      EXPECT_EQ(s.message(), "626: Tuple did not exist (operation 0)");
    tx.close();
    return out;
  };
  EXPECT_EQ(read_email("user2@example.com"), 2u);
  EXPECT_FALSE(read_email("nobody@example.com"));
  // A second row with the same email: constraint violation, nothing inserted.
  Row clash = account(3, 30);
  clash.set(kEmail, std::string("user1@example.com"));
  Row clash_fixed = clash;
  EXPECT_EQ(run([&](api::Transaction& tx) { tx.insert(*table_, clash); }).message(),
            "893: Duplicate value in unique index (operation 0)");
  EXPECT_FALSE(balance_of(3).has_value());
  // Changing the email moves the index entry; deleting the row removes it.
  ASSERT_TRUE(run(
      [&](api::Transaction& tx) { tx.update(*table_, key_of(1), Row().set(kEmail, std::string("ann@example.com"))); }));
  EXPECT_EQ(read_email("ann@example.com"), 1u);
  EXPECT_FALSE(read_email("user1@example.com"));
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, clash_fixed); }));  // the old email is free now
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.remove(*table_, key_of(1)); }));
  EXPECT_FALSE(read_email("ann@example.com"));
}

TEST_F(DataApiTest, ScansFullOrderedBoundedAndFiltered) {
  for (uint64_t base = 0; base < 400; base += 50)
    ASSERT_TRUE(run([&](api::Transaction& tx) {
      for (uint64_t id = base; id < base + 50; ++id) tx.insert(*table_, account(id, static_cast<int64_t>(id) - 100));
    }));
  auto count = [&](api::ScanSpec spec) {
    spec.table = table_;
    auto scan = conn_->scan(spec);
    EXPECT_TRUE(scan) << scan.status().to_string();
    if (!scan) return uint64_t{0};
    api::RowView row;
    std::set<uint64_t> seen;
    while ((*scan)->next(row)) {
      const uint64_t id = row.value(kId).as_uint64();
      EXPECT_TRUE(seen.insert(id).second) << "row " << id << " returned twice";
    }
    EXPECT_TRUE((*scan)->status()) << (*scan)->status().to_string();
    (*scan)->close();
    return static_cast<uint64_t>(seen.size());
  };
  api::ScanSpec full;
  full.batch_rows = 7;
  EXPECT_EQ(count(full), 400u);
  api::ScanSpec range;
  range.index = &index("by_balance");
  range.has_lower = true;
  range.lower.set(kBalance, int64_t{0});  // balance >= 0: ids 100..399
  range.has_upper = true;
  range.upper_inclusive = false;
  range.upper.set(kBalance, int64_t{100});  // balance < 100: ids 100..199
  EXPECT_EQ(count(range), 100u);
  api::ScanSpec eq;
  eq.index = &index("by_balance");
  eq.has_lower = eq.has_upper = true;
  eq.lower.set(kBalance, int64_t{-50});
  eq.upper.set(kBalance, int64_t{-50});
  EXPECT_EQ(count(eq), 1u);
  api::ScanSpec filtered;
  filtered.filter.push_back({kBalance, engine::protocol::FilterOp::kGe, Row().set(kBalance, int64_t{250})});
  filtered.filter.push_back({kTag, engine::protocol::FilterOp::kIsNull, Row()});
  EXPECT_EQ(count(filtered), 50u);  // ids 350..399
  api::ScanSpec bad;
  bad.index = &table_->indexes[0];  // the unique index is not an ordered index
  bad.table = table_;
  auto refused = conn_->scan(bad);
  EXPECT_FALSE(refused.is_ok() && (*refused)->status().is_ok());
}

// A scan read to its end was taken for free before it was closed: the next
// scan() handed out the same Scan object, so the first scan's close() (as
// every caller does after its loop) closed the second one, which then
// returned no rows and reported no error.
TEST_F(DataApiTest, AScanReadToItsEndStaysTheCallersUntilClosed) {
  ASSERT_TRUE(run([&](api::Transaction& tx) {
    for (uint64_t id = 0; id < 20; ++id) tx.insert(*table_, account(id, 1));
  }));
  api::ScanSpec spec;
  spec.table = table_;
  auto first = conn_->scan(spec);
  ASSERT_TRUE(first) << first.status().to_string();
  api::RowView row;
  uint64_t first_rows = 0;
  while ((*first)->next(row)) ++first_rows;
  EXPECT_EQ(first_rows, 20u);
  auto second = conn_->scan(spec);
  ASSERT_TRUE(second) << second.status().to_string();
  EXPECT_NE(*first, *second) << "an open scan was handed out again";
  (*first)->close();
  uint64_t second_rows = 0;
  while ((*second)->next(row)) ++second_rows;
  EXPECT_TRUE((*second)->status()) << (*second)->status().to_string();
  EXPECT_EQ(second_rows, 20u);
  (*second)->close();
  // Closed scans are reused: many scans in turn keep a few objects.
  std::set<api::Scan*> objects;
  for (int i = 0; i < 50; ++i) {
    auto scan = conn_->scan(spec);
    ASSERT_TRUE(scan) << scan.status().to_string();
    objects.insert(*scan);
    (*scan)->close();
  }
  EXPECT_LE(objects.size(), 2u);
}

// batch_rows outside what the node accepts (1..4096) came back as a bare
// "4000: Malformed or inconsistent request".
TEST_F(DataApiTest, AScanBatchSizeOutOfRangeIsRefusedNamingTheRange) {
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(1, 1)); }));
  api::ScanSpec spec;
  spec.table = table_;
  for (const uint32_t rows : {0u, engine::protocol::kMaxScanBatchRows + 1, 0xFFFF'FFFFu}) {
    spec.batch_rows = rows;
    auto scan = conn_->scan(spec);
    ASSERT_FALSE(scan) << rows;
    EXPECT_EQ(scan.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(scan.status().message(), "ScanSpec.batch_rows is " + std::to_string(rows) + "; accepted 1.." +
                                           std::to_string(engine::protocol::kMaxScanBatchRows));
  }
  for (const uint32_t rows : {1u, engine::protocol::kMaxScanBatchRows}) {
    spec.batch_rows = rows;
    auto scan = conn_->scan(spec);
    ASSERT_TRUE(scan) << scan.status().to_string();
    api::RowView row;
    EXPECT_TRUE((*scan)->next(row));
    EXPECT_FALSE((*scan)->next(row));
    EXPECT_TRUE((*scan)->status()) << (*scan)->status().to_string();
    (*scan)->close();
  }
}

// A ScanSpec the node cannot run came back as a bare "4000: Malformed or
// inconsistent request", and bounds given without an index were dropped
// without a word: the scan returned every row.
TEST_F(DataApiTest, AScanSpecTheNodeCannotRunIsRefusedNamingWhatIsWrong) {
  ASSERT_TRUE(run([&](api::Transaction& tx) {
    for (uint64_t id = 0; id < 10; ++id) tx.insert(*table_, account(id, static_cast<int64_t>(id)));
  }));
  const auto refusal = [&](api::ScanSpec spec) {
    spec.table = table_;
    auto scan = conn_->scan(spec);
    if (scan) {
      (*scan)->close();
      ADD_FAILURE() << "scan accepted";
      return std::string();
    }
    EXPECT_EQ(scan.status().code(), StatusCode::kInvalidArgument);
    return scan.status().message();
  };
  api::ScanSpec spec;
  spec.columns = {kId, 9};
  EXPECT_EQ(refusal(spec), "ScanSpec.columns: table 'accounts' has no column 9 (it has 5)");
  spec = {};
  spec.filter.push_back({9, engine::protocol::FilterOp::kEq, Row().set(9, uint32_t{1})});
  EXPECT_EQ(refusal(spec), "ScanSpec.filter: table 'accounts' has no column 9 (it has 5)");
  spec = {};
  spec.filter.push_back({kBalance, engine::protocol::FilterOp::kGe, Row().set(kBalance, uint32_t{1})});
  EXPECT_EQ(refusal(spec), "ScanSpec.filter: column 'balance' (INT64) takes 8-byte values, not 4");
  spec = {};
  spec.has_lower = true;
  spec.lower.set(kId, uint64_t{5});
  EXPECT_EQ(refusal(spec), "ScanSpec has bounds but no ordered index");
  spec = {};
  spec.index = &index("by_balance");
  spec.has_upper = true;
  spec.upper.set(kId, uint64_t{5});
  EXPECT_EQ(refusal(spec), "ScanSpec.upper: column 'id' is not among the first 1 columns of index 'by_balance'");
  spec = {};
  spec.index = &index("by_balance");
  spec.has_lower = true;
  spec.lower.set(kBalance, uint32_t{5});
  EXPECT_EQ(refusal(spec), "ScanSpec.lower: column 'balance' (INT64) takes 8-byte values, not 4");
  // A good spec still runs.
  spec = {};
  spec.table = table_;
  spec.index = &index("by_balance");
  spec.has_lower = true;
  spec.lower.set(kBalance, int64_t{5});
  spec.filter.push_back({kBalance, engine::protocol::FilterOp::kLt, Row().set(kBalance, int64_t{8})});
  spec.columns = {kId};
  auto scan = conn_->scan(spec);
  ASSERT_TRUE(scan) << scan.status().to_string();
  std::set<uint64_t> ids;
  api::RowView row;
  while ((*scan)->next(row)) ids.insert(row.value(kId).as_uint64());
  EXPECT_TRUE((*scan)->status()) << (*scan)->status().to_string();
  (*scan)->close();
  EXPECT_EQ(ids, (std::set<uint64_t>{5, 6, 7}));
}

// A scan opens one LDM scan record per partition: the LDMs must have
// MaxNoOfConcurrentScans x PartitionsPerTable of them for the TC's limit to
// be the one a program meets (before, they had MaxNoOfConcurrentScans, so
// with 2 and 8 partitions not even one full scan could open).
TEST_F(DataApiTest, TheConcurrentScanLimitIsTheTcsAndALocalLimitIsNamedWhenHit) {
  const auto fill = [&] {
    ASSERT_TRUE(run([&](api::Transaction& tx) {
      for (uint64_t id = 0; id < 64; ++id) tx.insert(*table_, account(id, 1));
    }));
  };
  // Opens a full scan and reads its first row, leaving it open; the error
  // when it fails to open or to start.
  const auto open_scan = [&](api::Scan*& out) -> Status {
    api::ScanSpec spec;
    spec.table = table_;
    spec.batch_rows = 1;
    auto scan = conn_->scan(spec);
    if (!scan) return scan.status();
    out = *scan;
    api::RowView row;
    if (!out->next(row)) {
      const Status s = out->status();
      out->close();
      out = nullptr;
      return s.is_ok() ? Status(StatusCode::kInternal, "the scan returned no row") : s;
    }
    return Status::ok();
  };
  const auto drain = [&](api::Scan* scan) {
    uint64_t rows = 1;  // open_scan read the first
    api::RowView row;
    while (scan->next(row)) ++rows;
    EXPECT_TRUE(scan->status()) << scan->status().to_string();
    scan->close();
    return rows;
  };
  ClusterOptions options;
  options.extra_ndbd = "MaxNoOfConcurrentScans=2\n";
  start(options);
  fill();
  api::Scan* a = nullptr;
  api::Scan* b = nullptr;
  api::Scan* c = nullptr;
  ASSERT_TRUE(open_scan(a)) << "the first of two scans allowed";
  ASSERT_TRUE(open_scan(b)) << "the second of two scans allowed";
  const Status third = open_scan(c);
  EXPECT_FALSE(third);
  EXPECT_NE(third.message().find("488: Too many active scans"), std::string::npos) << third.to_string();
  EXPECT_EQ(drain(a), 64u);
  EXPECT_EQ(drain(b), 64u);
  ASSERT_TRUE(open_scan(c)) << "a scan slot is free again";
  EXPECT_EQ(drain(c), 64u);

  // Fewer local scan records than a table's partitions: every scan fails,
  // clearly, and leaves nothing behind.
  options.extra_ndbd = "MaxNoOfLocalScans=4\n";
  start(options);
  fill();
  for (int attempt = 0; attempt < 3; ++attempt) {
    api::Scan* s = nullptr;
    const Status refused = open_scan(s);
    EXPECT_FALSE(refused);
    EXPECT_NE(refused.message().find("MaxNoOfLocalScans"), std::string::npos) << refused.to_string();
  }
  EXPECT_EQ(balance_of(7), 1) << "key operations go on";
}

// Coverage: with room for two scans at a time, scans closed after their
// first row, scans interleaved with each other and with transactions on one
// connection, and scans left open by a connection that goes away all give
// their records back: scans keep opening.
TEST_F(DataApiTest, ScansClosedEarlyInterleavedOrAbandonedLeaveNoScanRecordBehind) {
  ClusterOptions options;
  options.extra_ndbd = "MaxNoOfConcurrentScans=2\n";
  start(options);
  ASSERT_TRUE(run([&](api::Transaction& tx) {
    for (uint64_t id = 0; id < 100; ++id) tx.insert(*table_, account(id, static_cast<int64_t>(id)));
  }));
  api::ScanSpec full;
  full.table = table_;
  full.batch_rows = 2;
  api::ScanSpec ordered = full;
  ordered.index = &index("by_balance");
  api::RowView row;
  for (int i = 0; i < 20; ++i) {
    auto scan = conn_->scan(i % 2 ? ordered : full);
    ASSERT_TRUE(scan) << "scan " << i << ": " << scan.status().to_string();
    ASSERT_TRUE((*scan)->next(row)) << "scan " << i << ": " << (*scan)->status().to_string();
    (*scan)->close();
  }
  for (int i = 0; i < 3; ++i) {
    auto a = conn_->scan(full);
    auto b = conn_->scan(ordered);
    ASSERT_TRUE(a && b);
    std::set<uint64_t> seen_a, seen_b;
    bool more_a = true, more_b = true;
    for (uint64_t step = 0; more_a || more_b; ++step) {
      if (more_a && (more_a = (*a)->next(row))) seen_a.insert(row.value(kId).as_uint64());
      if (more_b && (more_b = (*b)->next(row))) seen_b.insert(row.value(kId).as_uint64());
      if (step % 16 == 0) {
        const uint64_t id = step % 100;
        ASSERT_TRUE(run([&](api::Transaction& tx) { tx.update(*table_, key_of(id), Row().set(kName, "x")); }));
        EXPECT_EQ(balance_of(id), static_cast<int64_t>(id));
      }
    }
    EXPECT_TRUE((*a)->status() && (*b)->status());
    EXPECT_EQ(seen_a.size(), 100u);
    EXPECT_EQ(seen_b.size(), 100u);
    (*a)->close();
    (*b)->close();
  }
  for (int i = 0; i < 4; ++i) {
    {
      auto leaving = cluster_->connect(51);
      ASSERT_TRUE(leaving) << leaving.status().to_string();
      auto t = (*leaving)->get_table("accounts");
      ASSERT_TRUE(t);
      api::ScanSpec spec = full;
      spec.table = *t;
      auto a = (*leaving)->scan(spec);
      auto b = (*leaving)->scan(spec);
      ASSERT_TRUE(a && b && (*a)->next(row) && (*b)->next(row));
    }  // the connection closes with both scans open
    // The node notices the disconnect on its own time: wait for a scan to open.
    const uint64_t until = monotonic_ns() + 10'000'000'000ULL;
    Status opened;
    do {
      auto scan = conn_->scan(full);
      opened = scan ? (*scan)->status() : scan.status();
      if (scan) (*scan)->close();
    } while (!opened && monotonic_ns() < until);
    ASSERT_TRUE(opened) << "after disconnect " << i << ": " << opened.to_string();
  }
}

// Scans whose round the data node answered too late for the request timeout
// (held at the API's link, as from a stalled node), at open or after, and
// then closed: close() closes them at the node all the same, so their
// records there (TC's, each partition's at its LDM) come back without a
// disconnect, and the answers that come late, before or after close()
// returned, are dropped. Before, close() sent nothing after a failure: after
// MaxNoOfConcurrentScans such scans none opened until the connection closed.
TEST_F(DataApiTest, ScansThatTimedOutAndWereClosedGiveTheirRecordsBack) {
  ClusterOptions options;
  options.extra_ndbd = "MaxNoOfConcurrentScans=2\n";
  start(options);
  ASSERT_TRUE(run([&](api::Transaction& tx) {
    for (uint64_t id = 0; id < 100; ++id) tx.insert(*table_, account(id, static_cast<int64_t>(id)));
  }));
  std::atomic<bool> held{false};
  transport::TransporterRegistry registry;
  ASSERT_TRUE(registry.add(std::make_unique<HeldTcpFactory>(held)));
  api::ConnectOptions impatient = options_for(51);
  impatient.registry = &registry;
  impatient.request_timeout_ms = 200;
  auto connected = api::Connection::connect(impatient);
  ASSERT_TRUE(connected) << connected.status().to_string();
  api::Connection& other = **connected;
  auto table = other.get_table("accounts");
  ASSERT_TRUE(table) << table.status().to_string();
  api::ScanSpec spec;
  spec.table = *table;
  spec.batch_rows = 2;
  api::RowView row;
  for (int i = 0; i < 6; ++i) {
    SCOPED_TRACE("scan " + std::to_string(i));
    if (i % 3 == 0) {
      // The first round is late: scan() gives up, and closes the scan itself.
      held = true;
      auto scan = other.scan(spec);
      ASSERT_FALSE(scan);
      EXPECT_EQ(scan.status().code(), StatusCode::kTimeout) << scan.status().to_string();
      held = false;
      continue;
    }
    auto scan = other.scan(spec);
    ASSERT_TRUE(scan) << scan.status().to_string();
    ASSERT_TRUE((*scan)->next(row)) << (*scan)->status().to_string();
    held = true;  // a later round is late
    while ((*scan)->next(row)) {
    }
    EXPECT_EQ((*scan)->status().code(), StatusCode::kTimeout) << (*scan)->status().to_string();
    // Even: closed while still held (close() too gives up; everything for
    // the scan comes after it). Odd: released first, so that the late round
    // comes while close() waits for its own answer.
    if (i % 2 == 1) held = false;
    (*scan)->close();
    held = false;
  }
  // The records came back: the limit's worth of scans open at once on this
  // connection, and read to the end, the late answers dropped on the way.
  api::Scan* open[2] = {};
  for (api::Scan*& scan : open) {
    auto opened = other.scan(spec);
    ASSERT_TRUE(opened) << opened.status().to_string();
    scan = *opened;
  }
  for (api::Scan* scan : open) {
    std::set<uint64_t> seen;
    while (scan->next(row)) EXPECT_TRUE(seen.insert(row.value(kId).as_uint64()).second);
    EXPECT_TRUE(scan->status()) << scan->status().to_string();
    EXPECT_EQ(seen.size(), 100u);
    scan->close();
  }
  EXPECT_EQ(balance_of(7), 7) << "the other connection goes on too";
}

TEST_F(DataApiTest, ScansWhileRowsAreInsertedAndDeleted) {
  for (uint64_t base = 0; base < 1000; base += 100)
    ASSERT_TRUE(run([&](api::Transaction& tx) {
      for (uint64_t id = base; id < base + 100; ++id) tx.insert(*table_, account(id, 1));
    }));
  // Rows 0..499 stay for the whole scan; another connection deletes 500..999
  // and inserts 1000..1499 while it runs.
  auto writer_conn = cluster_->connect(51);
  ASSERT_TRUE(writer_conn);
  auto writer_table = (*writer_conn)->get_table("accounts");
  ASSERT_TRUE(writer_table);
  std::atomic<bool> stop{false};
  std::atomic<int> writes{0};
  std::thread writer([&] {
    for (uint64_t i = 0; i < 500 && !stop; ++i) {
      api::Transaction& tx = (*writer_conn)->start_transaction();
      tx.remove(**writer_table, key_of(500 + i));
      tx.insert(**writer_table, account(1000 + i, 1));
      if (tx.execute(ExecType::kCommit)) ++writes;
      tx.close();
    }
  });
  api::ScanSpec spec;
  spec.table = table_;
  spec.batch_rows = 5;
  auto scan = conn_->scan(spec);
  ASSERT_TRUE(scan) << scan.status().to_string();
  std::set<uint64_t> seen;
  api::RowView row;
  bool paused = false;
  while ((*scan)->next(row)) {
    const uint64_t id = row.value(kId).as_uint64();
    EXPECT_TRUE(seen.insert(id).second) << "row " << id << " returned twice";
    if (!paused) {
      // Make the interleaving certain: hold the scan after its first rows
      // until the writer has committed changes.
      paused = true;
      const uint64_t until = monotonic_ns() + 30'000'000'000ULL;
      while (writes.load() < 100 && monotonic_ns() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ASSERT_GE(writes.load(), 100) << "the writer made no progress while the scan was open";
    }
  }
  EXPECT_TRUE((*scan)->status()) << (*scan)->status().to_string();
  stop = true;
  writer.join();
  for (uint64_t id = 0; id < 500; ++id) EXPECT_TRUE(seen.count(id)) << "row " << id << " present throughout was missed";
}

TEST_F(DataApiTest, ConcurrentIncrementsLoseNoUpdate) {
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(7, 0)); }));
  constexpr int kThreads = 4, kIncrements = 150;
  std::atomic<int> committed{0}, retried{0};
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      auto c = cluster_->connect(static_cast<NodeId>(51 + t));
      ASSERT_TRUE(c) << c.status().to_string();
      auto table = (*c)->get_table("accounts");
      ASSERT_TRUE(table);
      for (int i = 0; i < kIncrements;) {
        api::Transaction& tx = (*c)->start_transaction();
        api::Operation& read = tx.read(**table, key_of(7), {}, LockMode::kExclusive);
        Status s = tx.execute(ExecType::kNoCommit);
        if (s) {
          const int64_t v = read.value(kBalance).as_int64();
          tx.update(**table, key_of(7), Row().set(kBalance, v + 1));
          s = tx.execute(ExecType::kCommit);
        }
        tx.close();
        if (s) {
          ++i;
          ++committed;
        } else {
          ++retried;  // a lock wait that timed out: try again
        }
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(committed.load(), kThreads * kIncrements);
  EXPECT_EQ(balance_of(7), kThreads * kIncrements) << retried.load() << " retries";
}

TEST_F(DataApiTest, DeadlockIsBrokenByTheTimeout) {
  ASSERT_TRUE(run([&](api::Transaction& tx) {
    tx.insert(*table_, account(1, 1));
    tx.insert(*table_, account(2, 2));
  }));
  auto other = cluster_->connect(51);
  ASSERT_TRUE(other);
  auto t2 = (*other)->get_table("accounts");
  api::Transaction& a = conn_->start_transaction();
  api::Transaction& b = (*other)->start_transaction();
  a.update(*table_, key_of(1), Row().set(kBalance, int64_t{10}));
  b.update(**t2, key_of(2), Row().set(kBalance, int64_t{20}));
  ASSERT_TRUE(a.execute(ExecType::kNoCommit));
  ASSERT_TRUE(b.execute(ExecType::kNoCommit));
  // Each now wants the other's row.
  a.update(*table_, key_of(2), Row().set(kBalance, int64_t{11}));
  b.update(**t2, key_of(1), Row().set(kBalance, int64_t{21}));
  Status sa, sb;
  std::thread tb([&] { sb = b.execute(ExecType::kCommit); });
  sa = a.execute(ExecType::kCommit);
  tb.join();
  const bool a_lost = sa.message().rfind("266:", 0) == 0;
  const bool b_lost = sb.message().rfind("266:", 0) == 0;
  EXPECT_TRUE(a_lost || b_lost) << sa.message() << " / " << sb.message();
  EXPECT_TRUE(a_lost != b_lost) << "exactly one transaction is the victim; the other commits: " << sa.message() << " / "
                                << sb.message();
  a.close();
  b.close();
  // Whoever won committed both of its updates; nothing is left locked.
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.update(*table_, key_of(1), Row().set(kBalance, int64_t{0})); }));
}

// A transaction whose answer does not come within the request timeout (it
// waits for a lock longer than that) is given up: execute() says so, and
// close() rolls it back at the node, so it neither commits afterwards,
// when the program believes it failed, nor stays counted in flight.
TEST_F(DataApiTest, AClosedTransactionThatTimedOutIsRolledBackNotCommittedLater) {
  ClusterOptions options;
  options.deadlock_timeout_ms = 60000;
  start(options);
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(1, 1)); }));
  api::Transaction& holder = conn_->start_transaction();
  holder.update(*table_, key_of(1), Row().set(kBalance, int64_t{5}));
  ASSERT_TRUE(holder.execute(ExecType::kNoCommit));
  api::ConnectOptions impatient = options_for(51);
  impatient.request_timeout_ms = 300;
  auto other = api::Connection::connect(impatient);
  ASSERT_TRUE(other) << other.status().to_string();
  auto t2 = (*other)->get_table("accounts");
  ASSERT_TRUE(t2);
  api::Transaction& waiter = (*other)->start_transaction();
  waiter.update(**t2, key_of(1), Row().set(kBalance, int64_t{9}));
  EXPECT_EQ(waiter.execute(ExecType::kCommit).code(), StatusCode::kTimeout);
  waiter.close();
  EXPECT_EQ((*other)->in_flight(), 0);
  ASSERT_TRUE(holder.execute(ExecType::kCommit));
  holder.close();
  // An exclusive read queues behind any lock request still waiting.
  EXPECT_EQ(balance_of(1, LockMode::kExclusive), 5) << "the transaction given up committed afterwards";
}

// A program that holds ConnectOptions.max_transactions open and starts one
// more gets a transaction that says why it cannot run, not an end to the
// program; nothing of it reaches the node, and closing any transaction
// makes room again.
TEST_F(DataApiTest, ATransactionBeyondMaxTransactionsIsRefusedWithItsReasonAndTheProgramGoesOn) {
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(1, 10)); }));
  api::ConnectOptions two = options_for(51);
  two.max_transactions = 2;
  auto c = api::Connection::connect(two);
  ASSERT_TRUE(c) << c.status().to_string();
  api::Connection& conn = **c;
  auto t = conn.get_table("accounts");
  ASSERT_TRUE(t);
  api::Transaction& a = conn.start_transaction();
  api::Transaction& b = conn.start_transaction();
  a.update(**t, key_of(1), Row().set(kBalance, int64_t{11}));
  ASSERT_TRUE(a.execute(ExecType::kNoCommit));  // holds its row lock: must survive what follows

  api::Transaction& refused = conn.start_transaction();
  EXPECT_NE(&refused, &a);
  EXPECT_NE(&refused, &b);
  EXPECT_TRUE(refused.finished());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("max_transactions"), std::string::npos) << refused.status().to_string();
  EXPECT_NE(refused.status().message().find('2'), std::string::npos) << refused.status().to_string();
  refused.insert(**t, account(2, 20));  // taken, never sent
  const Status sent = refused.execute(ExecType::kCommit);
  EXPECT_EQ(sent.code(), StatusCode::kResourceExhausted) << sent.to_string();
  bool called = false;
  EXPECT_FALSE(refused.execute_async(ExecType::kCommit, [&](api::Transaction&, const Status&) { called = true; }));
  EXPECT_EQ(conn.in_flight(), 0);
  // Two refused at once are two transactions, each closed on its own.
  api::Transaction& refused_too = conn.start_transaction();
  EXPECT_NE(&refused_too, &refused);
  EXPECT_EQ(refused_too.status().code(), StatusCode::kResourceExhausted);
  refused.close();
  refused_too.close();
  EXPECT_EQ(conn.poll(0, 0), 0);
  EXPECT_FALSE(called);

  // The accepted transactions are untouched; closing one makes room.
  ASSERT_TRUE(a.execute(ExecType::kCommit));
  a.close();
  api::Transaction& c3 = conn.start_transaction();
  EXPECT_FALSE(c3.finished()) << c3.status().to_string();
  api::Operation& read = c3.read(**t, key_of(1));
  ASSERT_TRUE(c3.execute(ExecType::kCommit)) << c3.status().to_string();
  EXPECT_EQ(read.value(kBalance).as_int64(), 11);
  c3.close();
  b.close();
  EXPECT_EQ(balance_of(2), std::nullopt) << "a refused transaction's insert reached the node";

  two.max_transactions = 0;
  auto none = api::Connection::connect(two);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("max_transactions is 0, expected 1..65536"), std::string::npos)
      << none.status().to_string();
}

TEST_F(DataApiTest, InactiveTransactionsAreAbortedAndReleaseTheirLocks) {
  ClusterOptions options;
  options.inactive_timeout_ms = 300;
  start(options);
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(1, 1)); }));
  api::Transaction& idle = conn_->start_transaction();
  idle.update(*table_, key_of(1), Row().set(kBalance, int64_t{5}));
  ASSERT_TRUE(idle.execute(ExecType::kNoCommit));
  std::this_thread::sleep_for(std::chrono::milliseconds(900));
  conn_->poll(0, 0);  // deliver the abort report
  auto other = cluster_->connect(51);
  auto t2 = (*other)->get_table("accounts");
  api::Transaction& tx = (*other)->start_transaction();
  tx.update(**t2, key_of(1), Row().set(kBalance, int64_t{7}));
  EXPECT_TRUE(tx.execute(ExecType::kCommit)) << "the idle transaction's lock was not released";
  tx.close();
  EXPECT_EQ(idle.execute(ExecType::kCommit).message().substr(0, 4), "237:");
  idle.close();
}

// The node may abort a transaction between two of its batches (here for
// inactivity; the report arrives in whatever poll comes next, perhaps one
// for other transactions). A program cannot know before it defines the next
// operations, so defining them is allowed, and execute() says what happened.
TEST_F(DataApiTest, OperationsDefinedAfterTheNodeAbortedTheTransactionFailAtExecute) {
  ClusterOptions options;
  options.inactive_timeout_ms = 300;
  start(options);
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(1, 1)); }));
  api::Transaction& idle = conn_->start_transaction();
  idle.update(*table_, key_of(1), Row().set(kBalance, int64_t{5}));
  ASSERT_TRUE(idle.execute(ExecType::kNoCommit));
  const uint64_t until = monotonic_ns() + 10'000'000'000ULL;
  while (!idle.finished() && monotonic_ns() < until) conn_->poll(10, 0);  // the abort report arrives
  ASSERT_TRUE(idle.finished()) << "no abort report within 10 s";
  idle.update(*table_, key_of(1), Row().set(kBalance, int64_t{6}));
  EXPECT_EQ(idle.execute(ExecType::kCommit).message().substr(0, 4), "237:");
  EXPECT_EQ(idle.error(), ErrorCode::kInactiveTimeout);
  idle.close();
  EXPECT_EQ(balance_of(1), 1);
}

TEST_F(DataApiTest, DataMemoryFullFailsInsertsClearlyAndBreaksNothingElse) {
  ClusterOptions options;
  options.data_memory = "2M";
  start(options);
  uint64_t inserted = 0;
  Status last;
  for (uint64_t batch = 0; batch < 2000 && last.is_ok(); ++batch) {
    last = run([&](api::Transaction& tx) {
      for (uint64_t i = 0; i < 20; ++i) tx.insert(*table_, account(batch * 20 + i, 1, std::string(30, 'n')));
    });
    if (last) inserted += 20;
  }
  ASSERT_FALSE(last.is_ok()) << "2M of DataMemory never filled";
  EXPECT_EQ(last.message().substr(0, 4), "827:") << last.message();
  EXPECT_GT(inserted, 100u);
  // Existing rows are intact and readable; updates in place work.
  EXPECT_EQ(balance_of(0), 1);
  EXPECT_EQ(balance_of(inserted - 1), 1);
  // Deleting makes room again.
  ASSERT_TRUE(run([&](api::Transaction& tx) {
    for (uint64_t i = 0; i < 20; ++i) tx.remove(*table_, key_of(i));
  }));
  EXPECT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(5, 5)); }));
}

TEST_F(DataApiTest, AsynchronousTransactionsInFlightFromOneThread) {
  constexpr int kTransactions = 300;
  std::atomic<int> done{0}, failed{0};
  for (int i = 0; i < kTransactions; ++i) {
    api::Transaction& tx = conn_->start_transaction();
    tx.insert(*table_, account(static_cast<uint64_t>(i), i));
    ASSERT_TRUE(tx.execute_async(ExecType::kCommit, [&](api::Transaction& t, const Status& s) {
      s.is_ok() ? ++done : ++failed;
      t.close();
    }));
    if (conn_->in_flight() >= 64) conn_->poll(5000, 1);
  }
  while (conn_->in_flight() > 0) ASSERT_GT(conn_->poll(5000, 1), 0);
  EXPECT_EQ(done.load(), kTransactions);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(balance_of(299), 299);
}

// Closing a transaction whose asynchronous execute is still in flight
// waits for its answer (so nothing arrives for a recycled handle) but does
// not run its callback: the program has let the transaction go, and a
// callback that closes it too would free its slot a second time.
TEST_F(DataApiTest, ClosingAnAsynchronousTransactionInFlightRunsNoCallback) {
  int callbacks = 0;
  api::Transaction& tx = conn_->start_transaction();
  tx.insert(*table_, account(1, 1));
  ASSERT_TRUE(tx.execute_async(ExecType::kCommit, [&](api::Transaction& t, const Status&) {
    ++callbacks;
    t.close();
  }));
  tx.close();
  EXPECT_EQ(callbacks, 0);
  EXPECT_EQ(conn_->in_flight(), 0);
  api::Transaction& a = conn_->start_transaction();
  api::Transaction& b = conn_->start_transaction();
  EXPECT_NE(&a, &b) << "one transaction slot was freed twice";
  a.close();
  b.close();
  EXPECT_EQ(balance_of(1), 1) << "the commit in flight was lost";
}

// fjord-stats's path: the node's control socket answers each command, and
// names what was wrong with a bad one.
TEST_F(DataApiTest, TheControlSocketAnswersEveryCommandAndNamesABadOne) {
  const std::string socket = cluster_->node().control_socket();
  const auto ask = [&](const std::string& command) {
    auto reply = engine::control_request(socket, command, 5000);
    EXPECT_TRUE(reply) << command << ": " << reply.status().to_string();
    return reply ? *reply : std::string();
  };
  EXPECT_EQ(ask("ping"), "pong 1\n");
  EXPECT_NE(ask("stats").find("node 1 thread "), std::string::npos);
  const std::string json = ask("stats json");
  EXPECT_EQ(json.front(), '{');
  EXPECT_NE(json.find("\"threads\""), std::string::npos) << json;
  EXPECT_NE(ask("layout").find("thread layout"), std::string::npos);
  EXPECT_EQ(ask("log-stats 0"), "statistics logging off\n");
  EXPECT_EQ(ask("log-stats 3"), "statistics logged every 3 s\n");
  EXPECT_EQ(ask("log-stats 0"), "statistics logging off\n");
  for (const char* bad : {"log-stats", "log-stats -1", "log-stats 86401", "log-stats 5x"})
    EXPECT_EQ(ask(bad).rfind("error: log-stats takes seconds in 0..86400, got '", 0), 0u) << bad;
  EXPECT_EQ(ask("statz").rfind("error: unknown command 'statz'; commands: ", 0), 0u);
  // A stats request with an argument it does not know says what it takes.
  EXPECT_EQ(ask("stats xml"), "error: stats takes nothing or 'json', got 'xml'\n");
  EXPECT_EQ(ask("stats json tc"), "error: stats takes nothing or 'json', got 'json tc'\n");
  EXPECT_EQ(ask("stats "), "error: stats takes nothing or 'json', got ''\n");
  // A socket name no Unix address holds: said so, not cut short.
  auto too_long = engine::control_request("@" + std::string(200, 'n'), "ping", 1000);
  ASSERT_FALSE(too_long);
  EXPECT_NE(too_long.status().message().find("is empty or longer than 107 bytes"), std::string::npos)
      << too_long.status().to_string();
  // Longer than a command can be: refused by its length, not read forever.
  EXPECT_EQ(ask(std::string(300, 'x')), "error: a command is one line of at most 255 bytes\n");
  // Once the node has stopped, a control client is refused at once, not
  // left to its timeout.
  cluster_->node().stop();
  const uint64_t asked = monotonic_ns();
  auto after_stop = engine::control_request(socket, "ping", 5000);
  EXPECT_FALSE(after_stop) << "a stopped node answered: " << *after_stop;
  EXPECT_LT(monotonic_ns() - asked, 1'000'000'000ULL) << after_stop.status().to_string();
}

// One row of a block table in `stats` text: the line labelled `label`
// ("ldm 0", "tc 0", "total") under "node 1 <title>:", as heading -> cell.
std::map<std::string, std::string> stats_row(const std::string& stats, const std::string& title,
                                             const std::string& label) {
  std::map<std::string, std::string> out;
  const std::size_t at = stats.find("node 1 " + title + ":\n");
  if (at == std::string::npos) {
    ADD_FAILURE() << "no table '" << title << "' in\n" << stats;
    return out;
  }
  std::istringstream lines(stats.substr(stats.find('\n', at) + 1));
  std::string heading;
  std::getline(lines, heading);
  std::istringstream heads(heading);
  std::vector<std::string> names;
  for (std::string h; heads >> h;)
    if (h != "instance") names.push_back(h);
  for (std::string line; std::getline(lines, line) && line.rfind("  ", 0) == 0;) {
    std::istringstream cells(line);
    std::string first, row_label;
    cells >> first;
    row_label = first;
    if (first != "total") {
      std::string number;
      cells >> number;
      row_label += " " + number;
    }
    if (row_label != label) continue;
    for (const std::string& name : names) cells >> out[name];
    return out;
  }
  ADD_FAILURE() << "no row '" << label << "' in table '" << title << "' of\n" << stats;
  return out;
}

// The number after "field": in `json`, after the first `anchor`.
uint64_t json_number(const std::string& json, const std::string& anchor, const std::string& field) {
  const std::size_t from = json.find(anchor);
  const std::size_t at = from == std::string::npos ? from : json.find("\"" + field + "\":", from);
  if (at == std::string::npos) {
    ADD_FAILURE() << "no " << field << " after " << anchor << " in " << json;
    return UINT64_MAX;
  }
  return std::stoull(json.substr(at + field.size() + 3));
}

// What one LDM instance should count, by the ids of the rows it owns.
struct LdmExpected {
  uint64_t key_ops = 0, reads = 0, inserts = 0, updates = 0, lock_waits = 0, commits = 0, aborts = 0;
  uint64_t scans = 0, scan_rows = 0, committed_rows = 0;
};

// The rows the block counters of the stats text hold to: the key
// operations table's, the scans table's and the records table's.
void expect_ldm_row(const std::string& stats, const std::string& label, const LdmExpected& e) {
  const auto n = [](uint64_t v) { return std::to_string(v); };
  const std::map<std::string, std::string> key = stats_row(stats, "LDM key operations", label);
  EXPECT_EQ(key, (std::map<std::string, std::string>{{"key_ops", n(e.key_ops)},
                                                     {"reads", n(e.reads)},
                                                     {"inserts", n(e.inserts)},
                                                     {"updates", n(e.updates)},
                                                     {"deletes", "0"},
                                                     {"refused", "0"},
                                                     {"lock_waits", n(e.lock_waits)},
                                                     {"commits", n(e.commits)},
                                                     {"aborts", n(e.aborts)},
                                                     {"out_of_memory", "0"}}))
      << label << " in\n"
      << stats;
  std::map<std::string, std::string> scan = stats_row(stats, "LDM scans and lookups", label);
  EXPECT_EQ(scan["scans"], n(e.scans)) << label;
  EXPECT_EQ(scan["scan_rows"], n(e.scan_rows)) << label;
  // Every partition answers its rows in one round (a batch holds them all).
  EXPECT_EQ(scan["scan_rounds"], n(e.scans)) << label;
  // Every key operation and read looked its key up in the hash index.
  EXPECT_EQ(std::stoull(scan["lookahead_hits"]) + std::stoull(scan["index_searches"]), e.key_ops) << label;
  std::map<std::string, std::string> records = stats_row(stats, "LDM records in use", label);
  EXPECT_EQ(records, (std::map<std::string, std::string>{{"committed_rows", n(e.committed_rows)},
                                                         {"operation_records", "0"},
                                                         {"lock_records", "0"},
                                                         {"parked", "0"},
                                                         {"scans_open", "0"}}))
      << label;
}

// The blocks' own counters, as an operator reads them from a running node:
// after known operations (inserts, reads, a rollback, a deadlock victim, a
// scan) each LDM instance and the TC show exactly those, in `stats` and in
// `stats json`, and the totals are the sums.
TEST_F(DataApiTest, TheControlSocketShowsEachBlocksCounters) {
  ClusterOptions options;
  options.single_threaded = false;  // TC apart from the LDMs: every key operation an LqhKeyReq
  options.thread_config = "ldm={count=2},tc={count=1},recv={count=1}";
  start(options);
  engine::TableDef def;
  def.name = "counted";
  def.columns = {{"id", ColumnType::kUint64, 0, false}, {"v", ColumnType::kInt64, 0, false}};
  def.primary_key = {0};
  auto created = conn_->create_table(def);
  ASSERT_TRUE(created) << created.status().to_string();
  const engine::TableDef& t = **created;
  const engine::KeyCodec codec = engine::KeyCodec::for_primary_key(t);
  auto ldm_of = [&](uint64_t id) {
    std::byte key[engine::kMaxKeyBytes];
    const engine::ValueRef value = engine::ValueRef::of(id);
    auto n = codec.encode({&value, 1}, key);
    EXPECT_TRUE(n);
    return engine::partition_of(engine::hash_key(key, *n), t.partitions) % 2;
  };
  const auto row = [](uint64_t id, int64_t v) { return Row().set(0, id).set(1, v); };
  LdmExpected ldm[2];
  // Six inserts in one transaction.
  constexpr uint64_t kRows = 6;
  ASSERT_TRUE(run([&](api::Transaction& tx) {
    for (uint64_t id = 1; id <= kRows; ++id) tx.insert(t, row(id, 0));
  }));
  bool touched[2] = {false, false};
  for (uint64_t id = 1; id <= kRows; ++id) {
    LdmExpected& e = ldm[ldm_of(id)];
    ++e.key_ops, ++e.inserts, ++e.committed_rows, ++e.scan_rows;
    touched[ldm_of(id)] = true;
  }
  for (int i = 0; i < 2; ++i) ldm[i].commits += touched[i] ? 1 : 0;
  // Four reads, a transaction each (read-committed: nothing to commit in LDM).
  constexpr uint64_t kReads = 4;
  for (uint64_t id = 1; id <= kReads; ++id) {
    api::Transaction& tx = conn_->start_transaction();
    api::Operation& read = tx.read(t, Row().set(0, id));
    ASSERT_TRUE(tx.execute(ExecType::kCommit));
    EXPECT_EQ(read.value(0).as_uint64(), id);
    tx.close();
    ++ldm[ldm_of(id)].key_ops, ++ldm[ldm_of(id)].reads;
  }
  // A transaction rolled back after its insert ran.
  {
    api::Transaction& tx = conn_->start_transaction();
    tx.insert(t, row(100, 0));
    ASSERT_TRUE(tx.execute(ExecType::kNoCommit));
    ASSERT_TRUE(tx.execute(ExecType::kRollback));
    tx.close();
    ++ldm[ldm_of(100)].key_ops, ++ldm[ldm_of(100)].inserts, ++ldm[ldm_of(100)].aborts;
  }
  // A deadlock victim: b waits for a's lock on row 1 until TC's timeout
  // (400 ms here) aborts it with 266; then a commits.
  {
    auto other = cluster_->connect(51);
    ASSERT_TRUE(other) << other.status().to_string();
    auto other_t = (*other)->get_table("counted");
    ASSERT_TRUE(other_t);
    api::Transaction& a = conn_->start_transaction();
    a.update(t, Row().set(0, uint64_t{1}), Row().set(1, int64_t{1}));
    ASSERT_TRUE(a.execute(ExecType::kNoCommit));
    api::Transaction& b = (*other)->start_transaction();
    b.update(**other_t, Row().set(0, uint64_t{1}), Row().set(1, int64_t{2}));
    EXPECT_EQ(b.execute(ExecType::kCommit).message().rfind("266:", 0), 0u);
    b.close();
    ASSERT_TRUE(a.execute(ExecType::kCommit));
    a.close();
    LdmExpected& e = ldm[ldm_of(1)];
    e.key_ops += 2, ++e.updates, ++e.lock_waits, ++e.aborts, ++e.commits;
  }
  // A full scan: one fragment scan per partition, half the partitions each.
  {
    api::ScanSpec spec;
    spec.table = &t;
    auto scan = conn_->scan(spec);
    ASSERT_TRUE(scan) << scan.status().to_string();
    api::RowView r;
    uint64_t rows = 0;
    while ((*scan)->next(r)) ++rows;
    EXPECT_TRUE((*scan)->status()) << (*scan)->status().to_string();
    (*scan)->close();
    EXPECT_EQ(rows, kRows);
    for (LdmExpected& e : ldm) e.scans = t.partitions / 2;
  }

  const std::string socket = cluster_->node().control_socket();
  auto text = engine::control_request(socket, "stats", 5000);
  ASSERT_TRUE(text) << text.status().to_string();
  const std::string& stats = *text;
  LdmExpected total;
  for (const LdmExpected& e : ldm) {
    total.key_ops += e.key_ops, total.reads += e.reads, total.inserts += e.inserts, total.updates += e.updates;
    total.lock_waits += e.lock_waits, total.commits += e.commits, total.aborts += e.aborts;
    total.scans += e.scans, total.scan_rows += e.scan_rows, total.committed_rows += e.committed_rows;
  }
  expect_ldm_row(stats, "ldm 0", ldm[0]);
  expect_ldm_row(stats, "ldm 1", ldm[1]);
  expect_ldm_row(stats, "total", total);
  // Six rows in eight rounds (one per partition): 0.75, shown with one decimal.
  ASSERT_EQ(t.partitions, 8u);
  EXPECT_EQ(stats_row(stats, "LDM scans and lookups", "total")["rows_per_round"], "0.8");
  // TC: the insert transaction, the reads and a's update committed; the
  // rollback and the deadlock victim aborted.
  const std::map<std::string, std::string> tc = {{"committed", std::to_string(1 + kReads + 1)},
                                                 {"aborted", "2"},
                                                 {"deadlock_aborts", "1"},
                                                 {"inactive_aborts", "0"},
                                                 {"drop_aborts", "0"},
                                                 {"operations", std::to_string(kRows + kReads + 1 + 2)},
                                                 {"scans", "1"},
                                                 {"refused", "0"}};
  EXPECT_EQ(stats_row(stats, "TC transactions", "tc 0"), tc) << stats;
  EXPECT_EQ(stats_row(stats, "TC transactions", "total"), tc) << stats;

  // The same numbers, under the structs' field names, in `stats json`.
  auto json = engine::control_request(socket, "stats json", 5000);
  ASSERT_TRUE(json) << json.status().to_string();
  for (int i = 0; i < 2; ++i) {
    const std::string anchor = "{\"instance\":" + std::to_string(i) + ",\"key_operations\"";
    EXPECT_EQ(json_number(*json, anchor, "key_operations"), ldm[i].key_ops);
    EXPECT_EQ(json_number(*json, anchor, "reads"), ldm[i].reads);
    EXPECT_EQ(json_number(*json, anchor, "inserts"), ldm[i].inserts);
    EXPECT_EQ(json_number(*json, anchor, "lock_waits"), ldm[i].lock_waits);
    EXPECT_EQ(json_number(*json, anchor, "scan_rows"), ldm[i].scan_rows);
    EXPECT_EQ(json_number(*json, anchor, "committed_rows"), ldm[i].committed_rows);
  }
  EXPECT_EQ(json_number(*json, "\"ldm_total\":", "aborts"), total.aborts);
  EXPECT_EQ(json_number(*json, "\"ldm_total\":", "scans"), total.scans);
  EXPECT_EQ(json_number(*json, "\"tc\":[{\"instance\":0", "transactions_committed"), 1 + kReads + 1);
  EXPECT_EQ(json_number(*json, "\"tc\":[{\"instance\":0", "deadlock_aborts"), 1u);
  EXPECT_EQ(json_number(*json, "\"tc_total\":", "transactions_aborted"), 2u);
  EXPECT_EQ(json_number(*json, "\"tc_total\":", "operations"), kRows + kReads + 1 + 2);
  EXPECT_EQ(json->back(), '\n');
  EXPECT_EQ(json->at(json->size() - 2), '}') << *json;

  // fjord-stats shows what the control socket does: the block tables (the
  // end of the text, which stands still while nothing runs) and the JSON's.
  const char* tool = std::getenv("FJORD_STATS_TOOL");
  if (tool == nullptr) GTEST_SKIP() << "FJORD_STATS_TOOL is not set (meson test sets it): fjord-stats not run";
  const auto run_tool = [&](const std::string& args) {
    std::string out;
    FILE* p = ::popen((std::string(tool) + " --socket " + socket + " " + args).c_str(), "r");
    EXPECT_NE(p, nullptr);
    if (p == nullptr) return out;
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    EXPECT_EQ(::pclose(p), 0) << args;
    return out;
  };
  const auto blocks = [](const std::string& s) {
    const std::size_t at = s.find("node 1 LDM key operations:");
    return at == std::string::npos ? std::string("(none)") : s.substr(at);
  };
  EXPECT_EQ(blocks(run_tool("")), blocks(stats));
  const auto json_blocks = [](const std::string& s) {
    const std::size_t at = s.find(",\"ldm\":[");
    return at == std::string::npos ? std::string("(none)") : s.substr(at);
  };
  EXPECT_EQ(json_blocks(run_tool("--json")), json_blocks(*json));
}

namespace {
// A raw connection to a control socket.
UniqueFd control_connection(const std::string& name) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr;
  const socklen_t len = unix_address(name, addr);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), len), 0) << std::strerror(errno);
  return fd;
}
std::string read_all(int fd) {
  std::string out;
  char buf[512];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  return out;
}
}  // namespace

// Clients that connect and say nothing, or send their line in pieces, hold
// up neither other control requests nor API nodes connecting meanwhile;
// the silent ones are closed after their 2 s.
TEST_F(DataApiTest, ASilentOrSlowControlClientHoldsUpNothing) {
  const std::string socket = cluster_->node().control_socket();
  ASSERT_EQ(socket[0], '@');
  std::vector<UniqueFd> silent;
  for (int i = 0; i < 3; ++i) silent.push_back(control_connection(socket));
  const uint64_t t0 = monotonic_ns();
  auto pong = engine::control_request(socket, "ping", 1500);
  ASSERT_TRUE(pong) << pong.status().to_string();
  EXPECT_EQ(*pong, "pong 1\n");
  auto other = cluster_->connect(51);
  ASSERT_TRUE(other) << other.status().to_string();
  EXPECT_LT(monotonic_ns() - t0, 1'500'000'000ULL) << "the silent clients held the connection thread";

  UniqueFd slow = control_connection(socket);
  ASSERT_EQ(::send(slow.get(), "pi", 2, MSG_NOSIGNAL), 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(::send(slow.get(), "ng\n", 3, MSG_NOSIGNAL), 3);
  EXPECT_EQ(read_all(slow.get()), "pong 1\n");
  // A line without its newline counts once the client closes its side.
  UniqueFd half = control_connection(socket);
  ASSERT_EQ(::send(half.get(), "ping", 4, MSG_NOSIGNAL), 4);
  ::shutdown(half.get(), SHUT_WR);
  EXPECT_EQ(read_all(half.get()), "pong 1\n");

  // The silent ones: closed by the node, with nothing said.
  for (UniqueFd& fd : silent) EXPECT_EQ(read_all(fd.get()), "");
  EXPECT_GE(monotonic_ns() - t0, 1'900'000'000ULL);
  EXPECT_EQ(*engine::control_request(socket, "ping", 1500), "pong 1\n");
}

// A peer that connects to the node's TCP port and says nothing (a port
// scan, a stuck process) holds up neither API nodes connecting nor the
// control socket.
TEST_F(DataApiTest, ASilentPeerOnTheNodesPortHoldsUpNoConnection) {
  std::vector<UniqueFd> silent;
  for (int i = 0; i < 3; ++i) silent.push_back(connect_to_node_port());
  ASSERT_FALSE(HasFailure());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the node has taken them
  const uint64_t t0 = monotonic_ns();
  auto other = cluster_->connect(51);
  ASSERT_TRUE(other) << other.status().to_string();
  auto pong = engine::control_request(cluster_->node().control_socket(), "ping", 2000);
  ASSERT_TRUE(pong) << pong.status().to_string();
  EXPECT_EQ(*pong, "pong 1\n");
  EXPECT_LT(monotonic_ns() - t0, 3'000'000'000ULL) << "the silent peers held up the connection thread";
  auto& tx = (*other)->start_transaction();
  tx.read(*table_, key_of(424242));
  EXPECT_EQ(tx.execute(ExecType::kCommit).code(), StatusCode::kRejected);
  EXPECT_EQ(tx.error(), ErrorCode::kNoSuchRow);  // the new link works
  tx.close();
}

// A silent peer is closed once its set-up budget (10 s) has passed even if
// nothing else ever connects: the listener is looked at once a second, not
// only when its fd wakes the node (each such peer holds a descriptor).
TEST_F(DataApiTest, ASilentPeerOnAnIdleListenerIsClosedAfterItsSetUpBudget) {
  const uint64_t t0 = monotonic_ns();
  const UniqueFd fd = connect_to_node_port();
  ASSERT_FALSE(HasFailure());
  const timeval wait{transport::kSetupBudgetNs / 1'000'000'000 + 5, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  char byte;
  const ssize_t got = ::recv(fd.get(), &byte, 1, 0);
  EXPECT_TRUE(got == 0 || (got < 0 && errno == ECONNRESET))
      << "the node left the silent peer's connection open (" << std::strerror(errno) << ")";
  const uint64_t waited = monotonic_ns() - t0;
  EXPECT_GE(waited, transport::kSetupBudgetNs) << "closed before its budget";
  EXPECT_LT(waited, transport::kSetupBudgetNs + 3'000'000'000ULL);
  // The node serves as before.
  auto other = cluster_->connect(51);
  ASSERT_TRUE(other) << other.status().to_string();
  EXPECT_EQ(*engine::control_request(cluster_->node().control_socket(), "ping", 2000), "pong 1\n");
}

// More clients waiting for their command than the node keeps: the extra
// ones are told so, and the node goes on answering.
TEST_F(DataApiTest, TooManyWaitingControlClientsAreToldSo) {
  const std::string socket = cluster_->node().control_socket();
  std::vector<UniqueFd> waiting;
  for (int i = 0; i < 8; ++i) waiting.push_back(control_connection(socket));
  auto refused = engine::control_request(socket, "ping", 1500);
  ASSERT_TRUE(refused) << refused.status().to_string();
  EXPECT_EQ(refused->rfind("error: too many control connections", 0), 0u) << *refused;
  ASSERT_EQ(::send(waiting[0].get(), "ping\n", 5, MSG_NOSIGNAL), 5);
  EXPECT_EQ(read_all(waiting[0].get()), "pong 1\n");
  waiting.erase(waiting.begin());
  EXPECT_EQ(*engine::control_request(socket, "ping", 1500), "pong 1\n");
}

// Out of file descriptors, the node cannot accept a control client. It
// closes the client unserved (which hears so at once) rather than leave it
// queued: the socket would stay readable, and the connection thread would
// wake and fail on it in a loop until descriptors came back. Afterwards
// the node answers as before.
TEST_F(DataApiTest, OutOfDescriptorsAControlClientIsClosedNotLeftWaiting) {
  const std::string socket = cluster_->node().control_socket();
  UniqueFd client(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));  // made while descriptors last
  ASSERT_TRUE(client.valid());
  test::DescriptorsUsedUp used_up;
  sockaddr_un addr;
  const socklen_t len = unix_address(socket, addr);
  EXPECT_EQ(::connect(client.get(), reinterpret_cast<sockaddr*>(&addr), len), 0) << std::strerror(errno);
  (void)::send(client.get(), "ping\n", 5, MSG_NOSIGNAL);
  const timeval wait{2, 0};
  ::setsockopt(client.get(), SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  char byte;
  const ssize_t got = ::recv(client.get(), &byte, 1, 0);
  const int error = errno;
  used_up.release();
  EXPECT_TRUE(got == 0 || (got < 0 && error == ECONNRESET))
      << "the client was left waiting (" << std::strerror(error) << ")";
  auto pong = engine::control_request(socket, "ping", 2000);
  ASSERT_TRUE(pong) << pong.status().to_string();
  EXPECT_EQ(*pong, "pong 1\n");
}

TEST_F(DataApiTest, ADisconnectedApiNodesTransactionsAreAborted) {
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(1, 1)); }));
  {
    auto doomed = cluster_->connect(51);
    ASSERT_TRUE(doomed);
    auto t = (*doomed)->get_table("accounts");
    api::Transaction& tx = (*doomed)->start_transaction();
    tx.update(**t, key_of(1), Row().set(kBalance, int64_t{99}));
    ASSERT_TRUE(tx.execute(ExecType::kNoCommit));
    // The connection goes away holding the lock, without committing.
  }
  const uint64_t until = monotonic_ns() + 10'000'000'000ULL;
  Status s;
  do {
    s = run([&](api::Transaction& tx) { tx.update(*table_, key_of(1), Row().set(kBalance, int64_t{2})); });
  } while (!s && monotonic_ns() < until);
  EXPECT_TRUE(s) << s.message();
  EXPECT_EQ(balance_of(1), 2);
}

// A batch the API cannot send (a value too long for any frame) is refused
// at once, before anything of it is sent: nothing is left in flight for
// close() or poll() to wait for, and the transaction stays as it was, so
// closing it rolls back what an earlier batch locked.
TEST_F(DataApiTest, ABatchTooLargeToSendIsRefusedAtOnceAndLeavesNothingInFlight) {
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(1, 1)); }));
  api::Transaction& tx = conn_->start_transaction();
  tx.update(*table_, key_of(1), Row().set(kBalance, int64_t{5}));
  ASSERT_TRUE(tx.execute(ExecType::kNoCommit));
  tx.read(*table_, key_of(1));
  Row huge = account(2, 2);
  huge.set(kName, std::string(40000, 'x'));
  tx.insert(*table_, huge);
  const Status s = tx.execute(ExecType::kCommit);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("operation 2"), std::string::npos) << s.message();
  EXPECT_EQ(conn_->in_flight(), 0);
  const uint64_t t0 = monotonic_ns();
  tx.close();
  EXPECT_EQ(conn_->poll(10000, 1), 0);  // nothing in flight: returns at once
  EXPECT_LT(monotonic_ns() - t0, 5'000'000'000ULL) << "close() or poll() waited for an answer to nothing";
  // The lock the first batch took went with the rollback; row 2 never came.
  auto other = cluster_->connect(51);
  ASSERT_TRUE(other);
  auto t2 = (*other)->get_table("accounts");
  api::Transaction& next = (*other)->start_transaction();
  next.update(**t2, key_of(1), Row().set(kBalance, int64_t{7}));
  EXPECT_TRUE(next.execute(ExecType::kCommit));
  next.close();
  EXPECT_EQ(balance_of(1), 7);
  EXPECT_FALSE(balance_of(2).has_value());
}

// Once the data node is gone, a transaction executed on the dead connection
// fails at once, saying so (4025 and the link's reason), and is not left in
// flight: an asynchronous one's execute_async() returns the failure and its
// callback never runs, so closing it (here, or in its callback) frees its
// slot once.
TEST_F(DataApiTest, OnADeadConnectionExecuteFailsAtOnceNamingTheCause) {
  cluster_->node().stop();
  // The first execute finds the link down (sending, or waiting for its answer).
  api::Transaction& first = conn_->start_transaction();
  first.read(*table_, key_of(1));
  EXPECT_EQ(first.execute(ExecType::kCommit).code(), StatusCode::kLinkDown);
  first.close();
  api::Transaction& tx = conn_->start_transaction();
  tx.read(*table_, key_of(1));
  const Status s = tx.execute(ExecType::kCommit);
  EXPECT_EQ(s.code(), StatusCode::kLinkDown);
  EXPECT_EQ(s.message().rfind("4025: Node failure caused abort of transaction: ", 0), 0u) << s.message();
  EXPECT_EQ(tx.error(), ErrorCode::kNodeFailure);
  EXPECT_TRUE(tx.finished());
  EXPECT_EQ(conn_->in_flight(), 0);
  tx.close();

  int callbacks = 0;
  api::Transaction& async = conn_->start_transaction();
  async.read(*table_, key_of(1));
  const Status sent = async.execute_async(ExecType::kCommit, [&](api::Transaction& t, const Status&) {
    ++callbacks;
    t.close();
  });
  EXPECT_EQ(sent.code(), StatusCode::kLinkDown);
  EXPECT_EQ(sent.message().rfind("4025:", 0), 0u) << sent.message();
  EXPECT_EQ(conn_->in_flight(), 0);
  async.close();
  EXPECT_EQ(conn_->poll(100, 1), 0);
  EXPECT_EQ(callbacks, 0) << "the callback of a transaction execute_async() failed ran";
  api::Transaction& a = conn_->start_transaction();
  api::Transaction& b = conn_->start_transaction();
  EXPECT_NE(&a, &b) << "one transaction slot was freed twice";
  a.close();
  b.close();
}

// A program that closes its connection and at once connects again with the
// same API node id (a restart) gets in, though the data node may not yet
// have let the old link go; and a second connection while the first is
// still there is refused naming the likely cause, not reported as a
// registration that timed out.
TEST_F(DataApiTest, AnApiNodeIdIsFreeAgainOnceItsConnectionClosesAndTakenUntilThen) {
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(1, 1)); }));
  for (int round = 0; round < 30; ++round) {
    auto again = cluster_->connect(51);
    ASSERT_TRUE(again) << "round " << round << ": " << again.status().to_string();
    auto t = (*again)->get_table("accounts");
    ASSERT_TRUE(t) << t.status().to_string();
    api::Transaction& tx = (*again)->start_transaction();
    tx.update(**t, key_of(1), Row().set(kBalance, int64_t{round}));
    ASSERT_TRUE(tx.execute(ExecType::kNoCommit));  // goes away holding the lock
  }
  api::ConnectOptions twice = options_for(50);  // conn_'s id
  twice.connect_timeout_ms = 500;
  auto second = api::Connection::connect(twice);
  ASSERT_FALSE(second);
  EXPECT_NE(second.status().message().find("already connected"), std::string::npos) << second.status().to_string();
  EXPECT_NE(second.status().code(), StatusCode::kTimeout) << second.status().to_string();
  EXPECT_EQ(balance_of(1), 1) << "the locks of the closed connections were not released";
}

// An API node id that another live connection holds is refused once the
// node has dropped new links from it for a short grace (2 s), which covers
// a previous connection the node has yet to let go, instead of after the
// whole connect timeout; the id's holder goes on undisturbed.
TEST_F(DataApiTest, AnApiNodeIdHeldByALiveConnectionIsRefusedAfterAShortGraceNotTheConnectTimeout) {
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(1, 1)); }));
  api::ConnectOptions twice = options_for(50);  // conn_'s id
  twice.connect_timeout_ms = 60000;
  const uint64_t started = monotonic_ns();
  auto second = api::Connection::connect(twice);
  const uint64_t took_ms = (monotonic_ns() - started) / 1'000'000;
  ASSERT_FALSE(second);
  EXPECT_EQ(second.status().code(), StatusCode::kAlreadyExists) << second.status().to_string();
  EXPECT_NE(second.status().message().find("API node 50 is already connected to data node 1"), std::string::npos)
      << second.status().to_string();
  EXPECT_GE(took_ms, 2000u) << "refused before the grace for a previous connection to go";
  EXPECT_LT(took_ms, 30000u) << "waited for the connect timeout instead of the grace";
  EXPECT_EQ(balance_of(1), 1);  // the holder's connection still works
}

// The data node stops while transactions wait for a lock: a synchronous
// one on another thread and an asynchronous one each fail at once with 4025
// naming the cause, and the holder's commit fails too. Once a node runs
// again, a new Connection works.
TEST_F(DataApiTest, ANodeThatStopsFailsEveryTransactionInFlightAndANewConnectionWorksOnceItIsBack) {
  for (const char* medium : {"tcp", "shm"}) {
    SCOPED_TRACE(medium);
    ClusterOptions options;
    options.medium = medium;
    options.deadlock_timeout_ms = 60000;
    start(options);
    ASSERT_TRUE(run([&](api::Transaction& tx) {
      tx.insert(*table_, account(1, 1));
      tx.insert(*table_, account(2, 2));
    }));
    api::Transaction& holder = conn_->start_transaction();
    holder.update(*table_, key_of(1), Row().set(kBalance, int64_t{5}));
    holder.update(*table_, key_of(2), Row().set(kBalance, int64_t{5}));
    ASSERT_TRUE(holder.execute(ExecType::kNoCommit));
    auto sync_conn = cluster_->connect(51);
    auto async_conn = cluster_->connect(52);
    ASSERT_TRUE(sync_conn && async_conn);
    auto sync_table = (*sync_conn)->get_table("accounts");
    auto async_table = (*async_conn)->get_table("accounts");
    ASSERT_TRUE(sync_table && async_table);
    std::atomic<bool> sync_sent{false};
    Status sync_status;
    std::thread sync_client([&] {
      api::Transaction& tx = (*sync_conn)->start_transaction();
      tx.update(**sync_table, key_of(1), Row().set(kBalance, int64_t{9}));
      sync_sent = true;
      sync_status = tx.execute(ExecType::kCommit);
      tx.close();
    });
    api::Transaction& async = (*async_conn)->start_transaction();
    async.update(**async_table, key_of(2), Row().set(kBalance, int64_t{9}));
    Status async_status;
    int callbacks = 0;
    ASSERT_TRUE(async.execute_async(ExecType::kCommit, [&](api::Transaction&, const Status& s) {
      async_status = s;
      ++callbacks;
    }));
    // Both wait for the holder's locks: the node answers neither yet.
    EXPECT_EQ((*async_conn)->poll(200, 1), 0);
    while (!sync_sent) std::this_thread::yield();
    cluster_->node().stop();
    while ((*async_conn)->in_flight() > 0) ASSERT_GT((*async_conn)->poll(10000, 1), 0) << "the async transaction hung";
    sync_client.join();
    EXPECT_EQ(callbacks, 1);
    for (const Status* s : {&sync_status, &async_status}) {
      EXPECT_EQ(s->code(), StatusCode::kLinkDown) << s->to_string();
      EXPECT_EQ(s->message().rfind("4025: Node failure caused abort of transaction: ", 0), 0u) << s->message();
      EXPECT_NE(s->message().find("node 1 "), std::string::npos) << s->message();
    }
    EXPECT_EQ(async.error(), ErrorCode::kNodeFailure);
    async.close();
    EXPECT_EQ(holder.execute(ExecType::kCommit).code(), StatusCode::kLinkDown);
    holder.close();

    engine::DataNodeOptions again;
    again.config_text = cluster_->config_text();
    again.node_id = 1;
    again.registry = &tools::builtin_registry();
    // The stopped node object keeps its control socket until destroyed.
    again.control_socket = cluster_->node().control_socket() + "-again";
    auto node = engine::DataNode::create(again);
    ASSERT_TRUE(node) << node.status().to_string();
    const Status restarted = (*node)->start();
    ASSERT_TRUE(restarted) << restarted.to_string();
    auto fresh = cluster_->connect(50);
    ASSERT_TRUE(fresh) << fresh.status().to_string();
    auto table = (*fresh)->create_table(accounts_def());  // the new node starts empty
    ASSERT_TRUE(table) << table.status().to_string();
    api::Transaction& tx = (*fresh)->start_transaction();
    tx.insert(**table, account(3, 3));
    EXPECT_TRUE(tx.execute(ExecType::kCommit));
    tx.close();
    fresh->reset();
    (*node)->stop();
  }
}

TEST(DataNodeConfigTest, ConfigErrorsAreClear) {
  engine::DataNodeOptions d;
  d.registry = nullptr;
  EXPECT_FALSE(engine::DataNode::create(d));
  d.registry = &tools::builtin_registry();
  d.config_text = "[ndbd]\nNodeId=1\n[api]\nNodeId=50\n";
  d.node_id = 2;
  EXPECT_EQ(engine::DataNode::create(d).status().message(), "node id 2 is not in <config>");
  d.node_id = 50;
  EXPECT_EQ(engine::DataNode::create(d).status().message(),
            "node 50 is an api node in <config>, not a data node ([ndbd])");
  d.node_id = 1;
  d.config_text = "[ndbd]\nNodeId=1\nDataMemory=10\n";
  EXPECT_EQ(engine::DataNode::create(d).status().message(),
            "<config>:3: [ndbd] DataMemory: value 10 out of range; accepted 1M..1024G bytes");
  d.config_text = "[ndbd]\nNodeId=1\nThreadConfig=ldm={count=5}\n";
  EXPECT_NE(engine::DataNode::create(d).status().message().find("5 ldm threads in total"), std::string::npos);
  d.config_text = "[ndbd]\nNodeId=1\nNoOfReplicas=2\n";
  EXPECT_EQ(engine::DataNode::create(d).status().message(),
            "<config>:3: [ndbd] NoOfReplicas: value 2 out of range; accepted 1..1");
  d.config_text = "[ndbd]\nNodeId=1\n[api]\nNodeId=1\n";
  EXPECT_NE(engine::DataNode::create(d).status().message().find("NodeId=1 is already used"), std::string::npos);
  d.config_text = "[ndbd]\nNodeId=1\n[apii]\nNodeId=2\n";
  EXPECT_NE(engine::DataNode::create(d).status().message().find("unknown section [apii]"), std::string::npos);
}

}  // namespace
}  // namespace fjord::test
