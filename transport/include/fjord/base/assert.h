// Assertions that stay on in release builds.
//
// A failed assertion is a bug in this program, never an expected condition
// (peer gone, ring full, bad config: those are Status return values). It
// prints file, line and the condition, then aborts. Any thread may call it;
// it is cheap enough for the hot path (one predictable branch).
#pragma once

namespace fjord::detail {
[[noreturn]] void assert_fail(const char* condition, const char* file, int line, const char* message) noexcept;
}  // namespace fjord::detail

#define FJORD_ASSERT(condition)                                                                                   \
  do {                                                                                                            \
    if (__builtin_expect(!(condition), 0)) ::fjord::detail::assert_fail(#condition, __FILE__, __LINE__, nullptr); \
  } while (0)

#define FJORD_ASSERT_MSG(condition, message)                                                                        \
  do {                                                                                                              \
    if (__builtin_expect(!(condition), 0)) ::fjord::detail::assert_fail(#condition, __FILE__, __LINE__, (message)); \
  } while (0)
