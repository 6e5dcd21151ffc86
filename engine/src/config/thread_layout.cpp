// ThreadLayout helpers: NDB's MaxNoOfExecutionThreads table, precedence,
// placement against a machine, and the two text forms (a table for people,
// canonical ThreadConfig for round trips).
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "fjord/engine/thread_config.h"
#include "thread_types.h"

namespace fjord::engine {
namespace {

// MaxNoOfExecutionThreads -> thread counts, columns in the order NDB's
// table uses. Rows 9..72: the table of NDB 7.4's mt_thr_config.cpp
// (computeThreadConfig), also printed in "MySQL Cluster run-time environment,
// Part 2" (Mikael Ronström's blog, 2013). Rows 2..8: the switch in the same
// function's caller, THRConfig::do_parse: 2-3 give 1 ldm, 4-6 give 2, 7-8
// give 4, with 1 recv and neither tc nor send threads. Later NDB versions
// changed rows 20-23 and 40-47 to 10 and 20 LDM threads; those counts are not
// among the 7.4 LDM counts we accept, so we keep the 7.4 table.
struct ExecutionThreadsRow {
  uint32_t max_execution_threads;
  uint32_t ldm;
  uint32_t tc;
  uint32_t send;
  uint32_t recv;
};

constexpr ExecutionThreadsRow kExecutionThreadsTable[] = {
    {2, 1, 0, 0, 1},     {3, 1, 0, 0, 1},    {4, 2, 0, 0, 1},    {5, 2, 0, 0, 1},    {6, 2, 0, 0, 1},
    {7, 4, 0, 0, 1},     {8, 4, 0, 0, 1},    {9, 4, 2, 0, 1},    {10, 4, 2, 1, 1},   {11, 4, 3, 1, 1},
    {12, 6, 2, 1, 1},    {13, 6, 3, 1, 1},   {14, 6, 3, 1, 2},   {15, 6, 3, 2, 2},   {16, 8, 3, 1, 2},
    {17, 8, 4, 1, 2},    {18, 8, 4, 2, 2},   {19, 8, 5, 2, 2},   {20, 8, 5, 2, 3},   {21, 8, 5, 3, 3},
    {22, 8, 6, 3, 3},    {23, 8, 7, 3, 3},   {24, 12, 5, 2, 3},  {25, 12, 6, 2, 3},  {26, 12, 6, 3, 3},
    {27, 12, 7, 3, 3},   {28, 12, 7, 3, 4},  {29, 12, 8, 3, 4},  {30, 12, 8, 4, 4},  {31, 12, 9, 4, 4},
    {32, 16, 8, 3, 3},   {33, 16, 8, 3, 4},  {34, 16, 8, 4, 4},  {35, 16, 9, 4, 4},  {36, 16, 10, 4, 4},
    {37, 16, 10, 4, 5},  {38, 16, 11, 4, 5}, {39, 16, 11, 5, 5}, {40, 16, 12, 5, 5}, {41, 16, 12, 5, 6},
    {42, 16, 13, 5, 6},  {43, 16, 13, 6, 6}, {44, 16, 14, 6, 6}, {45, 16, 14, 6, 7}, {46, 16, 15, 6, 7},
    {47, 16, 15, 7, 7},  {48, 24, 12, 5, 5}, {49, 24, 12, 5, 6}, {50, 24, 13, 5, 6}, {51, 24, 13, 6, 6},
    {52, 24, 14, 6, 6},  {53, 24, 14, 6, 7}, {54, 24, 15, 6, 7}, {55, 24, 15, 7, 7}, {56, 24, 16, 7, 7},
    {57, 24, 16, 7, 8},  {58, 24, 17, 7, 8}, {59, 24, 17, 8, 8}, {60, 24, 18, 8, 8}, {61, 24, 18, 8, 9},
    {62, 24, 19, 8, 9},  {63, 24, 19, 9, 9}, {64, 32, 16, 7, 7}, {65, 32, 16, 7, 8}, {66, 32, 17, 7, 8},
    {67, 32, 17, 8, 8},  {68, 32, 18, 8, 8}, {69, 32, 18, 8, 9}, {70, 32, 19, 8, 9}, {71, 32, 20, 8, 9},
    {72, 32, 20, 8, 10},
};

// Every row is one in sequence, within our limits, and from 9 on spends the
// whole budget: ldm + tc + send + recv + main + rep == MaxNoOfExecutionThreads.
constexpr bool execution_threads_table_is_consistent() {
  uint32_t expected = kMaxExecutionThreadsMin;
  for (const ExecutionThreadsRow& row : kExecutionThreadsTable) {
    if (row.max_execution_threads != expected++) return false;
    bool ldm_allowed = false;
    for (uint32_t count : kLdmCounts) ldm_allowed = ldm_allowed || count == row.ldm;
    if (!ldm_allowed || row.tc > kTcThreadsMax || row.send > kSendThreadsMax) return false;
    if (row.recv < 1 || row.recv > kRecvThreadsMax) return false;
    const uint32_t sum = row.ldm + row.tc + row.send + row.recv + 2;
    if (row.max_execution_threads >= 9 && sum != row.max_execution_threads) return false;
  }
  return expected == kMaxExecutionThreadsMax + 1;
}
static_assert(execution_threads_table_is_consistent());

std::string placement_text(const ThreadSpec& thread) {
  switch (thread.binding) {
    case ThreadSpec::Binding::kNone: return "any";
    case ThreadSpec::Binding::kBind:
      return (thread.exclusive ? "cpubind_exclusive=" : "cpubind=") + format_cpu_list(thread.cpus);
    case ThreadSpec::Binding::kSet:
      return (thread.exclusive ? "cpuset_exclusive=" : "cpuset=") + format_cpu_list(thread.cpus);
  }
  FJORD_ASSERT_MSG(false, "unknown ThreadSpec::Binding");
  return "";
}

}  // namespace

const char* thread_type_name(ThreadType type) noexcept { return detail::traits_of(type).name; }

uint32_t ThreadLayout::count(ThreadType type) const {
  return static_cast<uint32_t>(
      std::count_if(threads.begin(), threads.end(), [type](const ThreadSpec& t) { return t.type == type; }));
}

uint32_t MachineTopology::cpu_count() const {
  uint32_t total = 0;
  for (const Core& core : cores) total += static_cast<uint32_t>(core.cpus.size());
  return total;
}

std::vector<int> MachineTopology::all_cpus() const {
  std::vector<int> cpus;
  for (const Core& core : cores) cpus.insert(cpus.end(), core.cpus.begin(), core.cpus.end());
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

Result<ThreadLayout> layout_from_max_execution_threads(uint32_t n) {
  if (n < kMaxExecutionThreadsMin || n > kMaxExecutionThreadsMax) {
    return Status(StatusCode::kInvalidArgument,
                  "MaxNoOfExecutionThreads=" + std::to_string(n) + " is out of range; expected " +
                      std::to_string(kMaxExecutionThreadsMin) + ".." + std::to_string(kMaxExecutionThreadsMax));
  }
  const ExecutionThreadsRow& row = kExecutionThreadsTable[n - kMaxExecutionThreadsMin];
  FJORD_ASSERT(row.max_execution_threads == n);
  ThreadLayout layout;
  layout.source = "MaxNoOfExecutionThreads=" + std::to_string(n);
  detail::append_plain_threads(layout, ThreadType::kLdm, row.ldm);
  detail::append_plain_threads(layout, ThreadType::kTc, row.tc);
  detail::append_plain_threads(layout, ThreadType::kRecv, row.recv);
  detail::append_plain_threads(layout, ThreadType::kSend, row.send);
  for (ThreadType type : {ThreadType::kMain, ThreadType::kRep, ThreadType::kIo, ThreadType::kWatchdog}) {
    detail::append_plain_threads(layout, type, 1);
  }
  return layout;
}

Result<ThreadLayout> select_thread_layout(std::string_view thread_config, uint32_t max_execution_threads) {
  if (thread_config.find_first_not_of(" \t\r\n\f\v") != std::string_view::npos) {
    return parse_thread_config(thread_config);
  }
  if (max_execution_threads != 0) return layout_from_max_execution_threads(max_execution_threads);
  return automatic_layout();
}

Status validate_placement(const ThreadLayout& layout, const MachineTopology& topology) {
  const std::vector<int> usable = topology.all_cpus();
  for (const ThreadSpec& thread : layout.threads) {
    for (int cpu : thread.cpus) {
      if (std::binary_search(usable.begin(), usable.end(), cpu)) continue;
      return Status(StatusCode::kInvalidArgument,
                    std::string("thread placement: ") + thread_type_name(thread.type) + " instance " +
                        std::to_string(thread.instance) + " uses CPU " + std::to_string(cpu) + " (" +
                        placement_text(thread) +
                        "), which this machine does not have or this process may not use; expected CPUs " +
                        format_cpu_list(usable) + " (" + topology.origin + ")");
    }
  }
  return Status::ok();
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string text;
  for (size_t i = 0; i < cpus.size();) {
    size_t last = i;
    while (last + 1 < cpus.size() && cpus[last + 1] == cpus[last] + 1) ++last;
    FJORD_ASSERT(last + 1 >= cpus.size() || cpus[last + 1] > cpus[last]);  // ascending, no duplicates
    if (!text.empty()) text += ',';
    text += std::to_string(cpus[i]);
    if (last > i) text += "-" + std::to_string(cpus[last]);
    i = last + 1;
  }
  return text;
}

std::string format_layout(const ThreadLayout& layout, const std::function<std::string(const ThreadSpec&)>& blocks_of) {
  constexpr size_t kColumns = 8;
  std::vector<std::array<std::string, kColumns>> rows;
  rows.push_back({"type", "instance", "blocks", "cpus", "realtime", "spintime_us", "thread_prio", "nosend"});
  for (const ThreadSpec& thread : layout.threads) {
    std::string blocks = blocks_of ? blocks_of(thread) : std::string();
    rows.push_back({thread_type_name(thread.type), std::to_string(thread.instance),
                    blocks.empty() ? "-" : std::move(blocks), placement_text(thread), thread.realtime ? "1" : "0",
                    std::to_string(thread.spintime_us),
                    thread.thread_prio < 0 ? "-" : std::to_string(thread.thread_prio), thread.nosend ? "1" : "0"});
  }
  std::array<size_t, kColumns> widths{};
  for (const auto& row : rows) {
    for (size_t c = 0; c < kColumns; ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  std::string text = "thread layout: " + layout.source + "\n";
  for (const auto& row : rows) {
    for (size_t c = 0; c < kColumns; ++c) {
      text += row[c];
      if (c + 1 < kColumns) text += std::string(widths[c] - row[c].size() + 2, ' ');
    }
    text += '\n';
  }
  return text;
}

namespace {

// True when `next` can join the group that `last` ends, so the parser gives
// both the same settings back (cpubind hands out its CPUs in ascending order).
bool continues_group(const ThreadSpec& last, const ThreadSpec& next) {
  if (last.type != next.type || last.binding != next.binding || last.exclusive != next.exclusive ||
      last.realtime != next.realtime || last.spintime_us != next.spintime_us || last.thread_prio != next.thread_prio ||
      last.nosend != next.nosend) {
    return false;
  }
  switch (last.binding) {
    case ThreadSpec::Binding::kNone: return true;
    case ThreadSpec::Binding::kSet: return last.cpus == next.cpus;
    case ThreadSpec::Binding::kBind: return next.cpus.front() > last.cpus.front();
  }
  return false;
}

void append_group(std::string& text, const std::vector<const ThreadSpec*>& group) {
  const ThreadSpec& first = *group.front();
  std::vector<std::string> items;
  if (group.size() != 1) items.push_back("count=" + std::to_string(group.size()));
  if (first.binding == ThreadSpec::Binding::kBind) {
    std::vector<int> cpus;
    for (const ThreadSpec* thread : group) {
      FJORD_ASSERT(thread->cpus.size() == 1);
      cpus.push_back(thread->cpus.front());
    }
    items.push_back((first.exclusive ? "cpubind_exclusive=" : "cpubind=") + format_cpu_list(cpus));
  } else if (first.binding == ThreadSpec::Binding::kSet) {
    items.push_back(placement_text(first));
  }
  if (first.realtime) items.emplace_back("realtime=1");
  if (first.spintime_us != 0) items.push_back("spintime=" + std::to_string(first.spintime_us));
  if (first.thread_prio >= 0) items.push_back("thread_prio=" + std::to_string(first.thread_prio));
  if (first.nosend) items.emplace_back("nosend=1");
  if (!text.empty()) text += ',';
  text += thread_type_name(first.type);
  if (items.empty()) return;
  text += "={";
  for (size_t i = 0; i < items.size(); ++i) text += (i == 0 ? "" : ",") + items[i];
  text += '}';
}

}  // namespace

std::string format_thread_config(const ThreadLayout& layout) {
  std::string text;
  std::vector<const ThreadSpec*> group;
  for (const ThreadSpec& thread : layout.threads) {
    if (!group.empty() && !continues_group(*group.back(), thread)) {
      append_group(text, group);
      group.clear();
    }
    group.push_back(&thread);
  }
  if (!group.empty()) append_group(text, group);
  return text;
}

}  // namespace fjord::engine
