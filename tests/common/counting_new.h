// A counting replacement of the global operator new, for the tests that
// prove a hot path allocates nothing. A test binary gets it by depending on
// counting_new_dep (tests/meson.build), which compiles counting_new.cpp into
// it: the replacement then holds for the whole process, so such a test is a
// binary of its own.
//
// While g_count_allocations is true, every operator new (any thread) adds one
// to g_allocations; memory comes from malloc and returns to free.
#pragma once

#include <atomic>
#include <cstdint>

namespace fjord::test {

extern std::atomic<bool> g_count_allocations;
extern std::atomic<uint64_t> g_allocations;

}  // namespace fjord::test
