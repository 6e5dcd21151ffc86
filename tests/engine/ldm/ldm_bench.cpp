// ldm_bench: what one LDM instance sustains, measured through the runtime
// (not a test; prints a table). A driver block on a tc thread keeps
// `window` independent requests in flight to one LDM on an ldm thread:
// insert + commit, read-committed pk reads, update + commit, and full
// scans. It reports operations per second and the LDM thread's busy time
// per operation (its CPU cost, job-buffer work included).
//
//   ldm_bench [rows=200000] [window=64]
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>

#include "../runtime/test_blocks.h"
#include "fjord/engine/blocks/ldm.h"
#include "fjord/engine/protocol.h"

namespace fjord::engine {
namespace {

using namespace protocol;

constexpr uint16_t kGo = runtime_signals::kFirstUser + 1;  // words: phase
enum Phase : uint32_t { kInstall, kInsert, kRead, kUpdate, kScan };

TableDef bench_table() {
  TableDef t;
  t.name = "bench";
  t.table_id = 1;
  t.version = 1;
  t.partitions = 8;
  t.columns = {{"id", ColumnType::kUint64, 0, false},
               {"qty", ColumnType::kInt32, 0, false},
               {"payload", ColumnType::kBinary, 84, false}};
  t.primary_key = {0};
  t.indexes = {IndexDef{"by_qty", IndexKind::kOrdered, {1}, 2}};
  return t;
}

class Driver {
 public:
  Driver(const TableDef& t, uint64_t rows, uint32_t window)
      : t_(t), pk_(KeyCodec::for_primary_key(t)), rows_(rows), window_(window), table_bytes_(encode_table(t)) {}

  void on_signal(const Signal& s, BlockContext& c) {
    if (s.number() == kGo) return start(static_cast<Phase>(s.word(0)), c);
    if (s.number() == gsn::kLqhKeyRef || s.number() == gsn::kScanFragRef) errors.fetch_add(1);
    switch (phase_) {
      case kInstall: return done.store(true);
      case kInsert:
      case kUpdate: return two_step(s, c);
      case kRead: return issue(c);
      case kScan: return scan_next(s, c);
    }
  }

  std::atomic<bool> done{false};
  std::atomic<uint64_t> errors{0};
  std::atomic<uint64_t> scanned{0};

 private:
  void start(Phase phase, BlockContext& c) {
    phase_ = phase;
    next_ = 0;
    finished_ = 0;
    if (phase == kInstall) return send(c, encode(SchemaInstall{1, t_.table_id, false, table_bytes_}));
    if (phase == kScan) return scan_start(0, c);
    for (uint32_t i = 0; i < window_; ++i) issue(c);
  }

  // Insert/update then commit: the commit conf starts the next operation.
  void two_step(const Signal& s, BlockContext& c) {
    if (s.number() == gsn::kLqhKeyConf || s.number() == gsn::kLqhKeyRef) {
      const uint32_t tc_op = s.word(0);
      const SignalOut out = encode(gsn::kLqhCommitReq, LqhTxReq{TxId{tc_op + (uint64_t{phase_} << 40)}, 0});
      return send(c, out);
    }
    issue(c);
  }

  void issue(BlockContext& c) {
    if (next_ >= rows_) {
      if (++finished_ == window_) done.store(true);
      return;
    }
    const uint64_t id = phase_ == kRead ? rng_() % rows_ : next_;
    const uint32_t op = static_cast<uint32_t>(next_++);
    const std::size_t key_bytes = put_value(key_, 0, false, std::as_bytes(std::span(&id, 1)));
    std::size_t at = 0;
    if (phase_ != kRead) {
      const int32_t qty = static_cast<int32_t>(id % 1000) + (phase_ == kUpdate ? 1 : 0);
      if (phase_ == kInsert) at += put_value(values_, 0, false, std::as_bytes(std::span(&id, 1)));
      at += put_value(std::span(values_).subspan(at), 1, false, std::as_bytes(std::span(&qty, 1)));
      at += put_value(std::span(values_).subspan(at), 2, false, std::span(payload_));
    }
    LqhKeyReq m;
    m.tc_op = op;
    m.tx = TxId{op + (uint64_t{phase_} << 40)};
    m.table_id = t_.table_id;
    m.table_version = t_.version;
    m.op = phase_ == kInsert ? OpType::kInsert : phase_ == kUpdate ? OpType::kUpdate : OpType::kRead;
    m.lock = phase_ == kRead ? LockMode::kCommitted : LockMode::kExclusive;
    m.result_to = ResultTo::kTc;
    m.api_node = 1;
    m.key = std::span(key_).first(key_bytes);
    m.values = std::span(values_).first(at);
    const ValueRef ref = ValueRef::of(id);
    const auto n = pk_.encode({&ref, 1}, encoded_);
    const uint64_t hash = hash_key(encoded_.data(), n.value());
    m.partition = partition_of(hash, t_.partitions);
    m.key_hash = static_cast<uint32_t>(hash);
    send(c, encode(m));
  }

  void scan_start(uint32_t partition, BlockContext& c) {
    ScanFragReq r;
    r.tc_scan = partition + 1;
    r.table_id = t_.table_id;
    r.table_version = t_.version;
    r.partition = partition;
    r.batch_rows = 256;
    r.api_node = 1;
    r.columns = {reinterpret_cast<const std::byte*>(&kColumns), sizeof kColumns};
    scan_partition_ = partition;
    send(c, encode(r));
  }
  void scan_next(const Signal& s, BlockContext& c) {
    const ScanFragConf conf = decode_scan_frag_conf(s).value();
    scanned.fetch_add(conf.rows, std::memory_order_relaxed);
    if (!conf.finished) return send(c, encode(gsn::kScanFragNextReq, ScanFragNext{conf.tc_scan, conf.partition}));
    if (scan_partition_ + 1 < t_.partitions) return scan_start(scan_partition_ + 1, c);
    done.store(true);
  }

  void send(BlockContext& c, const SignalOut& out) {
    c.send({1, {block_numbers::kLdm, 0}}, out.number, out.data(), out.section_list());
  }

  static constexpr uint16_t kColumns[2] = {0, 1};
  const TableDef& t_;
  KeyCodec pk_;
  const uint64_t rows_;
  const uint32_t window_;
  std::vector<std::byte> table_bytes_;
  Phase phase_ = kInstall;
  uint64_t next_ = 0;
  uint32_t finished_ = 0;
  uint32_t scan_partition_ = 0;
  std::mt19937_64 rng_{42};
  std::array<std::byte, 32> key_{};
  std::array<std::byte, 256> values_{};
  std::array<std::byte, 84> payload_{};
  std::array<std::byte, kMaxKeyBytes> encoded_{};
};

uint64_t ldm_busy_ns(Runtime& rt) {
  for (const ThreadStats& s : rt.thread_stats())
    if (s.name.rfind("ldm", 0) == 0) return s.busy_ns;
  return 0;
}

int run(uint64_t rows, uint32_t window) {
  const TableDef table = bench_table();
  auto pool = storage::PagePool::create({uint64_t{rows} * 400 + (64 << 20)});
  auto rt =
      Runtime::create(test::options_with({test::plan(ThreadType::kLdm, 0, 50), test::plan(ThreadType::kTc, 0, 50)}));
  if (!pool || !rt) return 1;
  LdmOptions options;
  options.max_operations = window * 4;
  (void)(*rt)->add_block(std::make_unique<LdmBlock>(**pool, options), ThreadType::kLdm, 0);
  Driver driver(table, rows, window);
  (void)(*rt)->add_block(
      std::make_unique<test::LambdaBlock>(block_numbers::kTc, 0, "DRIVER",
                                          [&driver](const Signal& s, BlockContext& c) { driver.on_signal(s, c); }),
      ThreadType::kTc, 0);
  (void)(*rt)->add_block(
      std::make_unique<test::LambdaBlock>(block_numbers::kApi, 0, "API-SINK", [](const Signal&, BlockContext&) {}),
      ThreadType::kTc, 0);
  (void)(*rt)->start();
  std::printf("ldm_bench: %llu rows of 100 bytes, 8 partitions, one ordered index, window %u, cores %u\n",
              static_cast<unsigned long long>(rows), window, std::thread::hardware_concurrency());
  std::printf("%-22s %12s %14s %16s\n", "phase", "ops", "ops/s", "LDM busy ns/op");
  const char* names[] = {"install", "insert + commit", "pk read (committed)", "update + commit", "full scan (rows)"};
  for (uint32_t phase = kInstall; phase <= kScan; ++phase) {
    const uint64_t busy_before = ldm_busy_ns(**rt);
    const auto t0 = std::chrono::steady_clock::now();
    const uint32_t word = phase;
    driver.done.store(false);  // before the driver can set it
    (void)(*rt)->inject({1, {block_numbers::kTc, 0}}, kGo, {&word, 1});
    while (!driver.done.load()) std::this_thread::sleep_for(std::chrono::microseconds(200));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const uint64_t ops = phase == kScan ? driver.scanned.load() : phase == kInstall ? 1 : rows;
    const double busy = static_cast<double>(ldm_busy_ns(**rt) - busy_before);
    if (phase != kInstall)
      std::printf("%-22s %12llu %14.0f %16.0f\n", names[phase], static_cast<unsigned long long>(ops),
                  static_cast<double>(ops) / seconds, busy / static_cast<double>(ops));
  }
  (*rt)->stop();
  std::printf("errors: %llu\n", static_cast<unsigned long long>(driver.errors.load()));
  return driver.errors.load() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace fjord::engine

int main(int argc, char** argv) {
  const uint64_t rows = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 200000;
  const uint32_t window = argc > 2 ? static_cast<uint32_t>(std::strtoul(argv[2], nullptr, 10)) : 64;
  return fjord::engine::run(rows, window);
}
