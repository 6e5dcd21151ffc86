// BlockArena: fixed-size blocks in pool pages (see block_arena.h).
#include "fjord/engine/storage/block_arena.h"

#include <bit>
#include <cstring>

namespace fjord::engine::storage {

namespace {
constexpr uint32_t kNoLocal = UINT32_MAX;
constexpr uint32_t kNoIndex = UINT32_MAX;
}  // namespace

struct BlockArena::PageHeader {
  uint32_t used;          // allocated blocks
  uint32_t bump;          // blocks [0, bump) were handed out at least once
  uint32_t free_head;     // a freed block below bump, or kNoIndex
  uint32_t next_partial;  // pages with room, doubly linked
  uint32_t prev_partial;
  uint32_t unused;
  // uint64_t bitmap[] follows: bit set = block allocated
};
static_assert(sizeof(uint32_t) * 6 % alignof(uint64_t) == 0, "the bitmap follows the header aligned");

BlockArena::BlockArena(PagePool& pool, uint32_t block_bytes, uint32_t alignment)
    : directory_(pool), block_bytes_(block_bytes), partial_head_(kNoLocal) {
  FJORD_ASSERT(block_bytes >= sizeof(uint32_t));
  FJORD_ASSERT(std::has_single_bit(alignment));
  FJORD_ASSERT(block_bytes % alignment == 0);
  const auto header_for = [&](uint32_t blocks) {
    const uint32_t raw = sizeof(PageHeader) + 8 * ((blocks + 63) / 64);
    return (raw + alignment - 1) / alignment * alignment;
  };
  uint32_t blocks = (PagePool::kPageBytes - sizeof(PageHeader)) / block_bytes;
  while (blocks > 0 && header_for(blocks) + blocks * block_bytes > PagePool::kPageBytes) --blocks;
  FJORD_ASSERT_MSG(blocks > 0, "a block must fit a page with its header");
  blocks_per_page_ = blocks;
  header_bytes_ = header_for(blocks);
  shift_ = static_cast<uint32_t>(std::bit_width(blocks - 1));
  index_mask_ = (1u << shift_) - 1;
  // Ids must stay below kNoBlock, and local indices within the directory.
  const uint64_t id_pages = (uint64_t{1} << (32 - shift_)) - 1;
  max_local_pages_ = static_cast<uint32_t>(std::min<uint64_t>(id_pages, PageDirectory::kMaxLocalPages));
}

BlockArena::PageHeader* BlockArena::header(uint32_t local) const {
  return reinterpret_cast<PageHeader*>(directory_.address(local));
}

uint64_t* BlockArena::bitmap(uint32_t local) const {
  return reinterpret_cast<uint64_t*>(directory_.address(local) + sizeof(PageHeader));
}

bool BlockArena::allocated(BlockId block) const {
  const uint32_t local = block >> shift_;
  const uint32_t index = block & index_mask_;
  if (!directory_.present(local) || index >= blocks_per_page_) return false;
  return (bitmap(local)[index / 64] >> (index % 64) & 1) != 0;
}

void BlockArena::link_partial(uint32_t local) {
  PageHeader* h = header(local);
  h->prev_partial = kNoLocal;
  h->next_partial = partial_head_;
  if (partial_head_ != kNoLocal) header(partial_head_)->prev_partial = local;
  partial_head_ = local;
}

void BlockArena::unlink_partial(uint32_t local) {
  PageHeader* h = header(local);
  if (h->prev_partial != kNoLocal) {
    header(h->prev_partial)->next_partial = h->next_partial;
  } else {
    partial_head_ = h->next_partial;
  }
  if (h->next_partial != kNoLocal) header(h->next_partial)->prev_partial = h->prev_partial;
}

Result<uint32_t> BlockArena::add_page() {
  Result<uint32_t> local = directory_.add_page();
  if (!local.is_ok()) return local.status();
  if (local.value() >= max_local_pages_) {
    directory_.remove_page(local.value());
    return Status(StatusCode::kResourceExhausted,
                  "a partition structure reached its limit of " + std::to_string(max_local_pages_) + " pages");
  }
  PageHeader* h = header(local.value());
  h->used = 0;
  h->bump = 0;
  h->free_head = kNoIndex;
  std::memset(bitmap(local.value()), 0, header_bytes_ - sizeof(PageHeader));
  link_partial(local.value());
  return local;
}

Result<BlockId> BlockArena::allocate() {
  if (partial_head_ == kNoLocal) {
    Result<uint32_t> added = add_page();
    if (!added.is_ok()) return added.status();
  }
  const uint32_t local = partial_head_;
  PageHeader* h = header(local);
  uint32_t index;
  if (h->free_head != kNoIndex) {
    index = h->free_head;
    std::memcpy(&h->free_head, directory_.address(local) + header_bytes_ + index * block_bytes_, sizeof(uint32_t));
  } else {
    FJORD_ASSERT(h->bump < blocks_per_page_);
    index = h->bump++;
  }
  FJORD_ASSERT((bitmap(local)[index / 64] >> (index % 64) & 1) == 0);
  bitmap(local)[index / 64] |= uint64_t{1} << (index % 64);
  if (++h->used == blocks_per_page_) unlink_partial(local);
  ++blocks_in_use_;
  return (local << shift_) | index;
}

void BlockArena::free(BlockId block) {
  FJORD_ASSERT_MSG(allocated(block), "freeing a block that is not allocated");
  const uint32_t local = block >> shift_;
  const uint32_t index = block & index_mask_;
  PageHeader* h = header(local);
  bitmap(local)[index / 64] &= ~(uint64_t{1} << (index % 64));
  std::memcpy(directory_.address(local) + header_bytes_ + index * block_bytes_, &h->free_head, sizeof(uint32_t));
  h->free_head = index;
  if (h->used-- == blocks_per_page_) link_partial(local);
  --blocks_in_use_;
  // An empty page goes back to the pool unless it is the only one with room.
  if (h->used == 0 && !(partial_head_ == local && h->next_partial == kNoLocal)) {
    unlink_partial(local);
    directory_.remove_page(local);
  }
}

BlockId BlockArena::next_allocated(BlockId from) const {
  if (from == kNoBlock) return kNoBlock;
  uint32_t local = from >> shift_;
  uint32_t index = from & index_mask_;
  for (; local < directory_.end(); ++local, index = 0) {
    if (!directory_.present(local)) continue;
    const uint32_t bump = header(local)->bump;
    const uint64_t* bits = bitmap(local);
    for (uint32_t word = index / 64; word * 64 < bump; ++word) {
      uint64_t w = bits[word];
      if (word == index / 64) w &= ~uint64_t{0} << (index % 64);
      if (w != 0) return (local << shift_) | (word * 64 + static_cast<uint32_t>(std::countr_zero(w)));
    }
  }
  return kNoBlock;
}

}  // namespace fjord::engine::storage
