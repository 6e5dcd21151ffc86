// node_bench: the data node's CPU per primary-key read, through TC and LDM
// on one thread (Google Benchmark), beside the least work a key read needs
// on this machine, measured in the same run.
//
//   BM_MemoryFloor/0        the memory system itself, over 256 MB on huge
//                           pages: a chain of dependent loads (ns per load)
//   BM_MemoryFloor/K        K independent random lines loaded together, as
//                           a batch's buckets and rows are (ns per batch of
//                           K and per line; K = 20, 60)
//   BM_StorageReadFloor/1   floor: hash an 8-byte key, find it in an open-
//                           addressing table of the same number of rows,
//                           compare it and copy the 100-byte row out
//   BM_StorageReadFloor/20  the same 20 keys at a time, as a train runs
//                           them: every slot prefetched, then every row,
//                           then the reads (the floor of a batched read)
//   BM_NodePkReads/1        read-committed pk reads, one per transaction
//                           (start, read, commit in one execute), 64 in flight
//   BM_NodePkReads/20       the same with 20 reads per transaction
//   BM_NodePkReadTrains/20  the same, each transaction's 20 reads in one
//                           TcKeyTrain, answered in one KeyDataTrain (as
//                           the API sends and receives a batch)
//
// --window=N sets the transactions in flight (default 64). With 1, each
// starts when the one before is answered, as latency_bench's serial and
// batched samples do: nothing overlaps one transaction's memory misses with
// another's work, so ns_per_read at 1 M rows against 1,000 rows is what the
// misses add to a batch.
//
// The node is a single-threaded runtime (NDB's ndbd) holding TC(0) and
// LDM(0); a driver block stands in for the API node on the same thread, so
// no transporter is involved and every CPU cycle of the thread is the
// node's (or the driver's, which only encodes requests and counts replies).
// Figures: ns_per_read (the thread's wall time per read while loaded: it
// never waits) and reads_per_s. Every read's KeyData is checked (id and
// length); an error ends the benchmark with its reason.
//
// Under callgrind each measured run is dumped on its own (the driver zeroes
// the counters when it starts and dumps them when the last reply is in),
// which gives instructions per read that do not move with the host's speed:
//   valgrind --tool=callgrind --callgrind-out-file=cg.%p build/latency_bench/node_bench
//     --benchmark_filter=NodePkReads/1 --rows=100000 --reads=200000
//   callgrind_annotate cg.PID.1     (totals of the first measured run)
// Never a test: benchmarks do not fail on time.
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define FJORD_CALLGRIND_START() CALLGRIND_ZERO_STATS
#define FJORD_CALLGRIND_STOP() CALLGRIND_DUMP_STATS
#else
#define FJORD_CALLGRIND_START() ((void)0)
#define FJORD_CALLGRIND_STOP() ((void)0)
#endif

#include "fjord/base/assert.h"
#include "fjord/base/clock.h"
#include "fjord/base/huge_pages.h"
#include "fjord/engine/blocks/ldm.h"
#include "fjord/engine/blocks/tc.h"
#include "fjord/engine/protocol.h"
#include "fjord/engine/runtime/runtime.h"
#include "fjord/engine/storage/page_pool.h"
#include "machine.h"

namespace fjord::engine {
namespace {

using namespace protocol;

uint64_t g_rows = 100000;               // --rows=N
uint64_t g_reads = 2000000;             // --reads=N per measured run
uint32_t g_window = 64;                 // --window=N transactions in flight
constexpr uint32_t kPayloadBytes = 84;  // id 8 + qty 4 + payload 84 + header = 100-byte rows
constexpr NodeId kSelf = 1;
constexpr uint16_t kGo = runtime_signals::kFirstUser + 1;  // words: phase

TableDef bench_table() {
  TableDef t;
  t.name = "node_bench";
  t.table_id = 1;
  t.version = 1;
  t.partitions = 8;
  t.columns = {{"id", ColumnType::kUint64, 0, false},
               {"qty", ColumnType::kInt32, 0, false},
               {"payload", ColumnType::kBinary, kPayloadBytes, false}};
  t.primary_key = {0};
  return t;
}

enum Phase : uint32_t { kInstall, kLoad, kRead };

// The API stand-in: installs the table in TC and LDM, loads the rows, then
// keeps --window transactions in flight, each of `ops_per_tx` reads.
class Driver {
 public:
  // `trains`: each transaction's reads go as one TcKeyTrain (as the API
  // sends a batch), not one TcKeyReq each.
  Driver(const TableDef& t, uint32_t ops_per_tx, bool trains)
      : t_(t), ops_per_tx_(ops_per_tx), trains_(trains), table_bytes_(encode_table(t)) {
    for (std::size_t i = 0; i < payload_.size(); ++i) payload_[i] = std::byte(i * 7);
  }

  void on_signal(const Signal& s, BlockContext& c) {
    switch (s.number()) {
      case kGo: return start(static_cast<Phase>(s.word(0)), c);
      case gsn::kSchemaInstallConf:
        if (++installs_ == 2) finish();
        return;
      case gsn::kKeyData:
      case gsn::kKeyDataConf: return key_data(s, c);
      case gsn::kKeyDataTrain: return key_data_train(s, c);
      case gsn::kTcKeyConf: return tc_key_conf(s, c);
      case gsn::kTcKeyRef: {
        const auto ref = decode_tc_key_ref(s);
        fail(ref ? error_text(ref->error) : "malformed TcKeyRef");
        return;
      }
      default: fail("unexpected signal " + std::to_string(s.number()));
    }
  }

  void prepare(Phase phase, uint64_t count) {
    done.store(false, std::memory_order_relaxed);
    target_ = count;
    phase_ = phase;
  }
  std::atomic<bool> done{false};
  std::string error;  // written by the node's thread before done
  uint64_t completed_reads = 0;

 private:
  void start(Phase phase, BlockContext& c) {
    issued_ = finished_ = 0;
    completed_reads = 0;
    if (phase == kInstall) {
      installs_ = 0;
      const SignalOut out = encode(SchemaInstall{1, t_.table_id, false, table_bytes_});
      c.send({kSelf, {block_numbers::kTc, 0}}, out.number, out.data(), out.section_list());
      c.send({kSelf, {block_numbers::kLdm, 0}}, out.number, out.data(), out.section_list());
      return;
    }
    if (phase == kRead) FJORD_CALLGRIND_START();
    for (uint32_t i = 0; i < g_window; ++i) issue(c);
  }

  void finish() {
    if (phase_ == kRead) FJORD_CALLGRIND_STOP();
    done.store(true, std::memory_order_release);
  }

  void fail(std::string why) {
    if (error.empty()) error = std::move(why);
    finish();
  }

  // One transaction: `ops_per_tx` operations (one insert while loading).
  void issue(BlockContext& c) {
    if (issued_ >= target_) return;
    const uint32_t ops = phase_ == kLoad ? 1 : ops_per_tx_;
    const TxId tx{uint64_t{kSelf} << 48 | ++tx_counter_};
    for (uint32_t i = 0; i < ops; ++i) {
      const uint64_t id = phase_ == kLoad ? issued_ : rng_() % g_rows;
      ++issued_;
      TcKeyReq r;
      r.api_conn = static_cast<uint32_t>(tx_counter_);  // one handle per transaction, as the API gives
      r.tx = tx;
      r.table_id = t_.table_id;
      r.table_version = t_.version;
      r.op = phase_ == kLoad ? OpType::kInsert : OpType::kRead;
      r.lock = LockMode::kCommitted;
      r.flags = (i == 0 ? kFlagStartTx : 0) | (i + 1 == ops ? kFlagExecute | kFlagCommit : 0);
      r.op_index = i;
      r.batch_ops = i + 1 == ops ? ops : 0;
      const std::size_t key_bytes = put_value(key_, 0, false, std::as_bytes(std::span(&id, 1)));
      r.key = std::span(key_).first(key_bytes);
      std::size_t at = 0;
      if (phase_ == kLoad) {
        const int32_t qty = static_cast<int32_t>(id % 1000);
        at += put_value(values_, 1, false, std::as_bytes(std::span(&qty, 1)));
        at += put_value(std::span(values_).subspan(at), 2, false, std::span(payload_));
      }
      r.values = std::span(values_).first(at);
      if (trains_ && ops > 1) {
        const std::size_t n = put_tc_key_train_record(std::span(train_).subspan(train_used_), r);
        if (n == 0) return fail("a transaction's reads outgrew one train");
        train_used_ += n;
        if (i + 1 < ops) continue;
        const SignalOut out = encode(TcKeyTrain{r.api_conn, tx, ops, std::span(train_).first(train_used_)});
        train_used_ = 0;
        c.send({kSelf, {block_numbers::kTc, 0}}, out.number, out.data(), out.section_list());
        continue;
      }
      const SignalOut out = encode(r);
      c.send({kSelf, {block_numbers::kTc, 0}}, out.number, out.data(), out.section_list());
    }
  }

  // The values of one read: id, qty and payload, in column order.
  bool check_values(std::span<const std::byte> values) {
    ValueCursor cursor(values);
    ValueEntry e;
    uint64_t id = 0;
    if (!cursor.next(e) || e.column != 0 || e.bytes.size() != 8) return fail("KeyData without the id first"), false;
    std::memcpy(&id, e.bytes.data(), 8);
    if (id >= g_rows) return fail("KeyData for id " + std::to_string(id) + ", which was never loaded"), false;
    if (!cursor.next(e) || !cursor.next(e) || e.bytes.size() != kPayloadBytes) return fail("KeyData payload"), false;
    ++completed_reads;
    return true;
  }

  void key_data_train(const Signal& s, BlockContext& c) {
    const auto data = decode_key_data_train(s);
    if (!data) return fail("malformed KeyDataTrain: " + data.status().message());
    KeyDataTrainCursor cursor(data->records);
    uint32_t op_index = 0;
    std::span<const std::byte> values;
    while (cursor.next(op_index, values))
      if (!check_values(values)) return;
    if (data->ends_batch) transaction_done(data->batch_ops, c);
  }

  // A read's values: id, qty and payload, in column order; and, with
  // kKeyDataConf, the end of its transaction.
  void key_data(const Signal& s, BlockContext& c) {
    const auto data = decode_key_data(s);
    if (!data) return fail("malformed KeyData: " + data.status().message());
    if (!check_values(data->values)) return;
    if (data->ends_batch) transaction_done(data->batch_ops, c);
  }

  void tc_key_conf(const Signal& s, BlockContext& c) {
    const auto conf = decode_tc_key_conf(s);
    if (!conf || !conf->committed) return fail("TcKeyConf malformed or not committed");
    transaction_done(conf->ops, c);
  }

  void transaction_done(uint32_t ops, BlockContext& c) {
    finished_ += ops;
    if (finished_ >= target_) return finish();
    issue(c);
  }

  const TableDef& t_;
  const uint32_t ops_per_tx_;
  const bool trains_;
  std::vector<std::byte> table_bytes_;
  std::vector<std::byte> train_ = std::vector<std::byte>(kMaxTrainBytes);
  std::size_t train_used_ = 0;
  Phase phase_ = kInstall;
  uint64_t target_ = 0;
  uint64_t issued_ = 0;
  uint64_t finished_ = 0;
  uint64_t tx_counter_ = 0;
  int installs_ = 0;
  std::mt19937_64 rng_{42};
  std::array<std::byte, 32> key_{};
  std::array<std::byte, 256> values_{};
  std::array<std::byte, kPayloadBytes> payload_{};
};

class DriverBlock final : public Block {
 public:
  explicit DriverBlock(Driver& d) : Block(block_numbers::kApi, 0, "API-DRIVER"), d_(d) {}
  void execute(const Signal& s, BlockContext& c) override { d_.on_signal(s, c); }

 private:
  Driver& d_;
};

// Runs one phase to its end; false (with the reason in `why`) on an error.
bool run_phase(Runtime& rt, Driver& d, Phase phase, uint64_t count, std::string& why) {
  d.prepare(phase, count);
  const uint32_t word = phase;
  if (Status st = rt.inject({kSelf, {block_numbers::kApi, 0}}, kGo, {&word, 1}); !st) {
    why = st.to_string();
    return false;
  }
  while (!d.done.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  why = d.error;
  return why.empty();
}

void node_pk_reads(benchmark::State& state, bool trains) {
  const auto ops_per_tx = static_cast<uint32_t>(state.range(0));
  const TableDef table = bench_table();
  storage::PagePoolConfig pool_config{g_rows * 256 + (64 << 20)};
  pool_config.huge_pages = true;  // as the data node's default (DataMemoryHugePages)
  auto pool = storage::PagePool::create(pool_config);
  RuntimeOptions o;
  o.self = kSelf;
  o.single_threaded = true;
  const int cpu = std::thread::hardware_concurrency() > 1 ? 1 : 0;
  o.threads = {ThreadSpec{ThreadType::kMain, 0, {cpu}, ThreadSpec::Binding::kBind, false, false, 1000}};
  o.watchdog_ms = 0;
  auto rt = Runtime::create(o);
  if (!pool || !rt) {
    state.SkipWithError(!pool ? pool.status().to_string().c_str() : rt.status().to_string().c_str());
    return;
  }
  TcOptions tc;
  tc.max_operations = g_window * ops_per_tx * 2;
  LdmOptions ldm;
  ldm.max_operations = g_window * ops_per_tx * 2;
  Driver driver(table, ops_per_tx, trains);
  Status st = (*rt)->add_block(std::make_unique<TcBlock>(tc), ThreadType::kTc, 0);
  if (st) st = (*rt)->add_block(std::make_unique<LdmBlock>(**pool, ldm), ThreadType::kLdm, 0);
  if (st) st = (*rt)->add_block(std::make_unique<DriverBlock>(driver), ThreadType::kMain, 0);
  if (st) st = (*rt)->start();
  if (!st) {
    state.SkipWithError(st.to_string().c_str());
    return;
  }
  std::string why;
  if (!run_phase(**rt, driver, kInstall, 0, why) || !run_phase(**rt, driver, kLoad, g_rows, why)) {
    (*rt)->stop();
    state.SkipWithError(("loading: " + why).c_str());
    return;
  }
  double ns_per_read = 0;
  for (auto _ : state) {
    const uint64_t t0 = monotonic_ns();
    if (!run_phase(**rt, driver, kRead, g_reads, why)) {
      state.SkipWithError(("reading: " + why).c_str());
      break;
    }
    const uint64_t dt = monotonic_ns() - t0;
    if (driver.completed_reads < g_reads) {
      state.SkipWithError("fewer KeyData than reads confirmed");
      break;
    }
    ns_per_read = static_cast<double>(dt) / static_cast<double>(g_reads);
    state.SetIterationTime(static_cast<double>(dt) / 1e9);
  }
  (*rt)->stop();
  state.counters["ns_per_read"] = ns_per_read;
  state.counters["reads_per_s"] = ns_per_read > 0 ? 1e9 / ns_per_read : 0;
}

// An array of trivially copyable T on memory laid out for huge pages, as
// DataMemory is (fjord::map_huge_page_aligned), zero-filled.
template <class T>
class HugeArray {
 public:
  explicit HugeArray(std::size_t n) : bytes_(n * sizeof(T)) {
    std::byte* p = map_huge_page_aligned(bytes_);
    FJORD_ASSERT_MSG(p != nullptr, "node_bench: mmap failed");
    data_ = reinterpret_cast<T*>(p);
  }
  ~HugeArray() { ::munmap(data_, bytes_); }
  HugeArray(const HugeArray&) = delete;
  HugeArray& operator=(const HugeArray&) = delete;
  T& operator[](std::size_t i) { return data_[i]; }

 private:
  std::size_t bytes_;
  T* data_ = nullptr;
};

// The least a key read costs here: the same number of 100-byte rows, an
// open-addressing table of row indexes (load factor 1/2) hashed with the
// engine's hash_key, a key compare and a 100-byte copy out, keys drawn as
// the node benchmark draws them. No locks, no signals, no transactions.
void BM_StorageReadFloor(benchmark::State& state) {
  struct RowBytes {
    uint64_t id;
    std::byte rest[92];
  };
  std::size_t slots = 1;
  while (slots < g_rows * 2) slots <<= 1;
  // On huge pages, as the node's DataMemory.
  HugeArray<RowBytes> rows(g_rows);
  HugeArray<uint32_t> table(slots);
  for (std::size_t i = 0; i < slots; ++i) table[i] = UINT32_MAX;
  for (uint64_t id = 0; id < g_rows; ++id) {
    rows[id].id = id;
    std::memset(rows[id].rest, static_cast<int>(id), sizeof rows[id].rest);
    std::size_t at = hash_key(&id, 8) & (slots - 1);
    while (table[at] != UINT32_MAX) at = (at + 1) & (slots - 1);
    table[at] = static_cast<uint32_t>(id);
  }
  std::mt19937_64 rng{42};
  std::byte out[sizeof(RowBytes)];
  uint64_t found = 0;
  double ns_per_read = 0;
  const auto batch = static_cast<uint64_t>(state.range(0));
  std::vector<uint64_t> ids(batch);
  std::vector<std::size_t> at(batch);
  for (auto _ : state) {
    const uint64_t t0 = monotonic_ns();
    for (uint64_t i = 0; i < g_reads; i += batch) {
      // A batch as a train runs: every key hashed and its slot loaded, then
      // every row loaded, then each read.
      for (uint64_t k = 0; k < batch; ++k) {
        ids[k] = rng() % g_rows;
        at[k] = hash_key(&ids[k], 8) & (slots - 1);
        if (batch > 1) __builtin_prefetch(&table[at[k]]);
      }
      if (batch > 1)
        for (uint64_t k = 0; k < batch; ++k)
          if (table[at[k]] != UINT32_MAX) {
            const auto* row = reinterpret_cast<const std::byte*>(&rows[table[at[k]]]);
            __builtin_prefetch(row);
            __builtin_prefetch(row + sizeof(RowBytes) - 1);
          }
      for (uint64_t k = 0; k < batch; ++k) {
        std::size_t a = at[k];
        while (table[a] != UINT32_MAX && rows[table[a]].id != ids[k]) a = (a + 1) & (slots - 1);
        std::memcpy(out, &rows[table[a]], sizeof out);
        benchmark::DoNotOptimize(out);
        found += table[a] != UINT32_MAX;
      }
    }
    const uint64_t dt = monotonic_ns() - t0;
    ns_per_read = static_cast<double>(dt) / static_cast<double>(g_reads);
    state.SetIterationTime(static_cast<double>(dt) / 1e9);
  }
  if (found != (g_reads + batch - 1) / batch * batch * state.iterations()) state.SkipWithError("a key was not found");
  state.counters["ns_per_read"] = ns_per_read;
}

BENCHMARK(BM_StorageReadFloor)->Arg(1)->Arg(20)->UseManualTime()->Iterations(3);

// What a line from memory costs here, alone and overlapped: the floor under
// a batched read's buckets and rows at 1 M rows. Arg 0: each load's address
// comes from the one before (latency);
// Arg K: K random lines issued together, then the next K (throughput of
// overlapped misses).
void BM_MemoryFloor(benchmark::State& state) {
  constexpr std::size_t kBytes = std::size_t{256} << 20;
  constexpr std::size_t kLines = kBytes / 64;
  HugeArray<uint64_t> words(kBytes / 8);
  std::mt19937_64 rng{7};
  // The chain: every 16th line, in a random order, each holding the next's index.
  std::vector<uint32_t> order(kLines / 16);
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<uint32_t>(i * 16);
  std::shuffle(order.begin(), order.end(), rng);
  for (std::size_t i = 0; i < kLines * 8; ++i) words[i] = 0;
  for (std::size_t i = 0; i < order.size(); ++i) words[std::size_t{order[i]} * 8] = order[(i + 1) % order.size()];
  const auto k = static_cast<uint64_t>(state.range(0));
  constexpr uint64_t kLoads = 2'000'000;
  std::vector<uint64_t> at(std::max<uint64_t>(k, 1));
  uint64_t sink = 0;
  double ns = 0;
  for (auto _ : state) {
    const uint64_t t0 = monotonic_ns();
    if (k == 0) {
      uint64_t line = order[0];
      for (uint64_t i = 0; i < kLoads; ++i) line = words[line * 8];
      sink += line;
    } else {
      for (uint64_t done = 0; done < kLoads; done += k) {
        for (uint64_t j = 0; j < k; ++j) at[j] = rng() % kLines * 8;
        for (uint64_t j = 0; j < k; ++j) sink += words[at[j]];
      }
    }
    const uint64_t dt = monotonic_ns() - t0;
    ns = static_cast<double>(dt) / static_cast<double>(kLoads);
    state.SetIterationTime(static_cast<double>(dt) / 1e9);
  }
  benchmark::DoNotOptimize(sink);
  if (k == 0) {
    state.counters["ns_per_load"] = ns;
  } else {
    state.counters["ns_per_line"] = ns;
    state.counters["ns_per_batch"] = ns * static_cast<double>(k);
  }
}

BENCHMARK(BM_MemoryFloor)->Arg(0)->Arg(20)->Arg(60)->UseManualTime()->Iterations(3);
void BM_NodePkReads(benchmark::State& state) { node_pk_reads(state, false); }
void BM_NodePkReadTrains(benchmark::State& state) { node_pk_reads(state, true); }

BENCHMARK(BM_NodePkReads)->Arg(1)->Arg(20)->UseManualTime()->Iterations(3);
BENCHMARK(BM_NodePkReadTrains)->Arg(20)->UseManualTime()->Iterations(3);

// --rows=N, --reads=N and --window=N, then Google Benchmark's own flags.
void parse_own_flags(int& argc, char** argv) {
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--rows=", 7) == 0)
      g_rows = std::strtoull(argv[i] + 7, nullptr, 10);
    else if (std::strncmp(argv[i], "--reads=", 8) == 0)
      g_reads = std::strtoull(argv[i] + 8, nullptr, 10);
    else if (std::strncmp(argv[i], "--window=", 9) == 0)
      g_window = static_cast<uint32_t>(std::strtoul(argv[i] + 9, nullptr, 10));
    else
      argv[out++] = argv[i];
  }
  argc = out;
  if (g_rows == 0 || g_rows > UINT32_MAX || g_reads == 0 || g_window == 0 || g_window > 1024) {
    std::fprintf(stderr, "node_bench: --rows must be 1..%u, --reads at least 1 and --window 1..1024\n", UINT32_MAX);
    std::exit(2);
  }
}

}  // namespace
}  // namespace fjord::engine

int main(int argc, char** argv) {
  fjord::engine::parse_own_flags(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
