// PagePool: all of a data node's DataMemory, reserved at start-up and handed
// out in fixed 32 KB pages (NDB's page size) to the row stores and indexes of
// every partition. Nothing in storage takes memory from anywhere else, so
// DataMemory bounds rows, indexes and their directories together.
//
// Thread: any. allocate() and free() take a mutex. That is enough: a page
// holds hundreds of rows or index entries, so even a busy LDM thread asks for
// a page a few thousand times a second, and the critical section is a few
// instructions (pop or push on an intrusive free list); a lock-free stack
// would need ABA protection for no measurable gain. address() is lock-free.
// Hot path: address() (one multiply-add); allocate()/free() are warm.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "fjord/base/status.h"

namespace fjord::engine::storage {

using PageId = uint32_t;
inline constexpr PageId kNoPage = UINT32_MAX;

struct PagePoolConfig {
  uint64_t data_memory_bytes = 0;  // rounded down to whole pages
  // Touch every page now (MAP_POPULATE), so no page faults on the data path.
  bool prefault = false;
  // Ask for transparent huge pages (fewer TLB misses on random row access):
  // the pool is mapped by fjord::map_huge_page_aligned(); where the kernel
  // has no THP it keeps 4 KB pages (a warning, not an error).
  bool huge_pages = false;
  // Bind the memory to this NUMA node (needs libnuma); -1: the kernel's choice.
  int numa_node = -1;
};

class PagePool {
 public:
  static constexpr uint32_t kPageBytes = 32 * 1024;
  // PageDirectory keeps a tag in the top bit of a PageId: 64 TB of DataMemory.
  static constexpr uint32_t kMaxPages = (1u << 31) - 1;

  // Maps the memory. Errors: kInvalidArgument (less than one page, or more
  // than kMaxPages), kIoError (mmap failed), kUnavailable (a NUMA
  // node was asked for without libnuma).
  static Result<std::unique_ptr<PagePool>> create(const PagePoolConfig& config);
  ~PagePool();
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  // A page of uninitialised bytes, or kResourceExhausted
  // "DataMemory full: N of M pages in use (DataMemory=...)".
  Result<PageId> allocate();
  // Returns a page from allocate(); freeing twice is a bug (asserted when the
  // page is at the free-list head; otherwise undetected).
  void free(PageId page);

  std::byte* address(PageId page) const {
    FJORD_ASSERT(page < capacity_pages_);
    return base_ + static_cast<std::size_t>(page) * kPageBytes;
  }
  uint32_t pages_in_use() const { return pages_in_use_.load(std::memory_order_relaxed); }
  uint32_t capacity_pages() const { return capacity_pages_; }
  uint64_t data_memory_bytes() const { return data_memory_bytes_; }

 private:
  PagePool(std::byte* base, uint32_t capacity_pages, uint64_t data_memory_bytes);
  Status exhausted() const;

  std::byte* const base_;
  const uint32_t capacity_pages_;
  const uint64_t data_memory_bytes_;  // as configured, for messages

  std::mutex mutex_;
  PageId free_head_ = kNoPage;  // freed pages, linked through their first 4 bytes
  PageId next_untouched_ = 0;   // pages at and above were never handed out
  // Written under mutex_; read without it for statistics only, so relaxed.
  std::atomic<uint32_t> pages_in_use_{0};
};

// "200M", "4G", "32K" or a plain byte count, as DataMemory is written in config.ini.
std::string format_memory_size(uint64_t bytes);

}  // namespace fjord::engine::storage
