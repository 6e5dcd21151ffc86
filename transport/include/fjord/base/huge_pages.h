// Transparent huge pages: memory laid out so the kernel can back it with
// 2 MB pages (one TLB entry per 2 MB instead of per 4 KB), and what the
// kernel's THP setting is. Used by DataMemory (engine/src/storage) and by
// benchmarks that must measure on the same kind of memory.
#pragma once

#include <cstddef>
#include <string>

namespace fjord {

inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

// Private anonymous memory of `bytes`, starting on a 2 MB boundary (the
// kernel backs only whole aligned 2 MB ranges with a huge page) and advised
// MADV_HUGEPAGE before anything touches it; MAP_NORESERVE, so pages are
// taken when first written. nullptr if mmap fails (errno says why).
// *advised, if given, says whether the kernel took the advice (it does not
// where THP is absent). Free with munmap(p, bytes).
std::byte* map_huge_page_aligned(std::size_t bytes, bool* advised = nullptr) noexcept;

// The kernel's THP mode ("always", "madvise" or "never": the bracketed word
// of /sys/kernel/mm/transparent_hugepage/enabled), or "" where it has none.
// Advised memory gets huge pages under "always" and "madvise".
std::string transparent_huge_page_mode();

}  // namespace fjord
