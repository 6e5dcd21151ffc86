// PageDirectory: one structure's own numbering of the pool pages it holds
// (local page index -> PageId), as NDB maps logical to physical pages. Ids
// stored in rows and index entries are built from local indices, so they stay
// small (32 bits) and the structure can return any page to the pool.
//
// The first kInlinePages entries live in the object (a small partition costs
// no directory page); the rest in pool pages: a root page of leaf pages, each
// leaf holding 8192 PageIds (256 MB of data per leaf page).
//
// Thread: the one thread that owns the structure (an LDM thread owns its
// partitions). Hot path: address() (one or three dependent loads, all in
// cache for a busy structure); add_page/remove_page are warm (a pool call).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "fjord/base/status.h"
#include "fjord/engine/storage/page_pool.h"

namespace fjord::engine::storage {

class PageDirectory {
 public:
  static constexpr uint32_t kInlinePages = 32;
  static constexpr uint32_t kEntriesPerPage = PagePool::kPageBytes / sizeof(PageId);
  static constexpr uint64_t kMaxLocalPages = kInlinePages + uint64_t{kEntriesPerPage} * kEntriesPerPage;

  explicit PageDirectory(PagePool& pool) : pool_(pool) {}
  // Returns every page (data and directory) to the pool.
  ~PageDirectory();
  PageDirectory(const PageDirectory&) = delete;
  PageDirectory& operator=(const PageDirectory&) = delete;

  // Takes a pool page and gives it a local index: a hole left by
  // remove_page() if there is one, else end(). Errors from the pool pass
  // through; nothing changes on error.
  Result<uint32_t> add_page();
  // Returns the page to the pool; its index becomes a hole.
  void remove_page(uint32_t local);

  bool present(uint32_t local) const { return local < end_ && !is_hole(entry(local)); }
  std::byte* address(uint32_t local) const {  // present(local), its entry looked up once
    FJORD_ASSERT(local < end_);
    const PageId page = entry(local);
    FJORD_ASSERT(!is_hole(page));
    return pool_.address(page);
  }
  // One past the highest local index handed out (holes included).
  uint32_t end() const { return end_; }
  uint32_t data_pages() const { return data_pages_; }
  // Pool pages held: data pages plus the directory's own.
  uint64_t memory_bytes() const { return uint64_t{PagePool::kPageBytes} * (data_pages_ + directory_pages_); }
  PagePool& pool() const { return pool_; }

 private:
  // A hole's entry is kHoleTag | the next hole's index (kNoHole ends the list).
  static constexpr PageId kHoleTag = 1u << 31;  // PagePool::kMaxPages keeps real ids below
  static constexpr uint32_t kNoHole = kHoleTag - 1;
  static bool is_hole(PageId value) { return (value & kHoleTag) != 0; }

  PageId entry(uint32_t local) const {
    if (local < kInlinePages) return inline_[local];
    const uint32_t rest = local - kInlinePages;
    const auto* leaf = reinterpret_cast<const PageId*>(pool_.address(root()[rest / kEntriesPerPage]));
    return leaf[rest % kEntriesPerPage];
  }
  PageId& entry_slot(uint32_t local);
  const PageId* root() const { return reinterpret_cast<const PageId*>(pool_.address(root_)); }
  // Makes sure entry_slot(end_) exists (allocating directory pages).
  Status reserve_slot_for_end();

  PagePool& pool_;
  std::array<PageId, kInlinePages> inline_{};
  PageId root_ = kNoPage;
  uint32_t end_ = 0;
  uint32_t hole_head_ = kNoHole;
  uint32_t data_pages_ = 0;
  uint32_t directory_pages_ = 0;
};

}  // namespace fjord::engine::storage
