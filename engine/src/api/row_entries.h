// API internals: a Row's own value entries (protocol.h's format, written by
// protocol::put_value) read back without checks but a bounds assertion
// (a RowView's, which come from outside, go through protocol::ValueCursor).
// The thread that owns the Row; hot path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "fjord/base/assert.h"
#include "fjord/engine/protocol.h"

namespace fjord::api::detail {

// An entry's header: u16 column, u16 flags, u32 length (protocol.h).
inline constexpr std::size_t kEntryHeaderBytes = 8;

struct RowEntry {
  std::size_t offset = 0;       // where the entry starts in the Row's bytes
  std::size_t entry_bytes = 0;  // its whole length: header, value and padding
  uint16_t column = 0;
  bool is_null = false;
  std::span<const std::byte> value;  // empty when NULL
};

// The entry at `at` of a Row's entries, moving `at` past it; false at the end.
inline bool next_row_entry(std::span<const std::byte> entries, std::size_t& at, RowEntry& out) {
  if (at >= entries.size()) return false;
  uint16_t flags;
  uint32_t length;
  std::memcpy(&out.column, entries.data() + at, 2);
  std::memcpy(&flags, entries.data() + at + 2, 2);
  std::memcpy(&length, entries.data() + at + 4, 4);
  out.offset = at;
  out.entry_bytes = engine::protocol::value_entry_bytes(length);
  FJORD_ASSERT(at + out.entry_bytes <= entries.size());
  out.is_null = flags != 0;
  out.value = entries.subspan(at + kEntryHeaderBytes, length);
  at += out.entry_bytes;
  return true;
}

}  // namespace fjord::api::detail
