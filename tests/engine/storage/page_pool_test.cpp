// PagePool: capacity, the DataMemory-full message, reuse, many threads
// allocating and freeing without ever sharing a page, and huge pages.
#include "fjord/engine/storage/page_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fjord/base/huge_pages.h"

namespace fjord::engine::storage {
namespace {

constexpr uint64_t kPage = PagePool::kPageBytes;

TEST(PagePoolTest, CapacityIsWholePages) {
  auto pool = PagePool::create(PagePoolConfig{10 * kPage + 100}).value();
  EXPECT_EQ(pool->capacity_pages(), 10u);
  EXPECT_EQ(pool->pages_in_use(), 0u);
  EXPECT_EQ(pool->data_memory_bytes(), 10 * kPage + 100);
}

TEST(PagePoolTest, LessThanOnePageIsRejected) {
  Result<std::unique_ptr<PagePool>> pool = PagePool::create(PagePoolConfig{1000});
  ASSERT_FALSE(pool.is_ok());
  EXPECT_EQ(pool.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(pool.status().message(), "DataMemory=1000 is less than one 32768-byte page");
}

TEST(PagePoolTest, ExhaustionSaysHowFullAndLeavesPagesIntact) {
  auto pool = PagePool::create(PagePoolConfig{8 * kPage}).value();
  std::vector<PageId> pages;
  for (int i = 0; i < 8; ++i) {
    Result<PageId> page = pool->allocate();
    ASSERT_TRUE(page.is_ok());
    std::memset(pool->address(page.value()), i + 1, kPage);
    pages.push_back(page.value());
  }
  Result<PageId> more = pool->allocate();
  ASSERT_FALSE(more.is_ok());
  EXPECT_EQ(more.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(more.status().message(), "DataMemory full: 8 of 8 pages in use (DataMemory=256K)");
  for (int i = 0; i < 8; ++i) {
    const std::byte* p = pool->address(pages[i]);
    EXPECT_TRUE(std::all_of(p, p + kPage, [&](std::byte b) { return b == std::byte(i + 1); })) << i;
  }
  pool->free(pages[3]);
  EXPECT_EQ(pool->pages_in_use(), 7u);
  Result<PageId> again = pool->allocate();
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again.value(), pages[3]);
}

TEST(PagePoolTest, PagesAreDistinctAndDoNotOverlap) {
  auto pool = PagePool::create(PagePoolConfig{64 * kPage}).value();
  std::set<PageId> seen;
  for (int i = 0; i < 64; ++i) {
    const PageId page = pool->allocate().value();
    EXPECT_TRUE(seen.insert(page).second);
    if (i > 0) {
      EXPECT_GE(std::abs(pool->address(page) - pool->address(*seen.begin())), static_cast<long>(kPage));
    }
  }
  for (PageId page : seen) pool->free(page);
  EXPECT_EQ(pool->pages_in_use(), 0u);
}

TEST(PagePoolTest, ThreadsNeverShareAPage) {
  constexpr int kThreads = 4;
  constexpr int kPages = 64;
  auto pool = PagePool::create(PagePoolConfig{kPages * kPage}).value();
  std::atomic<int> collisions{0};
  std::atomic<int> exhausted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<PageId> mine;
      for (int step = 0; step < 20000; ++step) {
        if (mine.empty() || (rng() % 2 == 0 && mine.size() < kPages / kThreads + 4)) {
          Result<PageId> page = pool->allocate();
          if (!page.is_ok()) {
            exhausted.fetch_add(1);
            continue;
          }
          // Stamp the page; another owner would overwrite the stamp.
          std::memset(pool->address(page.value()), t + 1, 64);
          mine.push_back(page.value());
        } else {
          const std::size_t i = rng() % mine.size();
          const std::byte* p = pool->address(mine[i]);
          if (std::any_of(p, p + 64, [&](std::byte b) { return b != std::byte(t + 1); })) collisions.fetch_add(1);
          pool->free(mine[i]);
          mine[i] = mine.back();
          mine.pop_back();
        }
      }
      for (PageId page : mine) pool->free(page);
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(collisions.load(), 0);
  EXPECT_EQ(pool->pages_in_use(), 0u);
}

TEST(PagePoolTest, PrefaultAndHugePagesAreHonouredQuietly) {
  PagePoolConfig config{16 * kPage};
  config.prefault = true;
  config.huge_pages = true;
  auto pool = PagePool::create(config).value();
  const PageId page = pool->allocate().value();
  std::memset(pool->address(page), 0x5A, kPage);
  EXPECT_EQ(pool->address(page)[kPage - 1], std::byte{0x5A});
}

// kB of anonymous huge pages backing the mapping that contains `p`
// (/proc/self/smaps), or -1 if the mapping is not found.
long anon_huge_kb(const void* p) {
  std::ifstream in("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find('-') < line.find(' ')) {
      inside = lo <= at && at < hi;
    } else if (inside && line.rfind("AnonHugePages:", 0) == 0) {
      return std::strtol(line.c_str() + 14, nullptr, 10);
    }
  }
  return -1;
}

TEST(PagePoolTest, HugePagesStartOnA2MBBoundaryAndBackTheRows) {
  constexpr uint64_t kBytes = 16ULL << 20;
  PagePoolConfig config{kBytes};
  config.huge_pages = true;
  auto pool = PagePool::create(config).value();
  std::byte* first = pool->address(pool->allocate().value());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % kHugePageBytes, 0u);
  // Every page is usable, up to the last byte of the last one (the trimmed
  // mapping ends exactly there).
  for (uint32_t i = 1; i < kBytes / kPage; ++i) ASSERT_TRUE(pool->allocate().is_ok());
  std::memset(first, 0x33, kBytes);
  EXPECT_EQ(first[kBytes - 1], std::byte{0x33});
  EXPECT_FALSE(pool->allocate().is_ok());
  const std::string mode = transparent_huge_page_mode();
  if (mode != "always" && mode != "madvise") {
    GTEST_SKIP() << "transparent huge pages are '" << (mode.empty() ? "absent" : mode)
                 << "' on this kernel: only the alignment was checked";
  }
  EXPECT_GT(anon_huge_kb(first), 0) << "THP is '" << mode << "' but the pool got no huge page";
}

TEST(PagePoolTest, WithoutHugePagesThePoolGetsNone) {
  PagePoolConfig config{16ULL << 20};
  config.prefault = true;
  auto pool = PagePool::create(config).value();
  std::byte* first = pool->address(pool->allocate().value());
  std::memset(first, 1, kPage);
  if (transparent_huge_page_mode() == "always")
    GTEST_SKIP() << "THP is 'always' here: every large mapping may get huge pages";
  EXPECT_EQ(anon_huge_kb(first), 0);
}

TEST(PagePoolTest, FormatsSizesAsConfigIniDoes) {
  EXPECT_EQ(format_memory_size(200ULL << 20), "200M");
  EXPECT_EQ(format_memory_size(4ULL << 30), "4G");
  EXPECT_EQ(format_memory_size(96ULL << 10), "96K");
  EXPECT_EQ(format_memory_size(1000), "1000");
  EXPECT_EQ(format_memory_size(0), "0");
}

}  // namespace
}  // namespace fjord::engine::storage
