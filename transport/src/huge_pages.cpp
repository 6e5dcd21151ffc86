#include "fjord/base/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>
#include <fstream>

namespace fjord {

std::byte* map_huge_page_aligned(std::size_t bytes, bool* advised) noexcept {
  // Map 2 MB more than asked and trim both ends to the boundary.
  void* mapped = ::mmap(nullptr, bytes + kHugePageBytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapped == MAP_FAILED) return nullptr;
  auto* raw = static_cast<std::byte*>(mapped);
  const std::size_t head = (kHugePageBytes - reinterpret_cast<uintptr_t>(raw) % kHugePageBytes) % kHugePageBytes;
  if (head > 0) ::munmap(raw, head);
  ::munmap(raw + head + bytes, kHugePageBytes - head);  // head < 2 MB: the tail is never empty
  std::byte* p = raw + head;
  const bool ok = ::madvise(p, bytes, MADV_HUGEPAGE) == 0;
  if (advised) *advised = ok;
  return p;
}

std::string transparent_huge_page_mode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(in, line);
  const auto open = line.find('['), close = line.find(']');
  return open == std::string::npos || close == std::string::npos || close < open
             ? std::string()
             : line.substr(open + 1, close - open - 1);
}

}  // namespace fjord
