// Internal to fjord_engine_config: what each thread type allows (counts,
// spintime, nosend) and name lookup, shared by the parser, the table-driven
// layouts and the formatter. Any thread; start-up only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fjord/engine/thread_config.h"

namespace fjord::engine::detail {

struct ThreadTypeTraits {
  const char* name;
  uint32_t default_count;  // threads when ThreadConfig does not mention the type
  uint32_t min_total;      // at least this many in total once mentioned
  uint32_t max_total;      // at most this many in total
  bool count_ignored;      // io, wd: one entry whatever count says
  bool may_spin;           // spintime allowed (NDB: execution threads only)
  bool may_nosend;         // nosend allowed (NDB: main, ldm, tc, rep)
};

const ThreadTypeTraits& traits_of(ThreadType type) noexcept;

// Case-insensitive; accepts NDB's "watchdog" for wd. nullopt when unknown.
std::optional<ThreadType> thread_type_from_name(std::string_view name) noexcept;

// "ldm, tc, recv, send, main, rep, io, wd"
const char* thread_type_list() noexcept;

bool is_allowed_ldm_count(uint32_t count) noexcept;

// The accepted total for a type, for error messages: "one of 1, 2, 4, ...
// ldm threads", "0..32 tc threads", "exactly 1 main thread", ...
std::string allowed_total_text(ThreadType type);

// Stable sort into ThreadType order, keeping instance order within a type.
void sort_threads(ThreadLayout& layout);

// Appends `count` unplaced threads of `type` with default settings,
// numbering instances after the ones already there.
void append_plain_threads(ThreadLayout& layout, ThreadType type, uint32_t count);

}  // namespace fjord::engine::detail
