// Thread layout of a data node: which threads exist, of which type, on which
// CPUs, and with what scheduling settings. It comes from one of three places,
// in NDB's order of precedence:
//   1. ThreadConfig, a string in NDB's grammar (parse_thread_config);
//   2. MaxNoOfExecutionThreads, mapped to counts through NDB's table
//      (layout_from_max_execution_threads);
//   3. neither given: an automatic layout derived from the machine's cores
//      (automatic_layout), following the advice of Mikael Ronström's
//      "MySQL Cluster run-time environment" blog series (2013).
// The runtime turns a ThreadLayout into threads; this library only describes.
// Parsing is machine-independent; validate_placement checks a layout against
// the CPUs this machine has.
//
// Any thread may call anything here (no shared state). Not the hot path: it
// runs once at start-up, allocates freely and returns Status for bad input.
// The grammar, the limits and the automatic rule are in docs/configuration.md.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "fjord/base/status.h"

namespace fjord::engine {

// NDB's thread types. The declaration order is the canonical order: a
// ThreadLayout lists its threads sorted by type in this order.
enum class ThreadType : uint8_t {
  kLdm,       // "ldm": owns a share of the partitions (LQH, TUP, ACC, TUX)
  kTc,        // "tc": transaction coordination
  kRecv,      // "recv": reads the transporters into job buffers
  kSend,      // "send": sends on behalf of the others (0 = threads send themselves)
  kMain,      // "main": metadata (dictionary, distribution)
  kRep,       // "rep": replication, event delivery
  kIo,        // "io": file I/O; a pool in NDB, one configurable entry here
  kWatchdog,  // "wd": the watchdog (NDB's parser also accepts "watchdog")
};
inline constexpr uint32_t kThreadTypeCount = 8;

// "ldm", "tc", "recv", "send", "main", "rep", "io", "wd". Never null.
const char* thread_type_name(ThreadType type) noexcept;

// Limits, as NDB 7.4 documents them ("MySQL Cluster run-time environment,
// Part 2"; mt_thr_config.cpp).
inline constexpr uint32_t kLdmCounts[] = {1, 2, 4, 6, 8, 12, 16, 24, 32};
inline constexpr uint32_t kTcThreadsMax = 32;
inline constexpr uint32_t kSendThreadsMax = 16;
inline constexpr uint32_t kRecvThreadsMax = 16;
inline constexpr uint32_t kSpintimeMaxUs = 500;
// NDB's upper bound on SchedulerExecutionTimer (microseconds).
inline constexpr uint32_t kExecutionTimerMaxUs = 11000;
inline constexpr uint32_t kThreadPrioMax = 10;
// Highest CPU number a CPU list may name (bounds every list we hold).
inline constexpr int kCpuIdMax = 4095;
// NDB's range for MaxNoOfExecutionThreads.
inline constexpr uint32_t kMaxExecutionThreadsMin = 2;
inline constexpr uint32_t kMaxExecutionThreadsMax = 72;

struct ThreadSpec {
  enum class Binding : uint8_t {
    kNone,  // no placement: the OS may run the thread on any CPU
    kBind,  // cpubind: exactly one CPU, cpus.size() == 1
    kSet,   // cpuset: any CPU of cpus (ascending, no duplicates, non-empty)
  };

  ThreadType type = ThreadType::kLdm;
  uint32_t instance = 0;  // 0-based within its type, in the order configured
  std::vector<int> cpus;  // empty for kNone
  Binding binding = Binding::kNone;
  bool exclusive = false;    // cpubind_exclusive / cpuset_exclusive: no thread placed otherwise on these CPUs
  bool realtime = false;     // realtime=1: the OS real-time scheduler
  uint32_t spintime_us = 0;  // spin this long for new signals before sleeping (0..kSpintimeMaxUs)
  int thread_prio = -1;      // 0..kThreadPrioMax (10 highest), -1 = not set
  bool nosend = false;       // nosend=1: hand all sending to the send threads

  bool operator==(const ThreadSpec&) const = default;
};

struct ThreadLayout {
  // Sorted by type (ThreadType order), then instance. Always present: ldm
  // (a count in kLdmCounts), recv (1..16), main, rep, io, wd (exactly one
  // each); tc 0..32 and send 0..16. tc = 0 means the TC blocks live on other
  // threads: NDB 7.x ran its one DBTC in the main thread; RonDB runs one TC
  // worker per recv thread (RonDB Configuration.cpp, setupConfiguration). The
  // runtime chooses; this library only allows the count. send = 0 means every
  // thread sends what it produces.
  std::vector<ThreadSpec> threads;
  // Where it came from: "ThreadConfig", "MaxNoOfExecutionThreads=12", or
  // "automatic: <the rule applied and the machine it saw>".
  std::string source;

  uint32_t count(ThreadType type) const;
};

// Parses NDB's ThreadConfig grammar:
//   config := group { ',' group }
//   group  := type [ '=' '{' [ key '=' value { ',' key '=' value } ] '}' ]
//   type   := ldm | tc | recv | send | main | rep | io | wd | watchdog
//   key    := count | cpubind | cpubind_exclusive | cpuset | cpuset_exclusive
//           | realtime | spintime | thread_prio | nosend
//   value  := decimal number, or for the four CPU keys a CPU list such as
//             0-3,8 (a ',' followed by a digit continues the list)
// Whitespace may surround every token; names are case-insensitive. A bare
// type means one thread with defaults. Groups of one type may repeat and add
// up: ldm={cpubind=0},ldm={cpubind=1} is ldm={count=2,cpubind=0-1}. A CPU
// list is a set: threads of a cpubind group take its CPUs in ascending order.
// Types not mentioned get their defaults (1 ldm, recv, main, rep, io, wd; 0
// tc and send).
// Returns the layout with source "ThreadConfig", or kInvalidArgument with
//   "ThreadConfig: at position P ('TEXT'): PROBLEM; expected WHAT"
// where P is the 0-based character offset of TEXT in `text` (or
// "(end of text)" in place of ('TEXT') when the text ended too early).
Result<ThreadLayout> parse_thread_config(std::string_view text);

// NDB's mapping of MaxNoOfExecutionThreads to thread counts: 2..8 use NDB's
// small rows (1, 2 or 4 ldm; 1 recv; no tc, no send), 9..72 the table of
// NDB 7.4's mt_thr_config.cpp. Main, rep, io and wd: one each.
// No placement. Source "MaxNoOfExecutionThreads=N". kInvalidArgument when n
// is outside kMaxExecutionThreadsMin..kMaxExecutionThreadsMax.
Result<ThreadLayout> layout_from_max_execution_threads(uint32_t n);

// The CPUs of a machine, grouped into cores.
struct MachineTopology {
  struct Core {
    int package = 0;        // socket
    std::vector<int> cpus;  // OS CPU numbers of its hardware threads, ascending, non-empty
  };
  std::vector<Core> cores;  // ordered by first CPU; only CPUs this process may run on
  std::string origin;       // how it was found: "hwloc 2.9.0", "/sys/devices/system/cpu", "sysconf"

  uint32_t cpu_count() const;
  std::vector<int> all_cpus() const;  // ascending
};

// This machine's topology: hwloc when built with it, else /sys (cores from
// topology/core_id) within sched_getaffinity, else sysconf CPUs as one core
// each. The origin says which. kUnavailable if no CPU could be found.
Result<MachineTopology> detect_machine_topology();

// The automatic rule (docs/configuration.md): with C cores and T hardware
// threads per core,
//   ldm  = the largest allowed LDM count <= C/2 (at least 1), each bound to
//          the first hardware thread of its own core, cores taken in order;
//          their sibling hardware threads stay idle (LDM without
//          hyper-threading, spare CPU for the OS);
//   tc   = ceil(ldm * T / 4)  (a quarter of the LDM CPUs), at most 32;
//   recv = ceil(tc / 2), send = floor(tc / 2)  (together as many as tc);
//   main, rep, io, wd = 1;
//   all but ldm share one cpuset: every CPU of the cores ldm does not use.
// With one core nothing is placed (all unbound). Source "automatic: ..."
// states the counts, why, and the machine. kInvalidArgument on a topology
// without cores.
Result<ThreadLayout> automatic_layout_for(const MachineTopology& topology);
// automatic_layout_for(detect_machine_topology()).
Result<ThreadLayout> automatic_layout();

// NDB's precedence: non-blank thread_config wins; else a non-zero
// max_execution_threads; else the automatic layout of this machine.
Result<ThreadLayout> select_thread_layout(std::string_view thread_config, uint32_t max_execution_threads);

// NDB's LockExecuteThreadToCPU and LockMaintThreadsToCPU: CPUs for threads
// the layout leaves unplaced.
struct CpuLocks {
  std::vector<int> execute_cpus;  // ascending, no duplicates; empty = not given
  int maint_cpu = -1;             // -1 = not given
};
// NDB's bound on the CPU ids of both parameters.
inline constexpr int kNdbCpuIdMax = 65535;

// Parses a LockExecuteThreadToCPU value: CPU ids and ranges separated by
// commas, such as "0-3,8" (whitespace around tokens allowed, repeats merge).
// Ascending CPUs, or kInvalidArgument naming the bad part, e.g.
// "'4-2' is a reversed range; expected CPU ids 0..65535 and ranges such as 0-3,8".
Result<std::vector<int>> parse_cpu_id_list(std::string_view text);

// Places the threads `layout` leaves unplaced, as NDB's THRConfig does:
//   LockMaintThreadsToCPU: io and wd bound to that CPU;
//   LockExecuteThreadToCPU: the CPUs no placed execution thread uses, given to the
//   unplaced execution threads (all but io and wd) in NDB's order main,
//   ldm, recv, rep, tc, send:
//     - as many CPUs as threads or more: each thread its own CPU;
//     - one CPU: all of them on it;
//     - more CPUs than unplaced ldm threads: each ldm its own CPU, main and
//       rep share the next, recv the one after (or the first of those again);
//     - otherwise main, rep and recv share the first CPU and the ldm threads
//       take the others round robin.
//   In the last two cases tc and send threads stay unplaced; a layout from
//   MaxNoOfExecutionThreads with tc or send threads, or more than one recv
//   thread, then gets kInvalidArgument (NDB's rule: too few CPUs).
// Placement ThreadConfig gave wins over both (NDB's precedence); the
// placement of an automatic layout (source "automatic: ...") is the
// machine's guess, so the CPUs given here replace it. The source gains a
// note of what was applied. Ok with the layout unchanged when `locks` is empty.
Status apply_cpu_locks(const CpuLocks& locks, ThreadLayout& layout);

// Checks that every CPU the layout names exists in `topology` (which holds
// only the CPUs this process may use). Ok, or kInvalidArgument naming the
// first thread and CPU that fail, e.g. "thread placement: ldm instance 2 uses
// CPU 7 (cpubind=7), which this machine does not have or this process may
// not use; expected CPUs 0-1 (hwloc API 2.8)".
Status validate_placement(const ThreadLayout& layout, const MachineTopology& topology);

// "0-3,8,10-11": ascending runs of two or more as ranges. Input ascending,
// no duplicates. Empty input gives "".
std::string format_cpu_list(const std::vector<int>& cpus);

// A table for logs and tools: first line "thread layout: <source>", then a
// header line and one line per thread with the columns
//   type instance blocks cpus realtime spintime_us thread_prio nosend
// separated by at least two spaces (padded to the widest cell; no trailing
// spaces). blocks is blocks_of(thread), or "-" when blocks_of is empty or
// returns ""; cpus is "any", "cpubind=3", "cpuset=4-7",
// "cpubind_exclusive=3" or "cpuset_exclusive=4-7"; realtime and nosend are
// 0/1; thread_prio is "-" when unset. Every line ends with '\n'.
std::string format_layout(const ThreadLayout& layout, const std::function<std::string(const ThreadSpec&)>& blocks_of);

// Canonical ThreadConfig text for the layout, such that
// parse_thread_config(format_thread_config(l))->threads == l.threads for any
// layout this library produced. Types in ThreadType order; consecutive
// threads of a type with equal settings (and, for cpubind, ascending CPUs)
// become one group; keys appear as count, the binding key, realtime,
// spintime, thread_prio, nosend, each only when not its default; a group
// without keys is the bare type name; tc and send with 0 threads are left out.
// Example: "ldm={count=4,cpubind=0-3},tc={count=2},recv,main,rep,io,wd".
std::string format_thread_config(const ThreadLayout& layout);

}  // namespace fjord::engine
