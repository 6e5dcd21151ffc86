// BlockArena: fixed-size blocks carved from pool pages, with stable 32-bit
// ids. Rows (RowStore), hash-index overflow buckets and B+tree nodes are all
// blocks of one arena per structure.
//
// Each page starts with a header: counts, a free list threaded through the
// free blocks, links in the arena's list of pages with room, and a bitmap of
// allocated blocks (so scans can skip free slots without reading them).
// A block id is (local page << shift) | index in page; it never changes while
// the block is allocated, and ids grow with page and position, so walking ids
// upwards (next_allocated) is a resumable scan order.
//
// A page whose last block is freed goes back to the pool, unless it is the
// arena's only page with room (so alternating insert/erase at a page
// boundary does not call the pool every time).
//
// Thread: the one thread that owns the structure. Hot path: address()
// (no header read); allocate()/free() are O(1) and call the pool only to take or
// return a whole page; nothing allocates from the heap.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fjord/base/status.h"
#include "fjord/engine/storage/page_directory.h"

namespace fjord::engine::storage {

using BlockId = uint32_t;
inline constexpr BlockId kNoBlock = UINT32_MAX;

class BlockArena {
 public:
  // `block_bytes` >= 4 (a free block holds the free-list link); blocks start
  // at a multiple of `alignment` (a power of two) from the page start.
  BlockArena(PagePool& pool, uint32_t block_bytes, uint32_t alignment);
  BlockArena(const BlockArena&) = delete;
  BlockArena& operator=(const BlockArena&) = delete;

  // A block of unspecified contents; the pool's error when a new page is
  // needed and DataMemory is full, or kResourceExhausted when the arena's ids
  // run out. Nothing changes on error.
  Result<BlockId> allocate();
  void free(BlockId block);

  // The block's memory. Asserts that the id lies in a page the arena holds
  // (so the address is always inside its own memory), not that the block is
  // allocated: that is a bitmap read, a cache miss of its own on every row
  // lookup, and whether an id is live is the owner's invariant (a freed
  // block's id is never handed out by the structures' code). allocated()
  // checks it where a caller wants to know.
  std::byte* address(BlockId block) const {
    FJORD_ASSERT((block & index_mask_) < blocks_per_page_);
    return directory_.address(block >> shift_) + header_bytes_ + (block & index_mask_) * block_bytes_;
  }
  bool allocated(BlockId block) const;
  // The smallest allocated id >= `from`, or kNoBlock.
  BlockId next_allocated(BlockId from) const;

  uint64_t blocks_in_use() const { return blocks_in_use_; }
  uint32_t block_bytes() const { return block_bytes_; }
  uint32_t blocks_per_page() const { return blocks_per_page_; }
  uint32_t data_pages() const { return directory_.data_pages(); }
  // Pool memory held, directory included.
  uint64_t memory_bytes() const { return directory_.memory_bytes(); }
  PagePool& pool() const { return directory_.pool(); }

 private:
  struct PageHeader;
  PageHeader* header(uint32_t local) const;
  uint64_t* bitmap(uint32_t local) const;
  void link_partial(uint32_t local);
  void unlink_partial(uint32_t local);
  Result<uint32_t> add_page();

  PageDirectory directory_;
  const uint32_t block_bytes_;
  uint32_t header_bytes_ = 0;
  uint32_t blocks_per_page_ = 0;
  uint32_t shift_ = 0;
  uint32_t index_mask_ = 0;
  uint32_t max_local_pages_ = 0;
  uint32_t partial_head_;  // local page with free blocks, or kNoLocal
  uint64_t blocks_in_use_ = 0;
};

}  // namespace fjord::engine::storage
