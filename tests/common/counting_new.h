// A counting replacement of the global operator new, for the tests that
// prove a hot path allocates nothing. A test binary gets it by depending on
// counting_new_dep (tests/meson.build), which compiles counting_new.cpp into
// it: the replacement then holds for the whole process, so such a test is a
// binary of its own.
//
// While g_count_allocations is true, every operator new (any thread) adds one
// to g_allocations; memory comes from malloc and returns to free. The first
// one counted after g_allocations was last 0 keeps its size and call stack,
// which first_allocation() words, for a failing test to say what allocated.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace fjord::test {

extern std::atomic<bool> g_count_allocations;
extern std::atomic<uint64_t> g_allocations;

// "first allocation counted: N bytes at" and the call stack (symbols where
// the binary has them), or "none recorded". Allocates: call it after
// counting stops.
std::string first_allocation();

}  // namespace fjord::test
