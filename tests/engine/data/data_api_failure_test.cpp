// Failures and timeouts through the API: requests given up at their
// timeout (the node answering late, at the network seam), transactions the
// node aborts, disconnected API nodes, batches too large to send, and a
// data node that stops.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <set>
#include <thread>

#include "builtin_transporters.h"
#include "data_api_fixture.h"
#include "fjord/base/clock.h"

namespace fjord::test {
namespace {

using api::ExecType;
using api::Row;
using engine::protocol::ErrorCode;
using engine::protocol::LockMode;

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

// Scans whose round the data node answered too late for the request timeout
// (held at the API's link, as from a stalled node), at open or after, and
// then closed: close() closes them at the node all the same, so their
// records there (TC's, each partition's at its LDM) come back without a
// disconnect, and the answers that come late, before or after close()
// returned, are dropped. Were close() to send nothing after a failure, such
// scans would hold their records until the connection closed, and after
// MaxNoOfConcurrentScans of them no scan would open.
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
  api::ConnectOptions impatient = cluster_->connect_options(51);
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
  api::ConnectOptions impatient = cluster_->connect_options(51);
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

}  // namespace
}  // namespace fjord::test
