// NDB's LockExecuteThreadToCPU and LockMaintThreadsToCPU applied to a thread
// layout (declared in thread_config.h). Start-up only.
#include <algorithm>
#include <charconv>
#include <string>

#include "fjord/base/assert.h"
#include "fjord/engine/thread_config.h"

namespace fjord::engine {

namespace {

constexpr const char* kCpuIdListExpected = "expected CPU ids 0..65535 and ranges such as 0-3,8";

Status list_error(const std::string& problem) {
  return Status(StatusCode::kInvalidArgument, problem + "; " + kCpuIdListExpected);
}

std::string_view trim_blanks(std::string_view text) {
  const std::size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return {};
  return text.substr(begin, text.find_last_not_of(" \t") - begin + 1);
}

Result<int> parse_cpu_id(std::string_view text) {
  text = trim_blanks(text);
  int cpu = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), cpu);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || cpu < 0 || cpu > kNdbCpuIdMax)
    return list_error("'" + std::string(text) + "' is not a CPU id");
  return cpu;
}

bool is_execution_thread(ThreadType type) { return type != ThreadType::kIo && type != ThreadType::kWatchdog; }

// NDB's order of thread types when it hands out CPUs (THRConfig's T_Type).
constexpr ThreadType kNdbExecutionOrder[] = {ThreadType::kMain, ThreadType::kLdm, ThreadType::kRecv,
                                             ThreadType::kRep,  ThreadType::kTc,  ThreadType::kSend};

void bind(ThreadSpec& thread, int cpu) {
  FJORD_ASSERT(thread.binding == ThreadSpec::Binding::kNone);
  thread.binding = ThreadSpec::Binding::kBind;
  thread.cpus = {cpu};
}

// The unplaced execution threads, in NDB's order.
std::vector<ThreadSpec*> unplaced_execution_threads(ThreadLayout& layout) {
  std::vector<ThreadSpec*> out;
  for (ThreadType type : kNdbExecutionOrder)
    for (ThreadSpec& t : layout.threads)
      if (t.type == type && t.binding == ThreadSpec::Binding::kNone) out.push_back(&t);
  return out;
}

// The CPUs of `given` no placed execution thread uses (io and wd may share
// a CPU with anything: they are mostly asleep).
std::vector<int> free_cpus(const std::vector<int>& given, const ThreadLayout& layout) {
  std::vector<int> out;
  for (int cpu : given) {
    const bool used = std::any_of(layout.threads.begin(), layout.threads.end(), [cpu](const ThreadSpec& t) {
      return is_execution_thread(t.type) && std::find(t.cpus.begin(), t.cpus.end(), cpu) != t.cpus.end();
    });
    if (!used) out.push_back(cpu);
  }
  return out;
}

// Fewer CPUs than threads (two or more CPUs): NDB's sharing rule. Returns
// how the CPUs were handed out.
std::string share_cpus(const std::vector<int>& cpus, const std::vector<ThreadSpec*>& threads) {
  FJORD_ASSERT(cpus.size() >= 2);
  std::vector<ThreadSpec*> ldm;
  for (ThreadSpec* t : threads)
    if (t->type == ThreadType::kLdm) ldm.push_back(t);
  const auto bind_type = [&threads](ThreadType type, int cpu) {
    for (ThreadSpec* t : threads)
      if (t->type == type) bind(*t, cpu);
  };
  if (cpus.size() > ldm.size()) {
    for (std::size_t i = 0; i < ldm.size(); ++i) bind(*ldm[i], cpus[i]);
    const std::size_t shared = ldm.size();
    bind_type(ThreadType::kMain, cpus[shared]);
    bind_type(ThreadType::kRep, cpus[shared]);
    bind_type(ThreadType::kRecv, shared + 1 < cpus.size() ? cpus[shared + 1] : cpus[shared]);
    return "each ldm its own CPU, main and rep share one, recv another";
  }
  bind_type(ThreadType::kMain, cpus[0]);
  bind_type(ThreadType::kRep, cpus[0]);
  bind_type(ThreadType::kRecv, cpus[0]);
  for (std::size_t i = 0; i < ldm.size(); ++i) bind(*ldm[i], cpus[1 + i % (cpus.size() - 1)]);
  return "main, rep and recv share CPU " + std::to_string(cpus[0]) + ", ldm round robin over the rest";
}

// Whether NDB refuses too few CPUs for this layout: one from
// MaxNoOfExecutionThreads with tc or send threads or several recv threads.
bool needs_cpu_per_thread(const ThreadLayout& layout) {
  const bool from_count = layout.source.rfind("MaxNoOfExecutionThreads", 0) == 0;
  return from_count && (layout.count(ThreadType::kTc) > 0 || layout.count(ThreadType::kSend) > 0 ||
                        layout.count(ThreadType::kRecv) > 1);
}

Status lock_execute_threads(const std::vector<int>& given, ThreadLayout& layout) {
  const std::vector<int> cpus = free_cpus(given, layout);
  const std::vector<ThreadSpec*> threads = unplaced_execution_threads(layout);
  const std::string name = "LockExecuteThreadToCPU=" + format_cpu_list(given);
  std::string how;
  if (cpus.empty() || threads.empty()) {
    how = "no unplaced thread or no CPU left: nothing to place";
  } else if (cpus.size() >= threads.size()) {
    for (std::size_t i = 0; i < threads.size(); ++i) bind(*threads[i], cpus[i]);
    how = "each thread its own CPU";
  } else if (needs_cpu_per_thread(layout)) {
    return Status(StatusCode::kInvalidArgument,
                  name + " leaves " + std::to_string(cpus.size()) + (cpus.size() == 1 ? " CPU for " : " CPUs for ") +
                      std::to_string(threads.size()) +
                      " execution threads; a layout from MaxNoOfExecutionThreads with tc or send threads, or "
                      "several recv threads, needs a CPU per thread; expected at least " +
                      std::to_string(threads.size()) + " CPUs, or ThreadConfig to place them");
  } else if (cpus.size() == 1) {
    for (ThreadSpec* t : threads) bind(*t, cpus[0]);
    how = "all threads on CPU " + std::to_string(cpus[0]);
  } else {
    how = share_cpus(cpus, threads);
  }
  layout.source += "; " + name + ": " + how;
  return Status::ok();
}

void drop_placement(ThreadLayout& layout, bool execution) {
  for (ThreadSpec& t : layout.threads) {
    if (is_execution_thread(t.type) != execution) continue;
    t.binding = ThreadSpec::Binding::kNone;
    t.cpus.clear();
    t.exclusive = false;
  }
}

}  // namespace

Result<std::vector<int>> parse_cpu_id_list(std::string_view text) {
  if (trim_blanks(text).empty()) return list_error("empty CPU list");
  std::vector<int> cpus;
  for (std::size_t begin = 0; begin <= text.size();) {
    std::size_t end = text.find(',', begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = text.substr(begin, end - begin);
    const std::size_t dash = item.find('-');
    auto low = parse_cpu_id(item.substr(0, dash));
    if (!low) return low.status();
    auto high = dash == std::string_view::npos ? low : parse_cpu_id(item.substr(dash + 1));
    if (!high) return high.status();
    if (*high < *low) return list_error("'" + std::string(trim_blanks(item)) + "' is a reversed range");
    for (int cpu = *low; cpu <= *high; ++cpu) cpus.push_back(cpu);
    begin = end + 1;
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  FJORD_ASSERT(!cpus.empty());
  return cpus;
}

Status apply_cpu_locks(const CpuLocks& locks, ThreadLayout& layout) {
  const bool automatic = layout.source.rfind("automatic", 0) == 0;
  if (automatic && (locks.maint_cpu >= 0 || !locks.execute_cpus.empty()))
    layout.source += "; the CPUs given below replace that placement";
  if (locks.maint_cpu >= 0) {
    FJORD_ASSERT(locks.maint_cpu <= kNdbCpuIdMax);
    if (automatic) drop_placement(layout, false);
    std::size_t placed = 0;
    for (ThreadSpec& t : layout.threads)
      if (!is_execution_thread(t.type) && t.binding == ThreadSpec::Binding::kNone) {
        bind(t, locks.maint_cpu);
        ++placed;
      }
    layout.source += "; LockMaintThreadsToCPU=" + std::to_string(locks.maint_cpu) +
                     (placed > 0 ? ": io and wd unless placed" : ": no unplaced io or wd thread");
  }
  if (locks.execute_cpus.empty()) return Status::ok();
  if (automatic) drop_placement(layout, true);
  return lock_execute_threads(locks.execute_cpus, layout);
}

}  // namespace fjord::engine
