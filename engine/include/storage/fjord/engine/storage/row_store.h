// RowStore: one partition's rows, in fixed-size slots of pool pages (NDB's
// DBTUP fixed part). A row is a RowLayout record; its RowId is its slot's
// block id, stable for the row's life (rows never move), and the value every
// index stores.
//
// Full-table scans walk RowIds upwards in batches. The cursor is a number
// (the next RowId to look at), never a pointer, so rows may be inserted and
// erased between batches: a row present for the whole scan is returned
// exactly once (its id is fixed and the cursor only moves forward); a row
// inserted or erased during the scan may or may not be returned.
//
// Thread: the LDM thread that owns the partition. Hot path: everything here;
// nothing allocates from the heap (new pages come from the PagePool).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "fjord/base/status.h"
#include "fjord/engine/storage/block_arena.h"

namespace fjord::engine::storage {

using RowId = uint32_t;
inline constexpr RowId kNoRow = kNoBlock;

// Where a full-table scan goes on from. Owned by the scan's caller.
struct RowScanCursor {
  RowId next = 0;       // the next RowId to examine
  bool at_end = false;  // no rows left
  bool done() const { return at_end; }
};

class RowStore {
 public:
  // Rows of `record_bytes` (RowLayout::record_bytes()).
  RowStore(PagePool& pool, uint32_t record_bytes);

  // Copies `record` into a new slot. The pool's "DataMemory full" error when
  // a page is needed and none is left; existing rows are untouched.
  Result<RowId> insert(std::span<const std::byte> record);
  // Frees the slot; the row must exist.
  void erase(RowId row);

  bool contains(RowId row) const { return arena_.allocated(row); }
  std::span<const std::byte> get(RowId row) const { return {arena_.address(row), record_bytes_}; }
  // For in-place updates.
  std::span<std::byte> get_mutable(RowId row) { return {arena_.address(row), record_bytes_}; }

  // Up to out.size() RowIds in ascending order from the cursor; advances it.
  // Returns how many were written. cursor.done() is then true when no row
  // follows the last one returned: always when fewer than out.size() came
  // back, and also when a full batch took the last row.
  std::size_t scan_batch(RowScanCursor& cursor, std::span<RowId> out) const;

  uint64_t row_count() const { return arena_.blocks_in_use(); }
  uint32_t record_bytes() const { return record_bytes_; }
  uint32_t rows_per_page() const { return arena_.blocks_per_page(); }
  // Pool memory held by this store (row pages and their directory).
  uint64_t memory_bytes() const { return arena_.memory_bytes(); }

 private:
  BlockArena arena_;
  const uint32_t record_bytes_;
};

}  // namespace fjord::engine::storage
