// The LDM's hot path allocates nothing: after a warm-up, a driver block
// (playing TC and DICT, itself allocation-free) runs cycles of key
// operations with commits and aborts, a lock wait, and full and ordered
// scan rounds, while a replaced operator new counts every heap allocation
// in the process. Own binary: it replaces the global operator new.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <new>
#include <thread>

#include "counting_new.h"
#include "ldm_test_tables.h"

using fjord::test::g_allocations;
using fjord::test::g_count_allocations;

namespace fjord::engine::ldm_test {
namespace {

constexpr uint16_t kGo = runtime_signals::kFirstUser + 1;  // words: cycles, setup (0/1)
constexpr uint64_t kBackgroundRows = 120;

// Drives one LDM instance through fixed cycles of requests, one step at a
// time, from buffers it owns. Runs on the tc thread as the TC block.
class Driver {
 public:
  explicit Driver(const TableDef& table) : table_(table), pk_(KeyCodec::for_primary_key(table)) {
    install_bytes_ = encode_table(table);
  }
  void on_signal(const Signal& s, BlockContext& c) {
    if (s.number() == kGo) {
      target_ += s.word(0);
      setup_ = s.word(1) != 0;
      step_ = 0;
      return next(c);
    }
    if (s.number() == gsn::kLqhKeyRef || s.number() == gsn::kScanFragRef) failed.store(true);
    if (failed.load()) return;
    if (s.number() == gsn::kScanFragConf) last_scan_finished_ = decode_scan_frag_conf(s)->finished;
    if (awaited_ == 0 || --awaited_ > 0) return;
    next(c);
  }

  std::atomic<uint64_t> cycles_done{0};
  std::atomic<bool> failed{false};
  std::atomic<bool> installed{false};

 private:
  static constexpr uint32_t kSteps = 16;

  void next(BlockContext& c) {
    if (!installed.load()) return install(c);
    if (setup_) return setup(c);
    if (cycles_done.load() >= target_) return;
    const uint64_t cycle = cycles_done.load();
    const uint64_t id = cycle % 32;
    const uint64_t tx = cycle * 8;
    switch (step_++) {
      case 0: return key(c, OpType::kInsert, LockMode::kExclusive, tx + 1, id, 1);
      case 1: return end(c, gsn::kLqhCommitReq, tx + 1);
      case 2: return key(c, OpType::kRead, LockMode::kCommitted, tx + 2, id, 0);
      case 3: return key(c, OpType::kUpdate, LockMode::kExclusive, tx + 2, id, 2);
      case 4: return key(c, OpType::kUpdate, LockMode::kExclusive, tx + 2, id, 3);
      case 5: return key(c, OpType::kRead, LockMode::kShared, tx + 2, id, 0);
      case 6: return end(c, gsn::kLqhCommitReq, tx + 2);
      case 7: return key(c, OpType::kRead, LockMode::kExclusive, tx + 3, id, 0, ResultTo::kTc);
      case 8: return end(c, gsn::kLqhAbortReq, tx + 3);
      case 9: return key(c, OpType::kUpdate, LockMode::kExclusive, tx + 4, id, 2);
      case 10:  // a second writer waits; the first commits; the waiter is granted
        key(c, OpType::kUpdate, LockMode::kExclusive, tx + 5, id, 3);
        awaited_ = 0;
        end(c, gsn::kLqhCommitReq, tx + 4);
        awaited_ = 2;
        return;
      case 11: return end(c, gsn::kLqhCommitReq, tx + 5);
      case 12: return key(c, OpType::kDelete, LockMode::kExclusive, tx + 6, id, 0);
      case 13: return end(c, gsn::kLqhCommitReq, tx + 6);
      case 14: return scan(c, static_cast<uint32_t>(cycle % table_.partitions), false);
      case 15: return scan(c, static_cast<uint32_t>(cycle % table_.partitions), true);
      default:
        step_ = 0;
        cycles_done.store(cycle + 1);
        return next(c);
    }
  }

  void install(BlockContext& c) {
    if (!install_sent_) {
      install_sent_ = true;
      awaited_ = 1;
      send(c, encode(SchemaInstall{1, table_.table_id, false, install_bytes_}));
      return;
    }
    installed.store(true);  // the conf came
  }

  void setup(BlockContext& c) {
    if (setup_index_ < kBackgroundRows)
      return key(c, OpType::kInsert, LockMode::kExclusive, 1ull << 40, 1000 + setup_index_++, 1);
    if (setup_index_++ == kBackgroundRows) return end(c, gsn::kLqhCommitReq, 1ull << 40);
    setup_ = false;
    next(c);
  }

  // values: 0 none, 1 a whole row, 2 and 3 changes of qty and name.
  void key(BlockContext& c, OpType op, LockMode lock, uint64_t tx, uint64_t id, int values,
           ResultTo to = ResultTo::kApi) {
    const std::size_t key_bytes = put_value(key_, kId, false, std::as_bytes(std::span(&id, 1)));
    std::size_t at = 0;
    const auto put = [&](uint16_t column, std::span<const std::byte> v) {
      at += put_value(std::span(values_).subspan(at), column, false, v);
    };
    const int32_t qty = static_cast<int32_t>(id % 5) + values;
    const uint32_t code = static_cast<uint32_t>(id);
    const std::size_t name_bytes = name_of(id + static_cast<uint64_t>(values));
    if (values == 1) put(kId, std::as_bytes(std::span(&id, 1)));
    if (values >= 1) put(kQty, std::as_bytes(std::span(&qty, 1)));
    if (values >= 1) put(kName, std::span(name_).first(name_bytes));
    if (values == 1) put(kCode, std::as_bytes(std::span(&code, 1)));
    LqhKeyReq m;
    m.tc_op = ++next_op_;
    m.tx = TxId{tx};
    m.table_id = table_.table_id;
    m.table_version = table_.version;
    m.op = op;
    m.lock = lock;
    m.result_to = to;
    m.api_node = kSelf;
    m.key = std::span(key_).first(key_bytes);
    m.values = std::span(values_).first(at);
    const ValueRef ref = ValueRef::of(id);
    const auto n = pk_.encode({&ref, 1}, encoded_);
    const uint64_t hash = hash_key(encoded_.data(), n.value());
    m.partition = partition_of(hash, table_.partitions);
    m.key_hash = static_cast<uint32_t>(hash);
    awaited_ = 1;
    send(c, encode(m));
  }

  std::size_t name_of(uint64_t n) {
    static constexpr char kPrefix[] = "a-long-shared-prefix-for-names--";
    std::size_t len = sizeof kPrefix - 1;
    std::memcpy(name_.data(), kPrefix, len);
    name_[len++] = static_cast<std::byte>('0' + n % 10);
    name_[len++] = static_cast<std::byte>('0' + n / 10 % 10);
    return len;
  }

  void end(BlockContext& c, uint16_t number, uint64_t tx) {
    awaited_ = 1;
    send(c, encode(number, LqhTxReq{TxId{tx}, 0}));
  }

  // One scan of a partition, round after round (steps repeat until finished).
  void scan(BlockContext& c, uint32_t partition, bool ordered) {
    awaited_ = 1;
    if (scan_open_ && !last_scan_finished_) {
      --step_;
      return send(c, encode(gsn::kScanFragNextReq, ScanFragNext{scan_id_, partition}));
    }
    if (scan_open_) {  // finished: move on
      scan_open_ = false;
      awaited_ = 0;
      return next(c);
    }
    ScanFragReq r;
    r.tc_scan = ++scan_id_;
    r.table_id = table_.table_id;
    r.table_version = table_.version;
    r.partition = partition;
    r.batch_rows = 8;
    r.api_node = kSelf;
    r.scan_id = scan_id_;
    if (ordered) {
      r.flags = kScanFlagOrderedIndex;
      r.index_id = kByName;
      const std::size_t n = put_bounds_header(bounds_, Bounds{true, true, false, false, 1, 0, {}, {}});
      const std::size_t v = put_value(std::span(bounds_).subspan(n), kName, false, std::span(name_).first(name_of(3)));
      r.bounds = std::span(bounds_).first(n + v);
    }
    scan_open_ = true;
    last_scan_finished_ = false;
    --step_;
    send(c, encode(r));
  }

  void send(BlockContext& c, const SignalOut& out) {
    c.send({kSelf, {block_numbers::kLdm, 0}}, out.number, out.data(), out.section_list());
  }

  const TableDef& table_;
  KeyCodec pk_;
  std::vector<std::byte> install_bytes_;
  std::array<std::byte, 64> key_{};
  std::array<std::byte, 512> values_{};
  std::array<std::byte, 64> name_{};
  std::array<std::byte, 256> bounds_{};
  std::array<std::byte, kMaxKeyBytes> encoded_{};
  uint64_t target_ = 0;
  uint32_t step_ = 0;
  uint32_t awaited_ = 0;
  uint32_t next_op_ = 0;
  uint32_t scan_id_ = 0;
  uint64_t setup_index_ = 0;
  bool setup_ = false;
  bool install_sent_ = false;
  bool scan_open_ = false;
  bool last_scan_finished_ = false;
};

TEST(LdmAllocTest, SteadyStateKeyOperationsCommitsLockWaitsAndScansAllocateNothing) {
  const TableDef table = items_table(4);
  auto pool = storage::PagePool::create({64 << 20});
  ASSERT_TRUE(pool);
  auto rt = Runtime::create(test::options_with({test::plan(ThreadType::kLdm, 0), test::plan(ThreadType::kTc, 0)}));
  ASSERT_TRUE(rt);
  LdmOptions options;
  options.max_operations = 1024;
  options.scan_slice_rows = 16;  // the scan also continues in signals to itself
  ASSERT_TRUE((*rt)->add_block(std::make_unique<LdmBlock>(**pool, options), ThreadType::kLdm, 0));
  Driver driver(table);
  std::atomic<uint64_t> api_signals{0};
  ASSERT_TRUE((*rt)->add_block(
      std::make_unique<test::LambdaBlock>(block_numbers::kTc, 0, "DRIVER",
                                          [&driver](const Signal& s, BlockContext& c) { driver.on_signal(s, c); }),
      ThreadType::kTc, 0));
  ASSERT_TRUE((*rt)->add_block(
      std::make_unique<test::LambdaBlock>(block_numbers::kApi, 0, "API",
                                          [&api_signals](const Signal&, BlockContext&) {
                                            api_signals.store(api_signals.load(std::memory_order_relaxed) + 1,
                                                              std::memory_order_relaxed);
                                          }),
      ThreadType::kTc, 0));
  ASSERT_TRUE((*rt)->start());
  const auto go = [&](uint32_t cycles, uint32_t setup) {
    const uint32_t words[] = {cycles, setup};
    ASSERT_TRUE((*rt)->inject({kSelf, {block_numbers::kTc, 0}}, kGo, words).is_ok());
  };
  const auto wait_for = [&](uint64_t cycles) {
    for (int i = 0; i < 120000 && driver.cycles_done.load() < cycles && !driver.failed.load(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  // Warm-up: the table, background rows, and every path once (pages grow here).
  go(0, 1);
  for (int i = 0; i < 120000 && !driver.installed.load(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  go(200, 1);
  wait_for(200);
  ASSERT_EQ(driver.cycles_done.load(), 200u);
  ASSERT_FALSE(driver.failed.load());

  g_allocations = 0;
  g_count_allocations = true;
  go(2000, 0);
  wait_for(2200);
  g_count_allocations = false;
  EXPECT_EQ(driver.cycles_done.load(), 2200u);
  EXPECT_FALSE(driver.failed.load());
  EXPECT_EQ(g_allocations.load(), 0u) << "heap allocations in steady state"
                                      << "\n"
                                      << fjord::test::first_allocation();
  EXPECT_GT(api_signals.load(), 2200u * 2);  // reads' KeyData and scans' ScanRows
  (*rt)->stop();
}

TEST(LdmAllocTest, TheCounterSeesAllocations) {
  g_allocations = 0;
  g_count_allocations = true;
  auto* p = new std::vector<int>(100);
  g_count_allocations = false;
  delete p;
  EXPECT_GE(g_allocations.load(), 1u);
  // The first one counted is named, with its call stack, for a failing test.
  const std::string first = fjord::test::first_allocation();
  EXPECT_EQ(first.rfind("first allocation counted: ", 0), 0u) << first;
  EXPECT_NE(first.find(" bytes at\n  "), std::string::npos) << first;
}

}  // namespace
}  // namespace fjord::engine::ldm_test
