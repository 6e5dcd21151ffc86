// PagePool: DataMemory in 32 KB pages (see page_pool.h).
#include "fjord/engine/storage/page_pool.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "fjord/base/assert.h"
#include "fjord/base/huge_pages.h"
#include "fjord/base/log.h"

#if defined(FJORD_HAVE_NUMA)
#include <numa.h>
#endif

namespace fjord::engine::storage {

std::string format_memory_size(uint64_t bytes) {
  constexpr uint64_t kK = 1024, kM = kK * 1024, kG = kM * 1024;
  if (bytes != 0 && bytes % kG == 0) return std::to_string(bytes / kG) + "G";
  if (bytes != 0 && bytes % kM == 0) return std::to_string(bytes / kM) + "M";
  if (bytes != 0 && bytes % kK == 0) return std::to_string(bytes / kK) + "K";
  return std::to_string(bytes);
}

namespace {

Status bind_to_numa_node(void* base, std::size_t bytes, int node) {
#if defined(FJORD_HAVE_NUMA)
  if (numa_available() < 0) return Status(StatusCode::kUnavailable, "DataMemory: NUMA is not available here");
  if (node > numa_max_node()) {
    return Status(StatusCode::kInvalidArgument, "DataMemory: NUMA node " + std::to_string(node) +
                                                    " does not exist (highest is " + std::to_string(numa_max_node()) +
                                                    ")");
  }
  numa_tonode_memory(base, bytes, node);
  return Status::ok();
#else
  (void)base;
  (void)bytes;
  return Status(StatusCode::kUnavailable,
                "DataMemory: NUMA node " + std::to_string(node) + " asked for, but built without libnuma");
#endif
}

}  // namespace

Result<std::unique_ptr<PagePool>> PagePool::create(const PagePoolConfig& config) {
  const uint64_t pages = config.data_memory_bytes / kPageBytes;
  if (pages == 0) {
    return Status(StatusCode::kInvalidArgument, "DataMemory=" + format_memory_size(config.data_memory_bytes) +
                                                    " is less than one " + std::to_string(kPageBytes) + "-byte page");
  }
  if (pages > kMaxPages) {
    return Status(StatusCode::kInvalidArgument, "DataMemory=" + format_memory_size(config.data_memory_bytes) +
                                                    " is more than " + std::to_string(kMaxPages) + " pages of " +
                                                    std::to_string(kPageBytes) + " bytes");
  }
  const std::size_t bytes = static_cast<std::size_t>(pages) * kPageBytes;
  // NORESERVE unless prefaulting: the pool's own free list bounds use, and
  // the kernel need not set swap aside for pages never touched.
  bool advised = false;
  std::byte* base = nullptr;
  if (config.huge_pages) {
    base = map_huge_page_aligned(bytes, &advised);
  } else {
    const int flags = MAP_PRIVATE | MAP_ANONYMOUS | (config.prefault ? MAP_POPULATE : MAP_NORESERVE);
    void* mapped = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (mapped != MAP_FAILED) base = static_cast<std::byte*>(mapped);
  }
  if (base == nullptr) return io_error("DataMemory: mmap of " + format_memory_size(config.data_memory_bytes), errno);
  if (config.huge_pages) {
    // Not fatal: a kernel without THP keeps 4 KB pages.
    if (!advised)
      FJORD_LOG_WARN("DataMemory: madvise(MADV_HUGEPAGE) failed, keeping 4 KB pages: %s", std::strerror(errno));
    // Populated only now, after the advice, or the faults would take 4 KB pages.
    if (config.prefault && ::madvise(base, bytes, MADV_POPULATE_WRITE) != 0) {
      const int err = errno;
      if (err != EINVAL) {  // EINVAL: a kernel before 5.14; touch the pages instead
        ::munmap(base, bytes);
        return io_error("DataMemory: populating " + format_memory_size(config.data_memory_bytes), err);
      }
      for (std::size_t at = 0; at < bytes; at += 4096) base[at] = std::byte{0};
    }
  }
  if (config.numa_node >= 0) {
    if (Status s = bind_to_numa_node(base, bytes, config.numa_node); !s) {
      ::munmap(base, bytes);
      return s;
    }
  }
  return std::unique_ptr<PagePool>(new PagePool(base, static_cast<uint32_t>(pages), config.data_memory_bytes));
}

PagePool::PagePool(std::byte* base, uint32_t capacity_pages, uint64_t data_memory_bytes)
    : base_(base), capacity_pages_(capacity_pages), data_memory_bytes_(data_memory_bytes) {}

PagePool::~PagePool() { ::munmap(base_, static_cast<std::size_t>(capacity_pages_) * kPageBytes); }

Status PagePool::exhausted() const {
  return Status(StatusCode::kResourceExhausted,
                "DataMemory full: " + std::to_string(pages_in_use()) + " of " + std::to_string(capacity_pages_) +
                    " pages in use (DataMemory=" + format_memory_size(data_memory_bytes_) + ")");
}

Result<PageId> PagePool::allocate() {
  PageId page = kNoPage;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_head_ != kNoPage) {
      page = free_head_;
      std::memcpy(&free_head_, address(page), sizeof free_head_);
    } else if (next_untouched_ < capacity_pages_) {
      page = next_untouched_++;
    }
    if (page != kNoPage)
      pages_in_use_.store(pages_in_use_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  if (page == kNoPage) return exhausted();
  return page;
}

void PagePool::free(PageId page) {
  std::lock_guard<std::mutex> lock(mutex_);
  FJORD_ASSERT(page < next_untouched_);
  FJORD_ASSERT_MSG(page != free_head_, "page freed twice");
  FJORD_ASSERT(pages_in_use_.load(std::memory_order_relaxed) > 0);
  std::memcpy(address(page), &free_head_, sizeof free_head_);
  free_head_ = page;
  pages_in_use_.store(pages_in_use_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
}

}  // namespace fjord::engine::storage
