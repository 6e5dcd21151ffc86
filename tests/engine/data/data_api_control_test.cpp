// The data node's control socket and statistics: every command, the block
// counters in text and JSON (and fjord-stats showing the same), and
// clients that are silent, slow, too many, or out of descriptors.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "data_api_fixture.h"
#include "descriptors_used_up.h"
#include "fjord/base/clock.h"
#include "fjord/base/fd.h"
#include "fjord/base/unix_address.h"

namespace fjord::test {
namespace {

using api::ExecType;
using api::Row;
using engine::ColumnType;

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

// Clients that connect and say nothing, or send their line in pieces, hold
// up neither other control requests nor API nodes connecting meanwhile;
// the silent ones are closed after their 2 s.
TEST_F(DataApiTest, ASilentOrSlowControlClientHoldsUpNothing) {
  const std::string socket = cluster_->node().control_socket();
  ASSERT_EQ(socket[0], '@');
  std::vector<UniqueFd> silent(3);
  for (UniqueFd& fd : silent) fd = control_connection(socket);
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

// More clients waiting for their command than the node keeps: the extra
// ones are told so, and the node goes on answering.
TEST_F(DataApiTest, TooManyWaitingControlClientsAreToldSo) {
  const std::string socket = cluster_->node().control_socket();
  std::vector<UniqueFd> waiting(8);
  for (UniqueFd& fd : waiting) fd = control_connection(socket);
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

}  // namespace
}  // namespace fjord::test
