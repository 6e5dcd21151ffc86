#include "access_table.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "fjord/base/clock.h"

namespace fjord::bench {
namespace {

// Insert transactions carry about this many bytes of rows (and at most
// kMaxLoadRows rows): big enough that the load is quick, well inside the
// default 2 MB send buffer and the TC's operation records (each insert also
// writes the hidden unique-index table).
constexpr uint64_t kLoadTransactionBytes = 256 * 1024;
constexpr uint32_t kMaxLoadRows = 256;

const engine::IndexDef* index_named(const engine::TableDef& table, std::string_view name) {
  for (const engine::IndexDef& index : table.indexes)
    if (index.name == name) return &index;
  return nullptr;
}

Result<AccessTable> with_indexes(const engine::TableDef* table, const AccessTableSpec& spec) {
  AccessTable t;
  t.table = table;
  t.spec = spec;
  t.unique_index = index_named(*table, "uk_idx");
  t.ordered_index = index_named(*table, "ord_idx");
  if (!t.unique_index || !t.ordered_index || table->columns.size() != 4)
    return Status(StatusCode::kInvalidArgument,
                  "table " + spec.name +
                      " exists but is not latency_bench's (columns id, uk, ord, filler; indexes "
                      "uk_idx, ord_idx)");
  return t;
}

}  // namespace

engine::TableDef access_table_def(const AccessTableSpec& spec) {
  FJORD_ASSERT(spec.row_bytes > 24);
  engine::TableDef t;
  t.name = spec.name;
  t.columns = {{"id", engine::ColumnType::kUint64, 0, false},
               {"uk", engine::ColumnType::kUint64, 0, false},
               {"ord", engine::ColumnType::kUint64, 0, false},
               {"filler", engine::ColumnType::kBinary, spec.row_bytes - 24, false}};
  t.primary_key = {kIdColumn};
  t.indexes = {{"uk_idx", engine::IndexKind::kUnique, {kUniqueColumn}, 0},
               {"ord_idx", engine::IndexKind::kOrdered, {kOrderedColumn}, 0}};
  return t;
}

void fill_filler(uint64_t id, std::span<std::byte> filler) noexcept {
  std::byte pattern[8];
  std::memcpy(pattern, &id, sizeof pattern);
  for (std::size_t i = 0; i < filler.size(); ++i) filler[i] = pattern[i % sizeof pattern];
}

Result<AccessTable> create_access_table(api::Connection& connection, const AccessTableSpec& spec) {
  if (connection.get_table(spec.name)) {
    if (Status s = connection.drop_table(spec.name); !s) return s;
  }
  auto table = connection.create_table(access_table_def(spec));
  if (!table) return Status(table.status().code(), "creating table " + spec.name + ": " + table.status().message());
  return with_indexes(*table, spec);
}

Result<AccessTable> describe_access_table(api::Session& connection, const AccessTableSpec& spec) {
  auto table = connection.get_table(spec.name);
  if (!table) return table.status();
  return with_indexes(*table, spec);
}

Result<LoadResult> load_access_table(api::Connection& connection, const AccessTable& t, Progress& progress) {
  const uint64_t rows = t.spec.rows;
  const uint32_t filler_bytes = t.spec.row_bytes - 24;
  LoadResult result;
  result.rows_per_transaction =
      static_cast<uint32_t>(std::clamp<uint64_t>(kLoadTransactionBytes / t.spec.row_bytes, 1, kMaxLoadRows));
  std::vector<std::byte> filler(filler_bytes);
  api::Row row;
  progress.begin("loading " + std::to_string(rows) + " rows", rows);
  const uint64_t start = monotonic_ns();
  for (uint64_t first = 0; first < rows; first += result.rows_per_transaction) {
    const uint64_t end = std::min(rows, first + result.rows_per_transaction);
    api::Transaction& tx = connection.start_transaction();
    for (uint64_t id = first; id < end; ++id) {
      fill_filler(id, filler);
      row.set(kIdColumn, id).set(kUniqueColumn, unique_key_of(id)).set(kOrderedColumn, id);
      row.set(kFillerColumn, std::span<const std::byte>(filler));
      tx.insert(*t.table, row);
    }
    const Status s = tx.execute(api::ExecType::kCommit);
    tx.close();
    if (!s)
      return Status(s.code(),
                    "loading rows " + std::to_string(first) + ".." + std::to_string(end - 1) + ": " + s.message());
    progress.update(end);
  }
  result.elapsed_ns = monotonic_ns() - start;
  result.rows = rows;
  progress.clear();
  return result;
}

}  // namespace fjord::bench
