// The fixed-size record format (see row_layout.h).
#include "fjord/engine/row_layout.h"

#include <cstring>

#include "fjord/base/assert.h"

namespace fjord::engine {

namespace {

constexpr uint32_t kVarLengthBytes = 2;  // RowLayout::get() reads it inline
static_assert(kMaxColumnBytes < (1u << (8 * kVarLengthBytes)), "a var length must fit its length field");

uint64_t slot_bytes(const ColumnDef& column) {
  if (const uint32_t width = integer_width(column.type); width != 0) return width;
  return is_variable_length(column.type) ? kVarLengthBytes + uint64_t{column.length} : column.length;
}

uint64_t null_bitmap_bytes(const TableDef& table) {
  uint64_t nullable = 0;
  for (const ColumnDef& column : table.columns) nullable += column.nullable ? 1 : 0;
  return (nullable + 7) / 8;
}

}  // namespace

uint64_t RowLayout::record_bytes_for(const TableDef& table) noexcept {
  uint64_t bytes = null_bitmap_bytes(table);
  for (const ColumnDef& column : table.columns) bytes += slot_bytes(column);
  return bytes;
}

Result<RowLayout> RowLayout::create(const TableDef& table) {
  if (Status s = validate_table(table); !s) return s;
  RowLayout layout;
  layout.owner_ = "table '" + table.name + "'";
  uint32_t offset = static_cast<uint32_t>(null_bitmap_bytes(table));
  int32_t null_bit = 0;
  for (const ColumnDef& column : table.columns) {
    Slot slot{column, offset, column.nullable ? null_bit++ : -1};
    if (integer_width(column.type) != 0) slot.def.length = integer_width(column.type);
    offset += static_cast<uint32_t>(slot_bytes(column));
    layout.reads_.push_back({slot.offset, slot.def.length, slot.null_bit, is_variable_length(column.type)});
    layout.slots_.push_back(std::move(slot));
  }
  layout.record_bytes_ = offset;
  FJORD_ASSERT(layout.record_bytes_ == record_bytes_for(table));
  return layout;
}

const ColumnDef& RowLayout::column(uint32_t column) const {
  FJORD_ASSERT(column < slots_.size());
  return slots_[column].def;
}

bool RowLayout::is_null(std::span<const std::byte> record, const Slot& slot) const {
  if (slot.null_bit < 0) return false;
  const auto bit = static_cast<uint32_t>(slot.null_bit);
  return (std::to_integer<unsigned>(record[bit / 8]) >> (bit % 8) & 1u) != 0;
}

void RowLayout::set_null(std::span<std::byte> record, const Slot& slot, bool null) const {
  FJORD_ASSERT(slot.null_bit >= 0 || !null);
  if (slot.null_bit < 0) return;
  const auto bit = static_cast<uint32_t>(slot.null_bit);
  const auto mask = static_cast<std::byte>(1u << (bit % 8));
  record[bit / 8] = null ? (record[bit / 8] | mask) : (record[bit / 8] & ~mask);
}

void RowLayout::init_record(std::span<std::byte> record) const {
  FJORD_ASSERT(record.size() == record_bytes_);
  std::memset(record.data(), 0, record.size());
  for (const Slot& slot : slots_) set_null(record, slot, slot.def.nullable);
}

Status RowLayout::set(std::span<std::byte> record, uint32_t column, const ValueRef& value) const {
  FJORD_ASSERT(record.size() == record_bytes_);
  FJORD_ASSERT(column < slots_.size());
  const Slot& slot = slots_[column];
  if (Status s = check_value(slot.def, value, owner_); !s) return s;
  std::byte* start = record.data() + slot.offset;
  const uint32_t size = static_cast<uint32_t>(slot_bytes(slot.def));
  std::memset(start, 0, size);  // NULLs and short var values leave zeros behind
  set_null(record, slot, value.is_null);
  if (value.is_null || value.bytes.empty()) return Status::ok();
  if (is_variable_length(slot.def.type)) {
    const auto length = static_cast<uint16_t>(value.bytes.size());
    start[0] = static_cast<std::byte>(length & 0xFF);
    start[1] = static_cast<std::byte>(length >> 8);
    start += kVarLengthBytes;
  }
  std::memcpy(start, value.bytes.data(), value.bytes.size());
  return Status::ok();
}

}  // namespace fjord::engine
