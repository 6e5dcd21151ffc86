// The fixed-size record format of a table's rows.
//
//   [null bitmap: one bit per nullable column, in column order]
//   [one slot per column, in column order:
//      integers: their width, little-endian
//      BINARY/CHAR: `length` bytes
//      VARBINARY/VARCHAR: 2-byte little-endian length, then `length` bytes]
//
// Every record of a table has the same size, so a row store keeps rows in
// fixed slots and a row never moves (no var part, no compaction). A NULL
// column's slot holds zeros. No alignment padding: slots are read and written
// with memcpy.
//
// Thread: any (immutable once built). Hot path: get/set allocate nothing
// unless set returns an error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fjord/base/assert.h"
#include "fjord/base/status.h"
#include "fjord/engine/key_codec.h"
#include "fjord/engine/schema.h"

namespace fjord::engine {

// The largest record (NDB's limit for a row's fixed part is about 30 KB); a
// record must fit one 32 KB page of the row store.
inline constexpr uint32_t kMaxRecordBytes = 30000;

class RowLayout {
 public:
  // Record size of `table` (which need not be valid; large values saturate).
  static uint64_t record_bytes_for(const TableDef& table) noexcept;
  // The layout of a table that passes validate_table().
  static Result<RowLayout> create(const TableDef& table);

  uint32_t record_bytes() const { return record_bytes_; }
  uint32_t column_count() const { return static_cast<uint32_t>(slots_.size()); }
  const ColumnDef& column(uint32_t column) const;

  // Writes an empty record: nullable columns NULL, the others zero (or empty).
  void init_record(std::span<std::byte> record) const;

  // The column's value, borrowing the record's bytes. Asserts that the record
  // has record_bytes() bytes and the column exists. Inline over a compact
  // copy of the slots: every column a read returns passes through it.
  ValueRef get(std::span<const std::byte> record, uint32_t column) const {
    FJORD_ASSERT(record.size() == record_bytes_);
    FJORD_ASSERT(column < reads_.size());
    const ReadSlot& slot = reads_[column];
    if (slot.null_bit >= 0 &&
        (std::to_integer<unsigned>(record[static_cast<uint32_t>(slot.null_bit) / 8]) >> (slot.null_bit % 8) & 1u) != 0)
      return ValueRef::null();
    const std::byte* start = record.data() + slot.offset;
    if (!slot.variable) return ValueRef::of_bytes({start, slot.length});
    const auto length =
        static_cast<uint16_t>(std::to_integer<uint16_t>(start[0]) | (std::to_integer<uint16_t>(start[1]) << 8));
    FJORD_ASSERT_MSG(length <= slot.length, "corrupt record: var length beyond the column");
    return ValueRef::of_bytes({start + 2, length});
  }
  // Where a fixed-size NOT NULL column's bytes lie in every record (its
  // value is always exactly these): false for any other column.
  bool fixed_slot(uint32_t column, uint32_t& offset, uint32_t& length) const {
    FJORD_ASSERT(column < reads_.size());
    const ReadSlot& slot = reads_[column];
    if (slot.variable || slot.null_bit >= 0) return false;
    offset = slot.offset;
    length = slot.length;
    return true;
  }
  // Sets the column; an unfitting value (check_value) is an error and leaves
  // the record unchanged.
  Status set(std::span<std::byte> record, uint32_t column, const ValueRef& value) const;

 private:
  struct Slot {
    ColumnDef def;
    uint32_t offset = 0;    // of the slot within the record
    int32_t null_bit = -1;  // bit in the null bitmap, -1 if not nullable
  };
  // What get() needs of a slot, 16 bytes (a Slot carries the column's name).
  struct ReadSlot {
    uint32_t offset = 0;
    uint32_t length = 0;  // fixed: the slot's bytes; variable: the most after the 2-byte length
    int32_t null_bit = -1;
    bool variable = false;
  };
  RowLayout() = default;

  bool is_null(std::span<const std::byte> record, const Slot& slot) const;
  void set_null(std::span<std::byte> record, const Slot& slot, bool null) const;

  std::string owner_;  // "table 't1'"
  std::vector<Slot> slots_;
  std::vector<ReadSlot> reads_;  // one per slot
  uint32_t record_bytes_ = 0;
};

}  // namespace fjord::engine
