// PageDirectory: local page index -> pool page (see page_directory.h).
#include "fjord/engine/storage/page_directory.h"

#include <cstring>

namespace fjord::engine::storage {

PageDirectory::~PageDirectory() {
  for (uint32_t local = 0; local < end_; ++local) {
    if (present(local)) pool_.free(entry(local));
  }
  if (root_ == kNoPage) return;
  for (uint32_t i = 0; i < kEntriesPerPage && root()[i] != kNoPage; ++i) pool_.free(root()[i]);
  pool_.free(root_);
}

PageId& PageDirectory::entry_slot(uint32_t local) {
  if (local < kInlinePages) return inline_[local];
  const uint32_t rest = local - kInlinePages;
  auto* leaf = reinterpret_cast<PageId*>(pool_.address(root()[rest / kEntriesPerPage]));
  return leaf[rest % kEntriesPerPage];
}

Status PageDirectory::reserve_slot_for_end() {
  if (end_ < kInlinePages) return Status::ok();
  if (end_ >= kMaxLocalPages - 1) {
    return Status(StatusCode::kResourceExhausted,
                  "a partition structure reached its limit of " + std::to_string(kMaxLocalPages) + " pages");
  }
  if (root_ == kNoPage) {
    Result<PageId> root = pool_.allocate();
    if (!root.is_ok()) return root.status();
    root_ = root.value();
    std::memset(pool_.address(root_), 0xFF, PagePool::kPageBytes);  // every leaf kNoPage
    ++directory_pages_;
  }
  const uint32_t rest = end_ - kInlinePages;
  if (root()[rest / kEntriesPerPage] != kNoPage) return Status::ok();  // the leaf exists
  Result<PageId> leaf = pool_.allocate();
  if (!leaf.is_ok()) return leaf.status();
  reinterpret_cast<PageId*>(pool_.address(root_))[rest / kEntriesPerPage] = leaf.value();
  ++directory_pages_;
  return Status::ok();
}

Result<uint32_t> PageDirectory::add_page() {
  if (hole_head_ == kNoHole) {
    if (Status s = reserve_slot_for_end(); !s) return s;
  }
  Result<PageId> page = pool_.allocate();
  if (!page.is_ok()) return page.status();
  uint32_t local = hole_head_;
  if (local != kNoHole) {
    hole_head_ = entry(local) & ~kHoleTag;
  } else {
    local = end_++;
  }
  entry_slot(local) = page.value();
  ++data_pages_;
  return local;
}

void PageDirectory::remove_page(uint32_t local) {
  FJORD_ASSERT(present(local));
  pool_.free(entry(local));
  entry_slot(local) = kHoleTag | hole_head_;
  hole_head_ = local;
  --data_pages_;
}

}  // namespace fjord::engine::storage
