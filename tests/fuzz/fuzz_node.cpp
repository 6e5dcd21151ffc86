// libFuzzer target: a whole data node (DICT, TC, LDM and the runtime, as
// DataNode assembles them) fed arbitrary frames over sim links, as an API
// node (51) and as a second data node (2). The node is created once, with
// two tables of committed rows; its loop runs on the fuzzer's thread
// (DataNodeOptions::caller_runs_loop), stepped until quiet after each input.
//
// Input: a sequence of frames, each
//   byte   link and kind: bit 0 picks the link (0 = API node, 1 = data
//          node); bits 1-3 the kind: 0-5 a listed signal (the next byte
//          picks it from the link's list; on the API link it goes to the
//          block that serves it), 6 a raw signal number (two bytes; the data
//          link only: the API link takes a listed one), 7 raw frame bytes (a
//          two-byte length, then the bytes as they are)
//   byte   receiver (data link: bits 0-2 TC, DICT, LDM, or at 7 a raw block
//          and instance in the next four bytes; bits 6-7 both set:
//          instance 1)
//   byte   sender block
//   byte   word count (mod 26), then the words (4 bytes each)
//   byte   section count (mod 4), then per section a two-byte length and
//          its bytes
// What the input lacks reads as zeros. Requests that would legitimately
// change the guarded table (writes to it or its unique index, its drop, a
// schema install over it) are turned to the play table, which has the same
// shape, or left out.
//
// Properties: the node never aborts; a link it takes down is reconnected
// for the next input; every kCheckEvery inputs and at exit the fuzz links
// are closed and a fresh API connection (node 50) reads every guarded row
// and scans the table: a row missing, changed or extra aborts with a
// message. The inputs since the last passing check are kept; a failed
// check writes them to <artifact_prefix>fuzz_node-inputs-since-check.
//
// FJORD_FUZZ_NODE_SEEDS=DIR writes the seed inputs (requests from the
// protocol's encoders, as the API and TC send them) into DIR and exits.
// FJORD_FUZZ_NODE_REPLAY=FILE runs such a file's inputs on a fresh node
// with a check after each, naming the first after which a row is broken.
// FJORD_FUZZ_NODE_SELF_TEST=1 turns the guard around (writes to the play
// table reach the guarded one), to show that the check fires.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "builtin_transporters.h"
#include "fjord/api/api.h"
#include "fjord/base/clock.h"
#include "fjord/base/log.h"
#include "fjord/engine/data_node.h"
#include "fjord/engine/protocol.h"
#include "script_input.h"

using namespace fjord;
using namespace fjord::engine;
using namespace fjord::engine::protocol;
using fjord::fuzz::take;

namespace {

constexpr NodeId kNode = 1;
constexpr NodeId kFuzzData = 2;
constexpr NodeId kChecker = 50;
constexpr NodeId kFuzzApi = 51;
constexpr uint64_t kGuardedRows = 24;
constexpr uint64_t kCheckEvery = 50'000;
constexpr int kMaxLoopsPerInput = 4096;
constexpr std::size_t kMaxSectionBytes = 8192;
const char* const kGuardedName = "fuzz_guarded";
const char* const kPlayName = "fuzz_play";

// id UINT64 key, email VARCHAR(32) unique (by_email), v INT64 ordered (by_v).
TableDef table_shape(const std::string& name) {
  TableDef t;
  t.name = name;
  t.columns = {{"id", ColumnType::kUint64, 0, false},
               {"email", ColumnType::kVarChar, 32, false},
               {"v", ColumnType::kInt64, 0, false}};
  t.primary_key = {0};
  t.indexes = {{"by_email", IndexKind::kUnique, {1}, 0}, {"by_v", IndexKind::kOrdered, {2}, 0}};
  t.partitions = 4;
  return t;
}

api::Row guarded_row(uint64_t id) {
  return api::Row().set(0, id).set(1, "g" + std::to_string(id) + "@x").set(2, static_cast<int64_t>(id * 7));
}

void write_input_log();
void name_replayed_input();

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_node: %s\n", what.c_str());
  write_input_log();
  name_replayed_input();
  std::abort();
}

std::string config_text() {
  const auto unique = static_cast<uint64_t>(::getpid()) * 1000;
  std::string text =
      "[ndbd default]\nDataMemory=32M\nHostName=127.0.0.1\nDataDir=/tmp\nPartitionsPerTable=4\n"
      "[ndbd]\nNodeId=1\nSingleThreaded=1\nTransactionDeadlockDetectionTimeout=100\n"
      "TransactionInactiveTimeout=200\nTimeBetweenWatchDogCheck=0\nMaxNoOfConcurrentTransactions=256\n"
      "MaxNoOfConcurrentOperations=2048\nMaxNoOfConcurrentScans=64\nControlSocket=@fjord-fuzz-node-" +
      std::to_string(unique) + "\n[ndbd]\nNodeId=2\n";
  for (NodeId api : {kChecker, kFuzzApi}) text += "[api]\nNodeId=" + std::to_string(api) + "\nHostName=127.0.0.1\n";
  // Send buffers at the sim ring's floor (two frames of kMaxFrameBytes): a
  // fuzz link is set up again after every refusal, and a smaller ring is
  // less to map and fault in each time.
  for (NodeId peer : {kChecker, kFuzzApi, kFuzzData})
    text += "[sim]\nNodeId1=1\nNodeId2=" + std::to_string(peer) + "\nSimEndpoint=" + std::to_string(unique + peer) +
            "\nSeed=1\nSendBufferMemory=64K\n";
  return text;
}

// The node, its tables and the fuzzer's two links.
struct Harness {
  std::unique_ptr<DataNode> node;
  std::string config;
  ClusterConfig cluster;
  TableDef guarded, play;
  std::unique_ptr<transport::Transporter> links[2];  // [0] as API node 51, [1] as data node 2
  uint64_t inputs = 0;
  uint64_t reconnects = 0;
  // The inputs since the last check that passed, each as a four-byte length
  // and its bytes: the one that broke a row is among them.
  std::vector<uint8_t> input_log;
  uint64_t logged_inputs = 0;
  std::string artifact_prefix;  // libFuzzer's -artifact_prefix
  uint64_t replaying = 0;       // with FJORD_FUZZ_NODE_REPLAY: the input run last (1-based)
  bool self_test = false;       // FJORD_FUZZ_NODE_SELF_TEST=1: the guard turned around

  void drain() {
    for (auto& link : links) {
      if (!link) continue;
      for (int i = 0; i < 64; ++i) {
        const transport::ReceiveBatch b = link->receive();
        if (b.bytes.empty()) break;
        link->release(b.bytes.size());
      }
    }
  }
  // Runs the node's loop until it has nothing left to do.
  void settle() {
    for (int i = 0; i < kMaxLoopsPerInput; ++i) {
      const bool more = node->run_once();
      drain();
      if (!more) return;
    }
  }
  transport::Transporter* link(int which);
  void close_links();
};

Harness* g = nullptr;

// Steps the node from a thread of its own while the API (blocking calls)
// runs on the caller's: set-up and checks only.
class BackgroundLoop {
 public:
  explicit BackgroundLoop(DataNode& node)
      : thread_([this, &node] {
          while (!stop_.load(std::memory_order_acquire))
            if (!node.run_once()) std::this_thread::sleep_for(std::chrono::microseconds(20));
        }) {}
  ~BackgroundLoop() {
    stop_.store(true, std::memory_order_release);
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

transport::Transporter* Harness::link(int which) {
  auto& l = links[which];
  if (l && l->is_up()) return l.get();
  const NodeId self = which == 0 ? kFuzzApi : kFuzzData;
  for (int attempt = 0; attempt < 50; ++attempt) {
    if (l) {
      l.reset();
      settle();  // the node sees the link down and forgets it
    }
    const transport::LinkConfig* cfg = cluster.links.find(kNode, self);
    if (!cfg) fail("no sim link between node 1 and node " + std::to_string(self));
    auto t = tools::builtin_registry().find("sim")->connect(self, *cfg, monotonic_ns() + 5'000'000'000ULL);
    if (!t) fail("cannot connect as node " + std::to_string(self) + ": " + t.status().message());
    l = std::move(t).value();
    ++reconnects;
    settle();  // the node adopts it
    if (l->is_up()) return l.get();
  }
  fail("node 1 does not take a link from node " + std::to_string(self) + " back");
}

void Harness::close_links() {
  for (auto& l : links)
    if (l) {
      l->close("the fuzzer checks the node");
      l.reset();
    }
  for (int i = 0; i < 8; ++i) settle();
}

// ---- the check --------------------------------------------------------------

std::unique_ptr<api::Connection> connect_checker() {
  api::ConnectOptions c;
  c.config_text = g->config;
  c.node_id = kChecker;
  c.registry = &tools::builtin_registry();
  c.request_timeout_ms = 20000;
  auto conn = api::Connection::connect(c);
  if (!conn) fail("a fresh API cannot connect: " + conn.status().message());
  return std::move(conn).value();
}

void check_guarded_rows(api::Connection& conn) {
  auto table = conn.get_table(kGuardedName);
  if (!table) fail("the guarded table is gone: " + table.status().message());
  for (uint64_t id = 1; id <= kGuardedRows; ++id) {
    api::Transaction& tx = conn.start_transaction();
    api::Operation& op = tx.read(**table, api::Row().set(0, id));
    const Status s = tx.execute(api::ExecType::kCommit);
    const api::Row want = guarded_row(id);
    if (!s) fail("guarded row " + std::to_string(id) + " unreadable: " + s.message());
    if (op.value(2).as_int64() != static_cast<int64_t>(id * 7)) fail("guarded row " + std::to_string(id) + " changed");
    tx.close();
  }
  api::ScanSpec spec;
  spec.table = *table;
  auto scan = conn.scan(spec);
  if (!scan) fail("cannot scan the guarded table: " + scan.status().message());
  uint64_t rows = 0;
  for (api::RowView row; (*scan)->next(row);) ++rows;
  if (!(*scan)->status()) fail("scan of the guarded table failed: " + (*scan)->status().message());
  if (rows != kGuardedRows) fail("the guarded table has " + std::to_string(rows) + " rows");
  (*scan)->close();
}

void check_node() {
  g->close_links();
  {
    BackgroundLoop loop(*g->node);
    auto conn = connect_checker();
    check_guarded_rows(*conn);
  }
  g->settle();
  g->input_log.clear();
  g->logged_inputs = 0;
}

// ---- the inputs since the last check ------------------------------------------

// Past this many bytes of inputs since the last check, the next one checks first.
constexpr std::size_t kInputLogBytesMax = std::size_t{64} << 20;

void log_input(const uint8_t* data, size_t size) {
  if (g->input_log.size() + 4 + size > kInputLogBytesMax) check_node();
  for (int i = 0; i < 4; ++i) g->input_log.push_back(static_cast<uint8_t>(size >> (8 * i)));
  g->input_log.insert(g->input_log.end(), data, data + size);
  ++g->logged_inputs;
}

void name_replayed_input() {
  if (g != nullptr && g->replaying != 0)
    std::fprintf(stderr, "fuzz_node: this follows input %llu of the replayed log\n",
                 static_cast<unsigned long long>(g->replaying));
}

// On a failure: the inputs since the last passing check, for a replay.
void write_input_log() {
  if (g == nullptr || g->replaying != 0 || g->logged_inputs == 0) return;
  const std::string path = g->artifact_prefix + "fuzz_node-inputs-since-check";
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(g->input_log.data()), static_cast<std::streamsize>(g->input_log.size()));
  if (!out) {
    std::fprintf(stderr, "fuzz_node: cannot write %s\n", path.c_str());
    return;
  }
  std::fprintf(stderr,
               "fuzz_node: the %llu inputs since the last passing check are in %s; "
               "FJORD_FUZZ_NODE_REPLAY=%s runs them on a fresh node, checking after each\n",
               static_cast<unsigned long long>(g->logged_inputs), path.c_str(), path.c_str());
}

// ---- set-up -----------------------------------------------------------------

void create_tables() {
  BackgroundLoop loop(*g->node);
  auto conn = connect_checker();
  auto guarded = conn->create_table(table_shape(kGuardedName));
  if (!guarded) fail("create " + std::string(kGuardedName) + ": " + guarded.status().message());
  auto play = conn->create_table(table_shape(kPlayName));
  if (!play) fail("create " + std::string(kPlayName) + ": " + play.status().message());
  g->guarded = **guarded;
  g->play = **play;
  api::Transaction& tx = conn->start_transaction();
  for (uint64_t id = 1; id <= kGuardedRows; ++id) {
    tx.insert(g->guarded, guarded_row(id));
    tx.insert(g->play, guarded_row(id));
  }
  if (Status s = tx.execute(api::ExecType::kCommit); !s) fail("insert the guarded rows: " + s.message());
  tx.close();
}

void start_node() {
  // The node logs what it refuses: a line per input would be most of the
  // run's time. FJORD_FUZZ_NODE_LOG=1 keeps them (to read a crash's story).
  if (std::getenv("FJORD_FUZZ_NODE_LOG") == nullptr) log_set_level(LogLevel::kError);
  g = new Harness();
  const char* self_test = std::getenv("FJORD_FUZZ_NODE_SELF_TEST");
  g->self_test = self_test != nullptr && std::string_view(self_test) == "1";
  g->config = config_text();
  DataNodeOptions o;
  o.config_text = g->config;
  o.node_id = kNode;
  o.registry = &tools::builtin_registry();
  o.caller_runs_loop = true;
  o.peer_data_nodes_played_by_caller = true;  // links[1] plays data node 2
  auto node = DataNode::create(o);
  if (!node) fail("create the node: " + node.status().message());
  g->node = std::move(node).value();
  g->cluster = g->node->config();
  if (Status s = g->node->start(); !s) fail("start the node: " + s.message());
  create_tables();
  std::atexit([] {
    check_node();
    std::fprintf(stderr, "fuzz_node: %llu inputs, %llu links re-established, guarded rows intact\n",
                 static_cast<unsigned long long>(g->inputs), static_cast<unsigned long long>(g->reconnects));
  });
}

// ---- the guard ------------------------------------------------------------------

bool in_family(const TableDef& table, uint32_t id) { return id >= table.table_id && id <= table.table_id + 2; }
// The table (or index) a write may change. With FJORD_FUZZ_NODE_SELF_TEST=1
// the guard is turned around, writes to the play table go to the guarded
// one, and the check must fire (tools/dev/run_checks.sh runs that).
uint32_t to_play(uint32_t id) {
  const TableDef& from = g->self_test ? g->play : g->guarded;
  const TableDef& to = g->self_test ? g->guarded : g->play;
  return in_family(from, id) ? id - from.table_id + to.table_id : id;
}

void guard_key_words(uint32_t* words, std::size_t count, std::size_t table_word, std::size_t op_word,
                     std::size_t index_word) {
  if (count <= op_word || (words[op_word] & 0xFF) == static_cast<uint32_t>(OpType::kRead)) return;
  if (count > table_word) words[table_word] = to_play(words[table_word]);
  if (index_word != SIZE_MAX && count > index_word) words[index_word] = to_play(words[index_word]);
}

void guard_train(std::vector<std::byte>& records) {
  using R = layout::TcKeyTrainRecord;
  for (std::size_t at = 0; at + kTrainRecordHeaderBytes <= records.size();) {
    uint32_t head[R::kWordCount];
    std::memcpy(head, records.data() + at, sizeof head);
    guard_key_words(head, R::kWordCount, R::kTableId, R::kOpBits, R::kIndexId);
    std::memcpy(records.data() + at, head, sizeof head);
    const uint64_t body = uint64_t{padded_to_4(head[R::kKeyBytes])} + padded_to_4(head[R::kValueBytes]) +
                          padded_to_4(head[R::kColumnBytes]);
    if (body > records.size()) return;
    at += kTrainRecordHeaderBytes + body;
  }
}

// Tables the inputs create or install stay few, so that the node's memory
// stays bounded over a long run: a created table takes one of a few names,
// an installed one one of a few ids.
constexpr uint32_t kNewTableNames = 8;
constexpr uint32_t kFirstInstallId = 100;
constexpr uint32_t kInstallIds = 8;

void bound_new_table(std::vector<std::byte>& section) {
  auto def = decode_table(section);
  if (!def) return;  // refused as it is
  // By its last byte: "fuzz_new0".."fuzz_new7" keep their names.
  def->name = "fuzz_new" + std::to_string(static_cast<uint8_t>(def->name.back()) % kNewTableNames);
  section = encode_table(*def);
}

// False if the frame must be left out.
bool guard(uint16_t number, uint32_t* words, std::size_t count, std::vector<std::byte>* sections,
           std::size_t section_count) {
  switch (number) {
    case gsn::kTcKeyReq:
      guard_key_words(words, count, layout::TcKeyReq::kTableId, layout::TcKeyReq::kOpBits, layout::TcKeyReq::kIndexId);
      if (g->self_test && count > layout::TcKeyReq::kTableVersion &&
          words[layout::TcKeyReq::kTableId] == g->guarded.table_id)
        words[layout::TcKeyReq::kTableVersion] = g->guarded.version;  // so that TC takes the write
      return true;
    case gsn::kLqhKeyReq:
      guard_key_words(words, count, layout::LqhKeyReq::kTableId, layout::LqhKeyReq::kOpBits, SIZE_MAX);
      return true;
    case gsn::kTcKeyTrain:
      if (section_count > 0) guard_train(sections[0]);
      return true;
    case gsn::kDropTableReq:
      return section_count == 0 ||
             std::string(reinterpret_cast<const char*>(sections[0].data()), sections[0].size()) != kGuardedName;
    case gsn::kCreateTableReq:
      if (section_count > 0) bound_new_table(sections[0]);
      return true;
    case gsn::kSchemaInstall: {
      // Installs land on a few ids past the node's own tables.
      if (count > layout::SchemaInstall::kTableId)
        words[layout::SchemaInstall::kTableId] = kFirstInstallId + words[layout::SchemaInstall::kTableId] % kInstallIds;
      if (section_count == 0) return true;
      auto def = decode_table(sections[0]);
      return !def || (def->table_id >= kFirstInstallId && def->table_id < kFirstInstallId + kInstallIds);
    }
    default: return true;
  }
}

// ---- frames ---------------------------------------------------------------------

const uint16_t kApiSignals[] = {gsn::kTcKeyReq,    gsn::kTcKeyTrain,     gsn::kTcCommitReq,  gsn::kTcRollbackReq,
                                gsn::kScanReq,     gsn::kScanNextReq,    gsn::kScanCloseReq, gsn::kApiRegReq,
                                gsn::kGetTableReq, gsn::kCreateTableReq, gsn::kDropTableReq};
const uint16_t kDataSignals[] = {
    gsn::kLqhKeyReq,       gsn::kLqhKeyConf,       gsn::kLqhKeyRef,     gsn::kLqhCommitReq,      gsn::kLqhCommitConf,
    gsn::kLqhAbortReq,     gsn::kLqhAbortConf,     gsn::kScanFragReq,   gsn::kScanFragConf,      gsn::kScanFragRef,
    gsn::kScanFragNextReq, gsn::kScanFragCloseReq, gsn::kSchemaInstall, gsn::kSchemaInstallConf, gsn::kTcKeyReq,
    gsn::kTcKeyTrain,      gsn::kTcCommitReq,      gsn::kTcRollbackReq, gsn::kScanReq,           gsn::kScanNextReq,
    gsn::kScanCloseReq,    gsn::kApiRegReq,        gsn::kGetTableReq,   gsn::kCreateTableReq,    gsn::kDropTableReq,
    gsn::kTcKeyConf,       gsn::kTcKeyRef,         gsn::kKeyData,       gsn::kKeyDataConf,       gsn::kKeyDataTrain,
    gsn::kScanRows,        gsn::kScanConf,         gsn::kSchemaRef,     gsn::kTcAbortRep};

BlockNumber home_of(uint16_t number) {
  const bool dict = number == gsn::kApiRegReq || (number >= gsn::kCreateTableReq && number <= gsn::kGetTableReq);
  return dict ? block_numbers::kDict : block_numbers::kTc;
}

struct Frame {
  int link = 0;
  frame::SignalHeader header;
  uint32_t words[frame::kMaxDataWords] = {};
  std::size_t word_count = 0;
  std::vector<std::byte> sections[frame::kMaxSections];
  std::size_t section_count = 0;
};

BlockRef receiver_of(int link, uint16_t number, const uint8_t*& data, size_t& size) {
  const auto r = static_cast<uint8_t>(take(data, size, 1));
  const auto instance = static_cast<uint16_t>((r >> 6) == 3 ? 1 : 0);
  if (link == 0) return {home_of(number), instance};
  if ((r & 7) == 7) {
    const auto block = static_cast<BlockNumber>(take(data, size, 2));
    return {block, static_cast<uint16_t>(take(data, size, 2))};
  }
  const BlockNumber blocks[] = {block_numbers::kTc, block_numbers::kDict, block_numbers::kLdm};
  const BlockNumber block = blocks[(r & 7) % 3];
  return {block, block == block_numbers::kDict ? uint16_t{0} : instance};
}

void read_parts(Frame& f, const uint8_t*& data, size_t& size) {
  f.word_count = take(data, size, 1) % (frame::kMaxDataWords + 1);
  for (std::size_t i = 0; i < f.word_count; ++i) f.words[i] = static_cast<uint32_t>(take(data, size, 4));
  f.section_count = take(data, size, 1) % (frame::kMaxSections + 1);
  for (std::size_t i = 0; i < f.section_count; ++i) {
    const std::size_t n = std::min<std::size_t>({take(data, size, 2), size, kMaxSectionBytes});
    f.sections[i].assign(reinterpret_cast<const std::byte*>(data), reinterpret_cast<const std::byte*>(data) + n);
    data += n;
    size -= n;
  }
}

// Reads one frame of the input into f; false if it is left out.
bool read_frame(Frame& f, uint8_t control, const uint8_t*& data, size_t& size) {
  f.link = control & 1;
  const int kind = (control >> 1) & 7;
  uint16_t number;
  if (kind == 6 && f.link == 1) {
    number = static_cast<uint16_t>(take(data, size, 2));
    // Runtime signals (1..15) never pass a link: the runtime refuses them.
    if (number < runtime_signals::kFirstUser) number = static_cast<uint16_t>(number + runtime_signals::kFirstUser);
  } else if (f.link == 0) {
    number = kApiSignals[take(data, size, 1) % std::size(kApiSignals)];
  } else {
    number = kDataSignals[take(data, size, 1) % std::size(kDataSignals)];
  }
  f.header.signal_number = number;
  f.header.receiver = receiver_of(f.link, number, data, size);
  const auto s = static_cast<uint8_t>(take(data, size, 1));
  f.header.sender = f.link == 0 ? BlockRef{block_numbers::kApi, 0}
                                : BlockRef{static_cast<BlockNumber>(block_numbers::kTc + (s & 1)), 0};
  read_parts(f, data, size);
  return guard(number, f.words, f.word_count, f.sections, f.section_count);
}

// Room on the link for `bytes`, running the node while it has none.
std::span<std::byte> room(transport::Transporter*& t, int which, std::size_t bytes) {
  for (int i = 0; i < 64; ++i) {
    std::span<std::byte> space = t->reserve(bytes);
    if (!space.empty()) return space;
    (void)t->flush();
    g->settle();
    t = g->link(which);
  }
  return {};
}

void send_frame(const Frame& f) {
  transport::Transporter* t = g->link(f.link);
  std::span<const std::byte> sections[frame::kMaxSections];
  for (std::size_t i = 0; i < f.section_count; ++i) sections[i] = f.sections[i];
  const std::size_t bytes = frame::frame_bytes_for(f.word_count, {sections, f.section_count}, false);
  if (bytes == 0) return;
  std::span<std::byte> space = room(t, f.link, bytes);
  if (space.empty()) return;
  t->commit(frame::pack_frame(space, f.header, {f.words, f.word_count}, {sections, f.section_count}, false), 1);
}

void send_raw(int which, const uint8_t*& data, size_t& size) {
  const std::size_t n = std::min<std::size_t>({take(data, size, 2), size, frame::kMaxFrameBytes});
  if (n == 0) return;
  transport::Transporter* t = g->link(which);
  std::span<std::byte> space = room(t, which, n);
  if (space.empty()) return;
  std::memcpy(space.data(), data, n);
  data += n;
  size -= n;
  t->commit(n, 1);
}

void flush_links() {
  for (auto& l : g->links)
    if (l) (void)l->flush();
}

}  // namespace

// ---- seeds ----------------------------------------------------------------------

namespace {

// A seed: frames in the input format above, from the protocol's encoders.
struct SeedWriter {
  std::vector<uint8_t> bytes;
  void put(uint64_t v, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) bytes.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  // A listed signal on `link`, to `receiver_byte`.
  void signal(int link, const SignalOut& out, uint8_t receiver_byte, uint8_t sender_byte = 0) {
    const uint16_t* list = link == 0 ? kApiSignals : kDataSignals;
    const std::size_t n = link == 0 ? std::size(kApiSignals) : std::size(kDataSignals);
    std::size_t pick = 0;
    while (pick < n && list[pick] != out.number) ++pick;
    if (pick == n) fail("seed signal " + std::to_string(out.number) + " is not listed");
    put(static_cast<uint64_t>(link), 1);
    put(pick, 1);
    put(receiver_byte, 1);
    put(sender_byte, 1);
    put(out.word_count, 1);
    for (std::size_t i = 0; i < out.word_count; ++i) put(out.words[i], 4);
    parts(out);
  }
  // A signal by its raw number on the data link (kind 6).
  void raw(const SignalOut& out, uint8_t receiver_byte, uint8_t sender_byte = 0) {
    put(1 | 6 << 1, 1);
    put(out.number, 2);
    put(receiver_byte, 1);
    put(sender_byte, 1);
    put(out.word_count, 1);
    for (std::size_t i = 0; i < out.word_count; ++i) put(out.words[i], 4);
    parts(out);
  }
  void parts(const SignalOut& out) {
    put(out.section_count, 1);
    for (std::size_t i = 0; i < out.section_count; ++i) {
      put(out.sections[i].size(), 2);
      for (std::byte b : out.sections[i]) bytes.push_back(static_cast<uint8_t>(b));
    }
  }
};

void write_seed(const std::string& dir, const std::string& name, const SeedWriter& w) {
  std::ofstream out(dir + "/" + name, std::ios::binary);
  out.write(reinterpret_cast<const char*>(w.bytes.data()), static_cast<std::streamsize>(w.bytes.size()));
  if (!out) fail("cannot write seed " + dir + "/" + name);
}

}  // namespace

#include "fuzz_node_seeds.h"

namespace {

void run_input(const uint8_t* data, size_t size) {
  while (size > 0) {
    const auto control = static_cast<uint8_t>(take(data, size, 1));
    if (((control >> 1) & 7) == 7) {
      send_raw(control & 1, data, size);
      continue;
    }
    static Frame f;  // its sections keep their capacity from input to input
    if (read_frame(f, control, data, size)) send_frame(f);
  }
  flush_links();
  g->settle();
}

// FJORD_FUZZ_NODE_REPLAY=FILE: the inputs a failed check wrote, run in
// order with a check after each, so that the failure names the first input
// after which a guarded row is broken.
void replay(const char* file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(std::string("cannot open ") + file);
  const std::vector<uint8_t> log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (std::size_t at = 0; at < log.size();) {
    uint64_t size = 0;
    for (int i = 0; i < 4 && at + i < log.size(); ++i) size |= uint64_t{log[at + i]} << (8 * i);
    at += 4;
    if (at + size > log.size()) fail(std::string(file) + " ends inside input " + std::to_string(g->replaying + 1));
    ++g->replaying;
    run_input(log.data() + at, size);
    at += size;
    check_node();
  }
  std::fprintf(stderr, "fuzz_node: after each of the %llu inputs of %s the guarded rows are intact\n",
               static_cast<unsigned long long>(g->replaying), file);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  start_node();
  const std::string prefix_flag = "-artifact_prefix=";
  for (int i = 1; i < *argc; ++i)
    if (std::string_view arg = (*argv)[i]; arg.starts_with(prefix_flag))
      g->artifact_prefix = arg.substr(prefix_flag.size());
  if (const char* dir = std::getenv("FJORD_FUZZ_NODE_SEEDS")) {
    write_seeds(dir);
    std::_Exit(0);
  }
  if (const char* file = std::getenv("FJORD_FUZZ_NODE_REPLAY")) {
    replay(file);
    std::_Exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  log_input(data, size);
  run_input(data, size);
  if (++g->inputs % kCheckEvery == 0) check_node();
  return 0;
}
