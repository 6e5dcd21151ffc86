#include "access_run.h"

#include <cstring>
#include <vector>

#include "fjord/base/clock.h"

namespace fjord::bench {
namespace {

constexpr uint32_t kFullScanBatchRows = 256;  // rows per partition per round of a full scan
constexpr uint32_t kMinRangeBatchRows = 16;

bool read_u64(const api::RowView& row, uint16_t column, uint64_t& out) {
  const engine::ValueRef v = row.value(column);
  if (v.is_null || v.bytes.size() != sizeof out) return false;
  std::memcpy(&out, v.bytes.data(), sizeof out);
  return true;
}

Status wrong_row(const char* what, uint64_t expected_id) {
  return Status(StatusCode::kInternal, std::string(what) + " for row " + std::to_string(expected_id));
}

// One sample of each method. Everything a sample needs is built here once.
class Sampler {
 public:
  Sampler(api::Session& connection, const AccessTable& table, const AccessPlan& plan)
      : conn_(connection), t_(table), plan_(plan), rng_(plan.seed | 1) {
    const uint32_t k = plan.batch;
    keys_.resize(k);
    ids_.resize(k);
    expected_filler_.resize(table.spec.row_bytes - 24);
    range_.table = full_.table = table.table;
    range_.index = table.ordered_index;
    range_.has_lower = range_.has_upper = true;
    range_.lower_inclusive = range_.upper_inclusive = true;
    full_.batch_rows = kFullScanBatchRows;
  }

  // Runs one sample of `method`; `rows` is what it returned (all checked).
  Status run(AccessMethod method, uint64_t& rows) {
    switch (method) {
      case AccessMethod::kSerialPk: return keyed(1, false, rows);
      case AccessMethod::kBatchedPk: return keyed(plan_.batch, false, rows);
      case AccessMethod::kSerialUk: return keyed(1, true, rows);
      case AccessMethod::kBatchedUk: return keyed(plan_.batch, true, rows);
      case AccessMethod::kIndexedEqBound: return range(1, rows);
      case AccessMethod::kIndexRange: return range(plan_.batch, rows);
      case AccessMethod::kFullScan: return full_scan(rows);
      case AccessMethod::kSerialInsert: return insert_one(rows);
      case AccessMethod::kSerialUpdate: return update_one(rows);
    }
    return Status(StatusCode::kInternal, "unknown access method");
  }

  // Time of the last sample's timed part.
  uint64_t last_ns() const { return last_ns_; }

 private:
  uint64_t next_id(uint64_t below) {
    rng_ ^= rng_ << 13;  // xorshift64
    rng_ ^= rng_ >> 7;
    rng_ ^= rng_ << 17;
    return rng_ % below;
  }

  // `count` reads by primary key (or unique key) in one execute(Commit).
  Status keyed(uint32_t count, bool via_unique, uint64_t& rows) {
    for (uint32_t i = 0; i < count; ++i) {
      ids_[i] = next_id(t_.spec.rows);
      if (via_unique)
        keys_[i].set(kUniqueColumn, unique_key_of(ids_[i]));
      else
        keys_[i].set(kIdColumn, ids_[i]);
    }
    const uint64_t start = monotonic_ns();
    api::Transaction& tx =
        via_unique ? conn_.start_transaction() : conn_.start_transaction(t_.table, count == 1 ? &keys_[0] : nullptr);
    for (uint32_t i = 0; i < count; ++i) {
      if (via_unique)
        tx.read_unique(*t_.table, *t_.unique_index, keys_[i]);
      else
        tx.read(*t_.table, keys_[i]);
    }
    const Status s = tx.execute(api::ExecType::kCommit);
    last_ns_ = monotonic_ns() - start;
    Status checked = s;
    for (uint32_t i = 0; checked && i < count; ++i) checked = check_full_row(tx.operation(i), ids_[i]);
    tx.close();
    rows = checked ? count : 0;
    return checked;
  }

  // The row `id` as loaded (keys and filler) into row_.
  void build_row(uint64_t id) {
    fill_filler(id, expected_filler_);
    row_.set(kIdColumn, id).set(kUniqueColumn, unique_key_of(id)).set(kOrderedColumn, id);
    row_.set(kFillerColumn, std::span<const std::byte>(expected_filler_));
  }

  // One insert of a row past the loaded ones, timed; then its untimed delete.
  Status insert_one(uint64_t& rows) {
    const uint64_t id = t_.spec.rows + next_id(t_.spec.rows);
    build_row(id);
    keys_[0].set(kIdColumn, id);
    const uint64_t start = monotonic_ns();
    api::Transaction& tx = conn_.start_transaction(t_.table, &keys_[0]);
    tx.insert(*t_.table, row_);
    const Status s = tx.execute(api::ExecType::kCommit);
    last_ns_ = monotonic_ns() - start;
    tx.close();
    if (!s) return Status(s.code(), "insert of row " + std::to_string(id) + ": " + s.message());
    api::Transaction& undo = conn_.start_transaction(t_.table, &keys_[0]);
    undo.remove(*t_.table, keys_[0]);
    const Status removed = undo.execute(api::ExecType::kCommit);
    undo.close();
    if (!removed)
      return Status(removed.code(), "delete of inserted row " + std::to_string(id) + ": " + removed.message());
    rows = 1;
    return Status::ok();
  }

  // One update by primary key of a random loaded row: its filler, rewritten.
  Status update_one(uint64_t& rows) {
    const uint64_t id = next_id(t_.spec.rows);
    fill_filler(id, expected_filler_);
    keys_[0].set(kIdColumn, id);
    changes_.set(kFillerColumn, std::span<const std::byte>(expected_filler_));
    const uint64_t start = monotonic_ns();
    api::Transaction& tx = conn_.start_transaction(t_.table, &keys_[0]);
    tx.update(*t_.table, keys_[0], changes_);
    const Status s = tx.execute(api::ExecType::kCommit);
    last_ns_ = monotonic_ns() - start;
    tx.close();
    if (!s) return Status(s.code(), "update of row " + std::to_string(id) + ": " + s.message());
    rows = 1;
    return Status::ok();
  }

  Status check_full_row(const api::Operation& op, uint64_t id) {
    if (!op.has_row()) return wrong_row("no values returned", id);
    if (Status s = check_keys(op.row(), id); !s) return s;
    const engine::ValueRef filler = op.value(kFillerColumn);
    fill_filler(id, expected_filler_);
    if (filler.is_null || filler.bytes.size() != expected_filler_.size() ||
        std::memcmp(filler.bytes.data(), expected_filler_.data(), expected_filler_.size()) != 0)
      return wrong_row("wrong filler", id);
    return Status::ok();
  }

  static Status check_keys(const api::RowView& row, uint64_t id) {
    uint64_t got_id = 0, got_unique = 0, got_ordered = 0;
    if (!read_u64(row, kIdColumn, got_id) || got_id != id) return wrong_row("wrong or missing id", id);
    if (!read_u64(row, kUniqueColumn, got_unique) || got_unique != unique_key_of(id))
      return wrong_row("wrong unique key", id);
    if (!read_u64(row, kOrderedColumn, got_ordered) || got_ordered != id) return wrong_row("wrong ordered key", id);
    return Status::ok();
  }

  // An ordered-index scan over [x, x+count-1]: count rows, x .. x+count-1
  // in some order (partitions answer in parallel).
  Status range(uint32_t count, uint64_t& rows) {
    const uint64_t first = next_id(t_.spec.rows - count + 1);
    range_.lower.set(kOrderedColumn, first);
    range_.upper.set(kOrderedColumn, first + count - 1);
    range_.batch_rows = std::max(count, kMinRangeBatchRows);
    const uint64_t start = monotonic_ns();
    auto scan = conn_.scan(range_);
    if (!scan) return scan.status();
    api::RowView row;
    uint64_t seen = 0, id_sum = 0;
    Status checked;
    while ((*scan)->next(row)) {
      uint64_t id = 0;
      if (!read_u64(row, kIdColumn, id) || id < first || id >= first + count) {
        checked = wrong_row("row outside the bound in an index scan from", first);
        break;
      }
      if (checked) checked = check_keys(row, id);
      id_sum += id;
      ++seen;
    }
    Status status = (*scan)->status();
    (*scan)->close();
    last_ns_ = monotonic_ns() - start;
    if (!status) return status;
    if (!checked) return checked;
    const uint64_t expected_sum = count * first + uint64_t{count} * (count - 1) / 2;
    if (seen != count || id_sum != expected_sum)
      return Status(StatusCode::kInternal, "index scan over [" + std::to_string(first) + ", " +
                                               std::to_string(first + count - 1) + "] returned " +
                                               std::to_string(seen) + " rows, expected " + std::to_string(count));
    rows = seen;
    return Status::ok();
  }

  Status full_scan(uint64_t& rows) {
    const uint64_t start = monotonic_ns();
    auto scan = conn_.scan(full_);
    if (!scan) return scan.status();
    api::RowView row;
    uint64_t seen = 0, id_sum = 0;
    while ((*scan)->next(row)) {
      uint64_t id = 0, ordered = 0;
      (void)read_u64(row, kIdColumn, id);
      (void)read_u64(row, kOrderedColumn, ordered);
      id_sum += id + (ordered ^ id);  // a wrong ordered key changes the sum
      ++seen;
    }
    Status status = (*scan)->status();
    (*scan)->close();
    last_ns_ = monotonic_ns() - start;
    if (!status) return status;
    const uint64_t n = t_.spec.rows;
    if (seen != n || id_sum != n * (n - 1) / 2)
      return Status(StatusCode::kInternal, "full scan returned " + std::to_string(seen) + " rows (id sum " +
                                               std::to_string(id_sum) + "), expected " + std::to_string(n));
    rows = seen;
    return Status::ok();
  }

  api::Session& conn_;
  const AccessTable& t_;
  const AccessPlan plan_;
  uint64_t rng_;
  std::vector<api::Row> keys_;
  api::Row row_;      // the row an insert writes
  api::Row changes_;  // the columns an update writes
  std::vector<uint64_t> ids_;
  std::vector<std::byte> expected_filler_;
  api::ScanSpec range_;
  api::ScanSpec full_;
  uint64_t last_ns_ = 0;
};

}  // namespace

const char* access_method_key(AccessMethod method) noexcept {
  switch (method) {
    case AccessMethod::kSerialPk: return "serial_pk";
    case AccessMethod::kBatchedPk: return "batched_pk";
    case AccessMethod::kSerialUk: return "serial_uk";
    case AccessMethod::kBatchedUk: return "batched_uk";
    case AccessMethod::kIndexedEqBound: return "indexed_eq_bound";
    case AccessMethod::kIndexRange: return "index_range";
    case AccessMethod::kFullScan: return "full_scan";
    case AccessMethod::kSerialInsert: return "serial_insert";
    case AccessMethod::kSerialUpdate: return "serial_update";
  }
  return "?";
}

const char* access_method_label(AccessMethod method) noexcept {
  switch (method) {
    case AccessMethod::kSerialPk: return "Serial pk access";
    case AccessMethod::kBatchedPk: return "Batched pk access";
    case AccessMethod::kSerialUk: return "Serial uk access";
    case AccessMethod::kBatchedUk: return "Batched uk access";
    case AccessMethod::kIndexedEqBound: return "Indexed eq-bound";
    case AccessMethod::kIndexRange: return "Index range";
    case AccessMethod::kFullScan: return "Full table scan";
    case AccessMethod::kSerialInsert: return "Serial pk insert";
    case AccessMethod::kSerialUpdate: return "Serial pk update";
  }
  return "?";
}

ReferenceFigure reference_figure(AccessMethod method) noexcept {
  switch (method) {
    case AccessMethod::kSerialPk: return {true, 400, 160};
    case AccessMethod::kBatchedPk: return {true, 28, 22};
    case AccessMethod::kSerialUk: return {true, 500, 250};
    case AccessMethod::kBatchedUk: return {true, 70, 36};
    case AccessMethod::kIndexedEqBound: return {true, 1250, 750};
    case AccessMethod::kIndexRange: return {true, 24, 12};
    case AccessMethod::kFullScan:
    case AccessMethod::kSerialInsert:
    case AccessMethod::kSerialUpdate: return {};
  }
  return {};
}

uint64_t rows_per_sample(AccessMethod method, uint32_t batch, uint64_t table_rows) noexcept {
  switch (method) {
    case AccessMethod::kSerialPk:
    case AccessMethod::kSerialUk:
    case AccessMethod::kIndexedEqBound:
    case AccessMethod::kSerialInsert:
    case AccessMethod::kSerialUpdate: return 1;
    case AccessMethod::kBatchedPk:
    case AccessMethod::kBatchedUk:
    case AccessMethod::kIndexRange: return batch;
    case AccessMethod::kFullScan: return table_rows;
  }
  return 1;
}

MethodResult measure_access_method(api::Session& connection, const AccessTable& table, AccessMethod method,
                                   const AccessPlan& plan, Progress& progress) {
  MethodResult r;
  r.method = method;
  r.rows_per_sample =
      static_cast<uint32_t>(std::min<uint64_t>(rows_per_sample(method, plan.batch, table.spec.rows), UINT32_MAX));
  Sampler sampler(connection, table, plan);
  const bool full = method == AccessMethod::kFullScan;
  const uint64_t warmup = full ? 1 : plan.warmup;
  const uint64_t samples = full ? plan.full_scans : plan.iterations;
  uint64_t rows = 0;
  for (uint64_t i = 0; i < warmup; ++i)
    if (r.status = sampler.run(method, rows); !r.status) return r;
  progress.begin(std::string(access_method_label(method)), samples);
  const CpuMeter meter;
  const uint64_t start = monotonic_ns();
  for (uint64_t i = 0; i < samples; ++i) {
    r.status = sampler.run(method, rows);
    if (!r.status) break;
    r.per_row_ns.record(sampler.last_ns() / rows);
    r.rows += rows;
    ++r.samples;
    progress.update(i + 1);
  }
  r.elapsed_ns = monotonic_ns() - start;
  r.usage = meter.read();
  progress.clear();
  return r;
}

}  // namespace fjord::bench
