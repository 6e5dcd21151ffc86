// Per-type limits. Sources: NDB 7.4 as described in "MySQL Cluster run-time
// environment, Part 2" (Mikael Ronström's blog, 2013: ldm counts, tc up to
// 32, send and recv up to 16, main and rep exactly one, io and wd counts
// ignored, spintime only on ldm/tc/main/rep/send/recv) and
// mysql-server storage/ndb/src/kernel/vm/mt_thr_config.cpp (handle_spec:
// nosend only on main, ldm, tc and rep; tc and send may be 0 threads).
#include "thread_types.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace fjord::engine::detail {
namespace {

constexpr std::array<ThreadTypeTraits, kThreadTypeCount> kTraits = {{
    // name    default min  max              ignored spin   nosend
    {"ldm", 1, 1, 32, false, true, true},
    {"tc", 0, 0, kTcThreadsMax, false, true, true},
    {"recv", 1, 1, kRecvThreadsMax, false, true, false},
    {"send", 0, 0, kSendThreadsMax, false, true, false},
    {"main", 1, 1, 1, false, true, true},
    {"rep", 1, 1, 1, false, true, true},
    {"io", 1, 1, 1, true, false, false},
    {"wd", 1, 1, 1, true, false, false},
}};

static_assert(kLdmCounts[std::size(kLdmCounts) - 1] == 32, "ldm max_total above must match kLdmCounts");

bool equals_ignoring_case(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

}  // namespace

const ThreadTypeTraits& traits_of(ThreadType type) noexcept {
  const auto index = static_cast<size_t>(type);
  FJORD_ASSERT(index < kTraits.size());
  return kTraits[index];
}

std::optional<ThreadType> thread_type_from_name(std::string_view name) noexcept {
  for (size_t i = 0; i < kTraits.size(); ++i) {
    if (equals_ignoring_case(name, kTraits[i].name)) return static_cast<ThreadType>(i);
  }
  // NDB's parser spells the watchdog entry "watchdog" (thr_config.cpp).
  if (equals_ignoring_case(name, "watchdog")) return ThreadType::kWatchdog;
  return std::nullopt;
}

const char* thread_type_list() noexcept { return "ldm, tc, recv, send, main, rep, io, wd"; }

bool is_allowed_ldm_count(uint32_t count) noexcept {
  return std::find(std::begin(kLdmCounts), std::end(kLdmCounts), count) != std::end(kLdmCounts);
}

std::string allowed_total_text(ThreadType type) {
  const ThreadTypeTraits& traits = traits_of(type);
  if (type == ThreadType::kLdm) {
    std::string text = "one of ";
    for (size_t i = 0; i < std::size(kLdmCounts); ++i) {
      if (i > 0) text += ", ";
      text += std::to_string(kLdmCounts[i]);
    }
    return text + " ldm threads";
  }
  if (traits.max_total == 1) return std::string("exactly 1 ") + traits.name + " thread";
  return std::to_string(traits.min_total) + ".." + std::to_string(traits.max_total) + " " + traits.name + " threads";
}

void sort_threads(ThreadLayout& layout) {
  std::stable_sort(layout.threads.begin(), layout.threads.end(),
                   [](const ThreadSpec& a, const ThreadSpec& b) { return a.type < b.type; });
}

void append_plain_threads(ThreadLayout& layout, ThreadType type, uint32_t count) {
  const uint32_t first = layout.count(type);
  for (uint32_t i = 0; i < count; ++i) {
    ThreadSpec spec;
    spec.type = type;
    spec.instance = first + i;
    layout.threads.push_back(std::move(spec));
  }
}

}  // namespace fjord::engine::detail
