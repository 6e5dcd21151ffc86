// Micro-benchmarks of one partition's storage on one thread: primary-key
// lookup and insert through the hash index, ordered-index seek and range
// scan. 1 M rows of 100 bytes (UINT64 key + 92 bytes), as in the memory
// test. Not a test: it never fails on a time. Run it pinned, e.g.
//   taskset -c 1 build/tests/storage_bench --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <vector>

#include "fjord/engine/key_codec.h"
#include "fjord/engine/row_layout.h"
#include "fjord/engine/storage/hash_index.h"
#include "fjord/engine/storage/key_source.h"
#include "fjord/engine/storage/ordered_index.h"
#include "fjord/engine/storage/page_pool.h"
#include "fjord/engine/storage/row_store.h"

namespace fjord::engine::storage {
namespace {

constexpr uint64_t kRows = 1'000'000;

TableDef bench_table() {
  TableDef def;
  def.name = "bench";
  def.columns = {{"id", ColumnType::kUint64, 0, false}, {"payload", ColumnType::kBinary, 92, false}};
  def.primary_key = {0};
  return def;
}

// One partition: rows, the primary-key hash index and an ordered index on the key.
struct Partition {
  TableDef def = bench_table();
  RowLayout layout = RowLayout::create(def).value();
  KeyCodec pk = KeyCodec::for_primary_key(def);
  // Huge pages: 100 MB of rows touched at random would otherwise miss the TLB on every access.
  std::unique_ptr<PagePool> pool = PagePool::create(PagePoolConfig{512ULL << 20, false, true}).value();
  RowStore rows{*pool, layout.record_bytes()};
  RowKeySource keys{rows, layout, pk};
  HashIndex hash{*pool, keys};
  OrderedIndex ordered{*pool, pk.max_encoded_bytes(), nullptr};
  std::vector<std::byte> record = std::vector<std::byte>(layout.record_bytes());

  Partition() {
    layout.init_record(record);
    const std::string payload(92, 'x');
    FJORD_ASSERT(layout.set(record, 1, ValueRef::of_string(payload)).is_ok());
  }

  void insert(uint64_t id, bool with_ordered) {
    FJORD_ASSERT(layout.set(record, 0, ValueRef::of(id)).is_ok());
    const RowId row = rows.insert(record).value();
    std::array<std::byte, 8> key;
    const uint32_t n = pk.encode_record(layout, record, key);
    FJORD_ASSERT(hash.insert(hash_key(key.data(), n), std::span(key.data(), n), row).is_ok());
    if (with_ordered) FJORD_ASSERT(ordered.insert(std::span(key.data(), n), row).is_ok());
  }

  static std::array<std::byte, 8> encode(const KeyCodec& codec, uint64_t id) {
    std::array<std::byte, 8> key;
    const ValueRef v[] = {ValueRef::of(id)};
    FJORD_ASSERT(codec.encode(v, key).value() == 8);
    return key;
  }
};

Partition& loaded_partition() {
  static Partition* partition = [] {
    auto* p = new Partition();
    for (uint64_t id = 0; id < kRows; ++id) p->insert(id, true);
    return p;
  }();
  return *partition;
}

// 10,000 rows: everything in cache, so the figure is the code's own cost.
Partition& small_partition() {
  static Partition* partition = [] {
    auto* p = new Partition();
    for (uint64_t id = 0; id < 10000; ++id) p->insert(id, true);
    return p;
  }();
  return *partition;
}

// Encode the key, hash it, find the row, read its payload: a pk read.
// state.range(0): rows in the partition.
void BM_PkLookup(benchmark::State& state) {
  const auto rows = static_cast<uint64_t>(state.range(0));
  Partition& p = rows == kRows ? loaded_partition() : small_partition();
  std::mt19937_64 rng(1);
  uint64_t sum = 0;
  for (auto _ : state) {
    const uint64_t id = rng() % rows;
    const std::array<std::byte, 8> key = Partition::encode(p.pk, id);
    const RowId row = p.hash.find(hash_key(key.data(), key.size()), key);
    sum += std::to_integer<uint64_t>(p.rows.get(row)[20]);
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PkLookup)->Arg(10000)->Arg(kRows);

// Row store + hash index insert into a partition that grows to 1 M rows.
void BM_PkInsert(benchmark::State& state) {
  auto p = std::make_unique<Partition>();
  uint64_t id = 0;
  for (auto _ : state) {
    if (id == kRows) {
      state.PauseTiming();
      p = std::make_unique<Partition>();
      id = 0;
      state.ResumeTiming();
    }
    p->insert(id++, false);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PkInsert);

// Seek to a random key and read one entry.
void BM_OrderedSeek(benchmark::State& state) {
  Partition& p = loaded_partition();
  std::mt19937_64 rng(2);
  std::array<RowId, 1> out;
  for (auto _ : state) {
    const std::array<std::byte, 8> key = Partition::encode(p.pk, rng() % kRows);
    OrderedScanCursor cursor;
    cursor.set_lower(key, true);
    benchmark::DoNotOptimize(p.ordered.scan_batch(cursor, out));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_OrderedSeek);

// A bounded range of state.range(0) rows, in batches of 64: rows per second.
void BM_OrderedRange(benchmark::State& state) {
  Partition& p = loaded_partition();
  std::mt19937_64 rng(3);
  const auto width = static_cast<uint64_t>(state.range(0));
  std::array<RowId, 64> out;
  for (auto _ : state) {
    const uint64_t low = rng() % (kRows - width);
    const std::array<std::byte, 8> lower = Partition::encode(p.pk, low);
    const std::array<std::byte, 8> upper = Partition::encode(p.pk, low + width);
    OrderedScanCursor cursor;
    cursor.set_lower(lower, true);
    cursor.set_upper(upper, false);
    while (!cursor.done()) benchmark::DoNotOptimize(p.ordered.scan_batch(cursor, out));
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_OrderedRange)->Arg(100)->Arg(1000);

}  // namespace
}  // namespace fjord::engine::storage

BENCHMARK_MAIN();
