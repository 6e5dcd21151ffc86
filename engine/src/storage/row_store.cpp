// RowStore: rows in fixed slots of pool pages (see row_store.h).
#include "fjord/engine/storage/row_store.h"

#include <algorithm>
#include <cstring>

namespace fjord::engine::storage {

namespace {
// A slot must hold the arena's free-list link; no alignment: records are
// read and written with memcpy, and packing keeps 100-byte rows at 100 bytes.
uint32_t slot_bytes(uint32_t record_bytes) { return std::max<uint32_t>(record_bytes, sizeof(uint32_t)); }
}  // namespace

RowStore::RowStore(PagePool& pool, uint32_t record_bytes)
    : arena_(pool, slot_bytes(record_bytes), 1), record_bytes_(record_bytes) {
  FJORD_ASSERT(record_bytes > 0);
}

Result<RowId> RowStore::insert(std::span<const std::byte> record) {
  FJORD_ASSERT(record.size() == record_bytes_);
  Result<BlockId> slot = arena_.allocate();
  if (!slot.is_ok()) return slot.status();
  std::memcpy(arena_.address(slot.value()), record.data(), record_bytes_);
  return slot.value();
}

void RowStore::erase(RowId row) { arena_.free(row); }

std::size_t RowStore::scan_batch(RowScanCursor& cursor, std::span<RowId> out) const {
  std::size_t n = 0;
  while (!cursor.at_end && n < out.size()) {
    const RowId row = arena_.next_allocated(cursor.next);
    if (row == kNoRow) {
      cursor.at_end = true;
      break;
    }
    out[n++] = row;
    cursor.next = row + 1;  // kNoRow is never a row, so this cannot wrap
  }
  // A full batch that took the last row says so now: otherwise the caller
  // learns it only from the next, empty, batch (a scan round trip of its
  // own). The row found is where the next batch starts, so nothing is
  // searched twice; a row inserted before it later was not there throughout.
  if (n == out.size() && !cursor.at_end) {
    const RowId after = arena_.next_allocated(cursor.next);
    if (after == kNoRow)
      cursor.at_end = true;
    else
      cursor.next = after;
  }
  return n;
}

}  // namespace fjord::engine::storage
