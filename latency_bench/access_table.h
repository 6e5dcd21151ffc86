// The table the access and throughput commands read (NDB testReadPerf's
// table in spirit): rows of --row-bytes bytes,
//
//   id      BIGINT UNSIGNED  primary key, 0 .. rows-1
//   uk      BIGINT UNSIGNED  unique index "uk_idx": unique_key_of(id), a bijection that scatters
//   ord     BIGINT UNSIGNED  ordered index "ord_idx": equal to id, so [x, x+K) holds K rows
//   filler  BINARY(row_bytes - 24)  bytes derived from id (checked on read)
//
// created afresh (an old table of the same name is dropped) and loaded in
// transactions of many inserts.
//
// Slow path; the thread that owns the Connection.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "fjord/api/api.h"
#include "progress.h"

namespace fjord::bench {

inline constexpr uint16_t kIdColumn = 0;
inline constexpr uint16_t kUniqueColumn = 1;
inline constexpr uint16_t kOrderedColumn = 2;
inline constexpr uint16_t kFillerColumn = 3;
inline constexpr const char* kAccessTableName = "latency_bench_access";

struct AccessTableSpec {
  std::string name = kAccessTableName;
  uint64_t rows = 100'000;
  uint32_t row_bytes = 100;  // 24 bytes of keys plus the filler
};

engine::TableDef access_table_def(const AccessTableSpec& spec);

// Odd multiplier: a bijection on 64-bit integers, so every row has its own
// unique key and neighbouring ids land far apart in the unique index.
constexpr uint64_t unique_key_of(uint64_t id) noexcept { return id * 0x9E3779B97F4A7C15ULL; }
// The filler of row `id`: its 8 bytes repeated (so a read can be checked).
void fill_filler(uint64_t id, std::span<std::byte> filler) noexcept;

struct AccessTable {
  const engine::TableDef* table = nullptr;  // owned by the Connection that created or described it
  const engine::IndexDef* unique_index = nullptr;
  const engine::IndexDef* ordered_index = nullptr;
  AccessTableSpec spec;
};

// Drops an old table of the same name, creates the table.
Result<AccessTable> create_access_table(api::Connection& connection, const AccessTableSpec& spec);
// The table as another connection sees it (get_table), with its indexes.
Result<AccessTable> describe_access_table(api::Session& connection, const AccessTableSpec& spec);

struct LoadResult {
  uint64_t rows = 0;
  uint64_t elapsed_ns = 0;
  uint32_t rows_per_transaction = 0;
};
// Inserts rows 0 .. rows-1, many per transaction.
Result<LoadResult> load_access_table(api::Connection& connection, const AccessTable& table, Progress& progress);

}  // namespace fjord::bench
