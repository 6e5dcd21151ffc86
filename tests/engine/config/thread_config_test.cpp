// ThreadConfig: the configurations from "MySQL Cluster run-time environment"
// (Mikael Ronström's blog, 2013) parse to the documented layouts, every
// MaxNoOfExecutionThreads row maps to NDB's counts, bad strings fail with
// exact messages, canonical text round-trips, and the automatic rule gives
// the documented layouts on fake machines.
#include "fjord/engine/thread_config.h"

#include <gtest/gtest.h>

#include <iostream>
#include <ostream>
#include <string>
#include <vector>

namespace fjord::engine {

// Readable failures when two layouts differ.
void PrintTo(const ThreadSpec& t, std::ostream* out) {
  *out << thread_type_name(t.type) << "#" << t.instance << "{binding=" << static_cast<int>(t.binding)
       << ",cpus=" << format_cpu_list(t.cpus) << ",exclusive=" << t.exclusive << ",realtime=" << t.realtime
       << ",spintime=" << t.spintime_us << ",prio=" << t.thread_prio << ",nosend=" << t.nosend << "}";
}

namespace {

using Binding = ThreadSpec::Binding;
using enum ThreadType;

// Builds an expected ThreadSpec; every field not set keeps its default.
struct Spec {
  ThreadSpec spec;
  Spec(ThreadType type, uint32_t instance) {
    spec.type = type;
    spec.instance = instance;
  }
  Spec& bind(int cpu) {
    spec.binding = Binding::kBind;
    spec.cpus = {cpu};
    return *this;
  }
  Spec& set(std::vector<int> cpus) {
    spec.binding = Binding::kSet;
    spec.cpus = std::move(cpus);
    return *this;
  }
  Spec& exclusive() {
    spec.exclusive = true;
    return *this;
  }
  Spec& realtime() {
    spec.realtime = true;
    return *this;
  }
  Spec& spin(uint32_t us) {
    spec.spintime_us = us;
    return *this;
  }
  Spec& prio(int prio) {
    spec.thread_prio = prio;
    return *this;
  }
  Spec& nosend() {
    spec.nosend = true;
    return *this;
  }
  operator ThreadSpec() const { return spec; }  // NOLINT(google-explicit-constructor)
};

std::vector<int> range(int first, int last) {
  std::vector<int> cpus;
  for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
  return cpus;
}

std::vector<int> join(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// n unplaced threads of a type, instances 0..n-1.
void add_plain(std::vector<ThreadSpec>& threads, ThreadType type, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) threads.push_back(Spec(type, i));
}

// n threads of a type bound to CPUs first_cpu, first_cpu + 1, ...
void add_bound(std::vector<ThreadSpec>& threads, ThreadType type, uint32_t n, int first_cpu) {
  for (uint32_t i = 0; i < n; ++i) threads.push_back(Spec(type, i).bind(first_cpu + static_cast<int>(i)));
}

// n threads of a type sharing one cpuset.
void add_in_set(std::vector<ThreadSpec>& threads, ThreadType type, uint32_t n, const std::vector<int>& cpus) {
  for (uint32_t i = 0; i < n; ++i) threads.push_back(Spec(type, i).set(cpus));
}

// main, rep, io, wd with defaults: what a ThreadConfig that omits them gets.
void add_default_rest(std::vector<ThreadSpec>& threads) {
  for (ThreadType type : {kMain, kRep, kIo, kWatchdog}) add_plain(threads, type, 1);
}

ThreadLayout parse_ok(const std::string& text) {
  Result<ThreadLayout> layout = parse_thread_config(text);
  EXPECT_TRUE(layout.is_ok()) << text << ": " << layout.status().to_string();
  return layout.is_ok() ? *layout : ThreadLayout{};
}

std::string error_of(const std::string& text) {
  Result<ThreadLayout> layout = parse_thread_config(text);
  if (layout.is_ok()) return "no error; parsed as " + format_thread_config(*layout);
  EXPECT_EQ(layout.status().code(), StatusCode::kInvalidArgument);
  return layout.status().message();
}

// Linux numbering: core i holds CPUs i, i + cores, i + 2 * cores, ...
MachineTopology fake_machine(int cores, int cpus_per_core, int cores_per_package = 1 << 20) {
  MachineTopology machine;
  machine.origin = "fake";
  for (int core = 0; core < cores; ++core) {
    MachineTopology::Core entry;
    entry.package = core / cores_per_package;
    for (int thread = 0; thread < cpus_per_core; ++thread) entry.cpus.push_back(core + thread * cores);
    machine.cores.push_back(entry);
  }
  return machine;
}

void expect_round_trip(const ThreadLayout& layout) {
  const std::string text = format_thread_config(layout);
  Result<ThreadLayout> again = parse_thread_config(text);
  ASSERT_TRUE(again.is_ok()) << text << ": " << again.status().to_string();
  EXPECT_EQ(again->threads, layout.threads) << text;
  EXPECT_EQ(format_thread_config(*again), text);
}

// ---- configurations from the run-time environment blog -------------------

const char* const kBoundExample =
    "ldm={count=4,cpubind=0-3,spintime=50},tc={count=2,cpubind=4-5,realtime=1},send={count=2,cpubind=6-7},"
    "recv={count=2,cpubind=8-9,realtime=1},main={cpubind=10},rep={cpubind=11},io={cpubind=12},"
    "wd={cpubind=12,realtime=1}";

// Part 2's first example: LDM threads bound one per CPU in order, realtime on
// some thread types, spintime=50 on the LDM threads, io and wd sharing a CPU.
TEST(ThreadConfigTest, BoundExampleFromTheNotesParsesToOneCpuPerThread) {
  const ThreadLayout layout = parse_ok(kBoundExample);
  const std::vector<ThreadSpec> expected = {
      Spec(kLdm, 0).bind(0).spin(50),
      Spec(kLdm, 1).bind(1).spin(50),
      Spec(kLdm, 2).bind(2).spin(50),
      Spec(kLdm, 3).bind(3).spin(50),
      Spec(kTc, 0).bind(4).realtime(),
      Spec(kTc, 1).bind(5).realtime(),
      Spec(kRecv, 0).bind(8).realtime(),
      Spec(kRecv, 1).bind(9).realtime(),
      Spec(kSend, 0).bind(6),
      Spec(kSend, 1).bind(7),
      Spec(kMain, 0).bind(10),
      Spec(kRep, 0).bind(11),
      Spec(kIo, 0).bind(12),
      Spec(kWatchdog, 0).bind(12).realtime(),
  };
  EXPECT_EQ(layout.threads, expected);
  EXPECT_EQ(layout.source, "ThreadConfig");
  EXPECT_EQ(layout.count(kLdm), 4u);
  EXPECT_EQ(layout.count(kSend), 2u);
}

// Part 2's cpuset example: the same threads split into two CPU sets, 0-3 for
// the LDM threads and 4-7 shared by everything else.
TEST(ThreadConfigTest, CpusetSplitExampleSharesOneSetAcrossGroups) {
  const ThreadLayout layout = parse_ok(
      "ldm={count=4,cpuset=0-3},tc={count=2,cpuset=4-7},send={count=2,cpuset=4-7},"
      "recv={count=2,cpuset=4-7},main={cpuset=4-7},rep={cpuset=4-7},io={cpuset=4-7},wd={cpuset=4-7}");
  std::vector<ThreadSpec> expected;
  add_in_set(expected, kLdm, 4, {0, 1, 2, 3});
  for (ThreadType type : {kTc, kRecv, kSend}) add_in_set(expected, type, 2, {4, 5, 6, 7});
  for (ThreadType type : {kMain, kRep, kIo, kWatchdog}) add_in_set(expected, type, 1, {4, 5, 6, 7});
  EXPECT_EQ(layout.threads, expected);
}

// Part 3: 4 sockets x 6 cores x 2 threads; CPUs 0-23 are thread 0 of each
// core, 24-47 thread 1. Twelve LDM threads without hyper-threading on
// sockets 0 and 1; tc, send, recv anywhere on socket 2; main, rep, wd, io on
// two cores of socket 3. "12-17,36-41" is one CPU list: a ',' followed by a
// digit continues it.
TEST(ThreadConfigTest, TwelveLdmWithoutHyperThreadingExample) {
  const std::string text =
      "ldm={count=12,cpubind=0-11},tc={count=4,cpuset=12-17,36-41},send={count=2,cpuset=12-17,36-41},"
      "recv={count=2,cpuset=12-17,36-41},main={cpuset=18-19,42-43},rep={cpuset=18-19,42-43},"
      "wd={cpuset=18-19,42-43},io={cpuset=18-19,42-43}";
  const ThreadLayout layout = parse_ok(text);
  const std::vector<int> socket2 = join(range(12, 17), range(36, 41));
  const std::vector<int> socket3 = {18, 19, 42, 43};
  std::vector<ThreadSpec> expected;
  add_bound(expected, kLdm, 12, 0);
  add_in_set(expected, kTc, 4, socket2);
  add_in_set(expected, kRecv, 2, socket2);
  add_in_set(expected, kSend, 2, socket2);
  for (ThreadType type : {kMain, kRep, kIo, kWatchdog}) add_in_set(expected, type, 1, socket3);
  EXPECT_EQ(layout.threads, expected);

  EXPECT_TRUE(validate_placement(layout, fake_machine(24, 2, 6)).is_ok());
  EXPECT_EQ(validate_placement(layout, fake_machine(2, 1)).message(),
            "thread placement: ldm instance 2 uses CPU 2 (cpubind=2), which this machine does not have or this "
            "process may not use; expected CPUs 0-1 (fake)");
}

// Part 3: cpubind for the LDM threads, a common cpuset of 8 CPUs for 4 tc,
// 4 send and 4 recv threads; types not mentioned get their defaults.
TEST(ThreadConfigTest, CommonCpusetForTcSendRecvExample) {
  const ThreadLayout layout = parse_ok(
      "ldm={count=4,cpubind=0-3},tc={count=4,cpuset=4-11},send={count=4,cpuset=4-11},"
      "recv={count=4,cpuset=4-11}");
  std::vector<ThreadSpec> expected;
  add_bound(expected, kLdm, 4, 0);
  for (ThreadType type : {kTc, kRecv, kSend}) add_in_set(expected, type, 4, range(4, 11));
  add_default_rest(expected);
  EXPECT_EQ(layout.threads, expected);
}

// "ldm={cpubind=0},ldm={cpubind=1},ldm={cpubind=2},ldm={cpubind=3} is
// equivalent to ldm={count=4,cpubind=0-3}".
TEST(ThreadConfigTest, RepeatedGroupsEqualOneGroupWithCount) {
  const ThreadLayout repeated = parse_ok("ldm={cpubind=0},ldm={cpubind=1},ldm={cpubind=2},ldm={cpubind=3}");
  const ThreadLayout counted = parse_ok("ldm={count=4,cpubind=0-3}");
  std::vector<ThreadSpec> expected;
  add_bound(expected, kLdm, 4, 0);
  add_plain(expected, kRecv, 1);
  add_default_rest(expected);
  EXPECT_EQ(repeated.threads, expected);
  EXPECT_EQ(counted.threads, expected);
  EXPECT_EQ(format_thread_config(repeated), "ldm={count=4,cpubind=0-3},recv,main,rep,io,wd");
}

TEST(ThreadConfigTest, ThreadsTakeTheFirstCpusOfALongerList) {
  const ThreadLayout layout = parse_ok("ldm={count=2,cpubind=7,3,9}");
  EXPECT_EQ(layout.threads[0], ThreadSpec(Spec(kLdm, 0).bind(3)));
  EXPECT_EQ(layout.threads[1], ThreadSpec(Spec(kLdm, 1).bind(7)));
}

// Whitespace around every token, case-insensitive names, empty braces, bare
// types, NDB's "watchdog" spelling.
TEST(ThreadConfigTest, AcceptsNdbsSpacingCaseAndSpellings) {
  const ThreadLayout layout =
      parse_ok("  main , rep,recv ,LDM={ cpubind = 1- 2, 5 , Count = 3 },  ldm={} , watchdog = { cpubind=6 } ");
  std::vector<ThreadSpec> expected = {Spec(kLdm, 0).bind(1), Spec(kLdm, 1).bind(2), Spec(kLdm, 2).bind(5),
                                      Spec(kLdm, 3),         Spec(kRecv, 0),        Spec(kMain, 0),
                                      Spec(kRep, 0),         Spec(kIo, 0),          Spec(kWatchdog, 0).bind(6)};
  EXPECT_EQ(layout.threads, expected);
}

TEST(ThreadConfigTest, DefaultsForTypesNotMentioned) {
  const ThreadLayout layout = parse_ok("tc");
  std::vector<ThreadSpec> expected;
  add_plain(expected, kLdm, 1);
  add_plain(expected, kTc, 1);
  add_plain(expected, kRecv, 1);
  add_default_rest(expected);
  EXPECT_EQ(layout.threads, expected);
  EXPECT_EQ(layout.count(kSend), 0u);
}

TEST(ThreadConfigTest, ZeroTcAndSendAreAllowedAndIoWdCountIsIgnored) {
  const ThreadLayout layout = parse_ok("ldm={count=2},tc={count=0},send={count=0},io={count=5},wd={count=0}");
  EXPECT_EQ(layout.count(kTc), 0u);
  EXPECT_EQ(layout.count(kSend), 0u);
  EXPECT_EQ(layout.count(kIo), 1u);
  EXPECT_EQ(layout.count(kWatchdog), 1u);
  EXPECT_EQ(format_thread_config(layout), "ldm={count=2},recv,main,rep,io,wd");
}

TEST(ThreadConfigTest, AllKeysAtTheirLimits) {
  const ThreadLayout layout = parse_ok(
      "ldm={count=32,cpubind_exclusive=0-31,spintime=500,thread_prio=10,nosend=1},tc={count=32,realtime=1},"
      "recv={count=16,cpuset_exclusive=32-35},send={count=16,realtime=0,thread_prio=0},main={nosend=0},"
      "rep={cpubind=40},io={cpuset=41-42},wd={cpuset=41-42}");
  ASSERT_EQ(layout.threads.size(), 32u + 32 + 16 + 16 + 4);
  EXPECT_EQ(layout.threads[31], ThreadSpec(Spec(kLdm, 31).bind(31).exclusive().spin(500).prio(10).nosend()));
  EXPECT_EQ(layout.threads[32], ThreadSpec(Spec(kTc, 0).realtime()));
  EXPECT_EQ(layout.threads[64], ThreadSpec(Spec(kRecv, 0).set({32, 33, 34, 35}).exclusive()));
  EXPECT_EQ(layout.threads[95], ThreadSpec(Spec(kSend, 15).prio(0)));
  EXPECT_EQ(layout.threads[96], ThreadSpec(Spec(kMain, 0)));
  EXPECT_EQ(layout.threads[97], ThreadSpec(Spec(kRep, 0).bind(40)));
  EXPECT_EQ(layout.threads[99], ThreadSpec(Spec(kWatchdog, 0).set({41, 42})));
  expect_round_trip(layout);
}

TEST(ThreadConfigTest, EveryAllowedLdmCountParses) {
  for (uint32_t count : kLdmCounts) {
    EXPECT_EQ(parse_ok("ldm={count=" + std::to_string(count) + "}").count(kLdm), count);
  }
}

// ---- errors: position, offending text, problem, what was expected --------

TEST(ThreadConfigTest, SyntaxErrorsNamePositionTextAndExpectation) {
  EXPECT_EQ(error_of("ldm={count=4},ldb={count=1}"),
            "ThreadConfig: at position 14 ('ldb'): unknown thread type 'ldb'; expected one of ldm, tc, recv, send, "
            "main, rep, io, wd");
  EXPECT_EQ(error_of("ldm={count=4}, tc={cpubindd=0}"),
            "ThreadConfig: at position 19 ('cpubindd=0'): unknown key 'cpubindd'; expected one of count, cpubind, "
            "cpubind_exclusive, cpuset, cpuset_exclusive, realtime, spintime, thread_prio, nosend");
  EXPECT_EQ(error_of("ldm={count=x}"),
            "ThreadConfig: at position 5 ('count=x'): bad number 'x' for count; expected a decimal number");
  EXPECT_EQ(error_of("tc={count=-1}"),
            "ThreadConfig: at position 4 ('count=-1'): bad number '-1' for count; expected a decimal number");
  EXPECT_EQ(error_of("tc={count=12345678901}"),
            "ThreadConfig: at position 4 ('count=12345678901'): number 12345678901 for count is out of range; "
            "expected at most 4294967295");
  EXPECT_EQ(error_of("ldm={count=}"),
            "ThreadConfig: at position 5 ('count='): empty value for count; expected a decimal number");
  EXPECT_EQ(error_of("ldm={cpubind= }"),
            "ThreadConfig: at position 5 ('cpubind= '): empty value for cpubind; expected a CPU list such as 0-3,8");
  EXPECT_EQ(error_of(""),
            "ThreadConfig: at position 0 (end of text): empty ThreadConfig; expected a thread type "
            "such as ldm={count=4}");
  EXPECT_EQ(error_of("tc={count 3}"),
            "ThreadConfig: at position 4 ('count 3'): missing '=' after key 'count'; expected count=<value>");
  EXPECT_EQ(error_of("tc={count=3,count=3}"),
            "ThreadConfig: at position 12 ('count=3'): key 'count' given twice in one group; expected each key at "
            "most once per group");
  EXPECT_EQ(error_of("ldm=count=4"),
            "ThreadConfig: at position 4 ('count=4'): missing '{' after 'ldm='; expected '{' and key=value items");
}

TEST(ThreadConfigTest, UnbalancedBracesAndTrailingGarbage) {
  EXPECT_EQ(error_of("ldm={count=4"),
            "ThreadConfig: at position 4 ('{count=4'): '{' is never closed; expected '}' after the last key=value");
  EXPECT_EQ(error_of("ldm={count=4,"),
            "ThreadConfig: at position 4 ('{count=4,'): '{' is never closed; expected '}' after the last key=value");
  EXPECT_EQ(error_of("ldm={cpubind=1,tc={cpubind=2}"),
            "ThreadConfig: at position 15 ('tc={cpubind=2'): thread type 'tc' inside the '{' opened at position 4; "
            "expected '}' to close that group first");
  EXPECT_EQ(error_of("ldm={count=4}}"),
            "ThreadConfig: at position 13 ('}'): unexpected text after 'ldm={count=4}'; expected ',' and another "
            "thread type, or the end of the text");
  EXPECT_EQ(error_of("ldm={count=4} tc"),
            "ThreadConfig: at position 14 ('tc'): unexpected text after 'ldm={count=4}'; expected ',' and another "
            "thread type, or the end of the text");
  EXPECT_EQ(error_of("ldm,tc garbage,recv"),
            "ThreadConfig: at position 7 ('garbage'): unexpected text after 'tc'; expected '={...}', ',' and another "
            "thread type, or the end of the text");
  EXPECT_EQ(error_of("ldm,ldm,"),
            "ThreadConfig: at position 8 (end of text): missing thread type after ','; "
            "expected one of ldm, tc, recv, send, main, rep, io, wd");
  EXPECT_EQ(error_of(",ldm"),
            "ThreadConfig: at position 0 (',ldm'): missing thread type; expected one of ldm, tc, "
            "recv, send, main, rep, io, wd");
  EXPECT_EQ(error_of("ldm={count=4,}"),
            "ThreadConfig: at position 13 ('}'): missing key after ','; expected one of count, cpubind, "
            "cpubind_exclusive, cpuset, cpuset_exclusive, realtime, spintime, thread_prio, nosend");
  EXPECT_EQ(error_of("main={cpuset=1;3}"),
            "ThreadConfig: at position 14 (';3'): unexpected text after a key=value item; expected ',' and another "
            "key, or '}'");
  EXPECT_EQ(error_of("main={cpuset=1,,3}"),
            "ThreadConfig: at position 15 (','): missing key after ','; expected one of count, cpubind, "
            "cpubind_exclusive, cpuset, cpuset_exclusive, realtime, spintime, thread_prio, nosend");
}

TEST(ThreadConfigTest, CpuListErrors) {
  EXPECT_EQ(error_of("ldm={cpubind=a}"),
            "ThreadConfig: at position 5 ('cpubind=a'): bad CPU list for cpubind; expected a CPU list such as 0-3,8");
  EXPECT_EQ(error_of("ldm={cpubind=1-}"),
            "ThreadConfig: at position 5 ('cpubind=1-'): bad CPU list for cpubind; expected a CPU list such as 0-3,8");
  EXPECT_EQ(error_of("ldm={cpubind=5-3}"),
            "ThreadConfig: at position 5 ('cpubind=5-3'): CPU range 5-3 in cpubind is reversed; expected low-high, "
            "such as 3-5");
  EXPECT_EQ(error_of("ldm={cpuset=0,5000}"),
            "ThreadConfig: at position 5 ('cpuset=0,5000'): CPU 5000 in cpuset is out of range; expected CPU "
            "numbers 0..4095");
}

TEST(ThreadConfigTest, LimitErrors) {
  EXPECT_EQ(error_of("ldm={count=3}"),
            "ThreadConfig: at position 0 ('ldm={count=3}'): 3 ldm threads in total; expected one of 1, 2, 4, 6, 8, "
            "12, 16, 24, 32 ldm threads");
  EXPECT_EQ(error_of("main,rep,recv,ldm,ldm,ldm"),
            "ThreadConfig: at position 22 ('ldm'): 3 ldm threads in total; expected one of 1, 2, 4, 6, 8, 12, 16, "
            "24, 32 ldm threads");
  EXPECT_EQ(error_of("ldm={count=64}"),
            "ThreadConfig: at position 0 ('ldm={count=64}'): 64 ldm threads in total; expected one of 1, 2, 4, 6, "
            "8, 12, 16, 24, 32 ldm threads");
  EXPECT_EQ(error_of("ldm={count=0}"),
            "ThreadConfig: at position 5 ('count=0'): count 0 for ldm; expected at least 1 (only tc and send may "
            "have 0 threads)");
  EXPECT_EQ(error_of("recv={count=0}"),
            "ThreadConfig: at position 6 ('count=0'): count 0 for recv; expected at least 1 (only tc and send may "
            "have 0 threads)");
  EXPECT_EQ(error_of("main={count=2}"),
            "ThreadConfig: at position 0 ('main={count=2}'): 2 main threads in total; expected exactly 1 main thread");
  EXPECT_EQ(error_of("rep,main,main"),
            "ThreadConfig: at position 9 ('main'): 2 main threads in total; expected exactly 1 main thread");
  EXPECT_EQ(error_of("rep={count=0}"),
            "ThreadConfig: at position 5 ('count=0'): count 0 for rep; expected exactly 1 rep thread");
  EXPECT_EQ(error_of("tc={count=30},tc={count=3}"),
            "ThreadConfig: at position 14 ('tc={count=3}'): 33 tc threads in total; expected 0..32 tc threads");
  EXPECT_EQ(error_of("send={count=17}"),
            "ThreadConfig: at position 0 ('send={count=17}'): 17 send threads in total; expected 0..16 send threads");
  EXPECT_EQ(error_of("recv={count=17}"),
            "ThreadConfig: at position 0 ('recv={count=17}'): 17 recv threads in total; expected 1..16 recv threads");
  EXPECT_EQ(error_of("io,ldm,io={cpubind=1}"),
            "ThreadConfig: at position 7 ('io={cpubind=1}'): io given in two groups; expected io and wd at most once "
            "each (their count is ignored)");
  EXPECT_EQ(error_of("ldm={spintime=501}"),
            "ThreadConfig: at position 5 ('spintime=501'): spintime 501 is too long; expected at most 500 "
            "(microseconds)");
  EXPECT_EQ(error_of("ldm={thread_prio=11}"),
            "ThreadConfig: at position 5 ('thread_prio=11'): thread_prio 11 is out of range; expected 0..10 (10 is "
            "the highest)");
  EXPECT_EQ(error_of("tc={realtime=2}"),
            "ThreadConfig: at position 4 ('realtime=2'): realtime 2 is out of range; expected 0 or 1");
  EXPECT_EQ(error_of("tc={nosend=2}"),
            "ThreadConfig: at position 4 ('nosend=2'): nosend 2 is out of range; expected 0 or 1");
}

TEST(ThreadConfigTest, CombinationErrors) {
  EXPECT_EQ(error_of("ldm={cpubind=1,cpuset=2}"),
            "ThreadConfig: at position 15 ('cpuset=2'): cpuset given together with cpubind; expected at most one of "
            "cpubind, cpubind_exclusive, cpuset, cpuset_exclusive per group");
  EXPECT_EQ(error_of("ldm={thread_prio=10,realtime=1}"),
            "ThreadConfig: at position 20 ('realtime=1'): realtime=1 given together with thread_prio; expected only "
            "one of them (both set the OS scheduling priority)");
  EXPECT_TRUE(parse_thread_config("ldm={realtime=0,thread_prio=3}").is_ok());
  EXPECT_EQ(error_of("io={spintime=0}"),
            "ThreadConfig: at position 4 ('spintime=0'): spintime on io threads; expected spintime only on ldm, tc, "
            "recv, send, main and rep threads (io and wd do not spin)");
  EXPECT_EQ(error_of("recv={nosend=1}"),
            "ThreadConfig: at position 6 ('nosend=1'): nosend on recv threads; expected nosend only on ldm, tc, main "
            "and rep threads");
}

TEST(ThreadConfigTest, CpuPlacementErrors) {
  EXPECT_EQ(error_of("ldm={count=4,cpubind=1-3}"),
            "ThreadConfig: at position 13 ('cpubind=1-3'): cpubind gives 3 CPUs (1-3) for 4 ldm threads; expected at "
            "least one CPU per thread");
  EXPECT_EQ(error_of("ldm={count=2,cpubind=1,1}"),
            "ThreadConfig: at position 13 ('cpubind=1,1'): cpubind gives 1 CPU (1) for 2 ldm threads; expected at "
            "least one CPU per thread");
  EXPECT_EQ(error_of("ldm={count=4,cpuset=0-3},tc={cpuset=2-5}"),
            "ThreadConfig: at position 29 ('cpuset=2-5'): cpuset 2-5 overlaps cpuset 0-3 at position 13; expected "
            "each CPU in at most one cpuset");
  EXPECT_EQ(error_of("main={cpuset=1-3},ldm={cpubind=2}"),
            "ThreadConfig: at position 23 ('cpubind=2'): cpubind CPU 2 lies in cpuset 1-3 at position 6; expected "
            "bound CPUs outside every cpuset");
  EXPECT_EQ(error_of("ldm={cpubind=2},main={cpuset=1-3}"),
            "ThreadConfig: at position 22 ('cpuset=1-3'): cpuset 1-3 contains CPU 2 of cpubind 2 at position 5; "
            "expected bound CPUs outside every cpuset");
  EXPECT_EQ(error_of("ldm={cpubind_exclusive=0},tc={cpubind=0}"),
            "ThreadConfig: at position 30 ('cpubind=0'): cpubind CPU 0 is also bound by cpubind_exclusive 0 at "
            "position 5; expected an exclusively bound CPU used by one thread only");
  EXPECT_EQ(error_of("tc={cpuset_exclusive=4-7},send={cpuset=4-7}"),
            "ThreadConfig: at position 32 ('cpuset=4-7'): cpuset 4-7 is also given as cpuset_exclusive 4-7 at "
            "position 4; expected the same key in every group that shares a set");
  // Threads may share a CPU that nobody binds exclusively (NDB allows it).
  EXPECT_TRUE(parse_thread_config("ldm={cpubind=0},tc={cpubind=0}").is_ok());
  // Only the CPUs a cpubind group uses count: 3 is listed but unused.
  EXPECT_TRUE(parse_thread_config("ldm={cpubind=2,3},main={cpuset=3-4}").is_ok());
}

TEST(ThreadConfigTest, LongOffendingTextIsShortened) {
  EXPECT_EQ(error_of("ldm={count=4},tc={nonsense=0123456789012345678901234567890123456789}"),
            "ThreadConfig: at position 18 ('nonsense=0123456789012345678901234567890...'): unknown key 'nonsense'; "
            "expected one of count, cpubind, cpubind_exclusive, cpuset, cpuset_exclusive, realtime, spintime, "
            "thread_prio, nosend");
}

// ---- MaxNoOfExecutionThreads ----------------------------------------------

struct ExecutionThreadsRow {
  uint32_t n, ldm, tc, send, recv;
};

// The table of NDB 7.4's mt_thr_config.cpp (MaxNoOfExecutionThreads, ldm, tc,
// send, recv), and NDB's small rows from THRConfig::do_parse.
const ExecutionThreadsRow kNdbTable[] = {
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

TEST(MaxNoOfExecutionThreadsTest, EveryRowMapsToItsCounts) {
  for (const ExecutionThreadsRow& row : kNdbTable) {
    SCOPED_TRACE("MaxNoOfExecutionThreads=" + std::to_string(row.n));
    Result<ThreadLayout> layout = layout_from_max_execution_threads(row.n);
    ASSERT_TRUE(layout.is_ok()) << layout.status().to_string();
    std::vector<ThreadSpec> expected;
    add_plain(expected, kLdm, row.ldm);
    add_plain(expected, kTc, row.tc);
    add_plain(expected, kRecv, row.recv);
    add_plain(expected, kSend, row.send);
    add_default_rest(expected);
    EXPECT_EQ(layout->threads, expected);
    EXPECT_EQ(layout->source, "MaxNoOfExecutionThreads=" + std::to_string(row.n));
    expect_round_trip(*layout);
  }
}

TEST(MaxNoOfExecutionThreadsTest, OutOfRangeValuesFail) {
  for (uint32_t n : {0u, 1u, 73u, 1000u}) {
    Result<ThreadLayout> layout = layout_from_max_execution_threads(n);
    ASSERT_FALSE(layout.is_ok());
    EXPECT_EQ(layout.status().message(),
              "MaxNoOfExecutionThreads=" + std::to_string(n) + " is out of range; expected 2..72");
  }
}

TEST(MaxNoOfExecutionThreadsTest, ThreadConfigTakesPrecedence) {
  Result<ThreadLayout> from_text = select_thread_layout("ldm={count=2}", 20);
  ASSERT_TRUE(from_text.is_ok());
  EXPECT_EQ(from_text->source, "ThreadConfig");
  EXPECT_EQ(from_text->count(kLdm), 2u);
  Result<ThreadLayout> from_table = select_thread_layout("  ", 20);
  ASSERT_TRUE(from_table.is_ok());
  EXPECT_EQ(from_table->source, "MaxNoOfExecutionThreads=20");
  Result<ThreadLayout> automatic = select_thread_layout("", 0);
  ASSERT_TRUE(automatic.is_ok()) << automatic.status().to_string();
  EXPECT_EQ(automatic->source.rfind("automatic: ", 0), 0u);
  EXPECT_FALSE(select_thread_layout("ldm={count=3}", 20).is_ok());
}

// ---- canonical text and the table for people ------------------------------

TEST(FormatTest, CanonicalTextRoundTrips) {
  const char* configs[] = {
      kBoundExample,
      "ldm={count=4,cpuset=0-3},tc={count=2,cpuset=4-7},main={cpuset=4-7}",
      "ldm={cpubind=3},ldm={cpubind=1},tc={cpubind=0},tc={cpubind=0}",
      "ldm={count=2,thread_prio=4,nosend=1},ldm={count=2,cpuset_exclusive=8-9},recv={count=3,spintime=20}",
      "tc={count=0},send={count=0},ldm={cpubind_exclusive=5-6,count=2}",
  };
  for (const char* config : configs) {
    SCOPED_TRACE(config);
    expect_round_trip(parse_ok(config));
  }
  EXPECT_EQ(format_thread_config(parse_ok(configs[2])),
            "ldm={cpubind=3},ldm={cpubind=1},tc={cpubind=0},tc={cpubind=0},recv,main,rep,io,wd");
  EXPECT_EQ(format_thread_config(parse_ok(configs[3])),
            "ldm={count=2,thread_prio=4,nosend=1},ldm={count=2,cpuset_exclusive=8-9},recv={count=3,spintime=20},"
            "main,rep,io,wd");
}

TEST(FormatTest, CpuListsUseRanges) {
  EXPECT_EQ(format_cpu_list({}), "");
  EXPECT_EQ(format_cpu_list({5}), "5");
  EXPECT_EQ(format_cpu_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
}

TEST(FormatTest, LayoutTableHasOneLinePerThread) {
  const ThreadLayout layout = parse_ok(
      "ldm={count=2,cpubind=0-1,spintime=50},tc={cpuset=2-3,thread_prio=5},recv={realtime=1},"
      "main={nosend=1},io={cpubind_exclusive=4}");
  const auto blocks = [](const ThreadSpec& thread) -> std::string {
    switch (thread.type) {
      case kLdm: return "LQH,TUP,ACC,TUX";
      case kTc: return "TC";
      default: return "";
    }
  };
  EXPECT_EQ(format_layout(layout, blocks),
            "thread layout: ThreadConfig\n"
            "type  instance  blocks           cpus                 realtime  spintime_us  thread_prio  nosend\n"
            "ldm   0         LQH,TUP,ACC,TUX  cpubind=0            0         50           -            0\n"
            "ldm   1         LQH,TUP,ACC,TUX  cpubind=1            0         50           -            0\n"
            "tc    0         TC               cpuset=2-3           0         0            5            0\n"
            "recv  0         -                any                  1         0            -            0\n"
            "main  0         -                any                  0         0            -            1\n"
            "rep   0         -                any                  0         0            -            0\n"
            "io    0         -                cpubind_exclusive=4  0         0            -            0\n"
            "wd    0         -                any                  0         0            -            0\n");
  EXPECT_EQ(format_layout(layout, nullptr), format_layout(layout, [](const ThreadSpec&) { return std::string(); }));
}

// ---- the automatic layout -------------------------------------------------

TEST(AutomaticLayoutTest, OneCorePlacesNothing) {
  Result<ThreadLayout> layout = automatic_layout_for(fake_machine(1, 1));
  ASSERT_TRUE(layout.is_ok());
  std::vector<ThreadSpec> expected;
  for (ThreadType type : {kLdm, kTc, kRecv}) add_plain(expected, type, 1);
  add_default_rest(expected);
  EXPECT_EQ(layout->threads, expected);
  EXPECT_EQ(layout->source,
            "automatic: 1 core x 1 CPU (fake); ldm=1 (half the cores, down to an allowed LDM count, at least 1); "
            "tc=1 (a quarter of the LDM cores' CPUs, rounded up); recv=1, send=0 (together as many as tc; no send "
            "threads: each thread sends its own); main, rep, io, wd: 1 each; one core: nothing to keep apart, so no "
            "thread is placed");
  expect_round_trip(*layout);
}

TEST(AutomaticLayoutTest, TwoCoresGiveLdmACoreAndShareTheOther) {
  Result<ThreadLayout> layout = automatic_layout_for(fake_machine(2, 1));
  ASSERT_TRUE(layout.is_ok());
  const std::vector<ThreadSpec> expected = {
      Spec(kLdm, 0).bind(0),  Spec(kTc, 0).set({1}), Spec(kRecv, 0).set({1}),     Spec(kMain, 0).set({1}),
      Spec(kRep, 0).set({1}), Spec(kIo, 0).set({1}), Spec(kWatchdog, 0).set({1}),
  };
  EXPECT_EQ(layout->threads, expected);
  EXPECT_EQ(layout->source,
            "automatic: 2 cores x 1 CPU (fake); ldm=1 (half the cores, down to an allowed LDM count, at least 1); "
            "tc=1 (a quarter of the LDM cores' CPUs, rounded up); recv=1, send=0 (together as many as tc; no send "
            "threads: each thread sends its own); main, rep, io, wd: 1 each; ldm bound one per core to CPU 0 "
            "(their other hardware threads left idle); the rest share cpuset 1 (the cores ldm does not use)");
  expect_round_trip(*layout);
}

// Expected automatic layout: ldm bound to CPUs 0..ldm-1, the rest on `shared`.
std::vector<ThreadSpec> automatic_expected(uint32_t ldm, uint32_t tc, uint32_t recv, uint32_t send,
                                           const std::vector<int>& shared) {
  std::vector<ThreadSpec> expected;
  add_bound(expected, kLdm, ldm, 0);
  add_in_set(expected, kTc, tc, shared);
  add_in_set(expected, kRecv, recv, shared);
  add_in_set(expected, kSend, send, shared);
  for (ThreadType type : {kMain, kRep, kIo, kWatchdog}) add_in_set(expected, type, 1, shared);
  return expected;
}

TEST(AutomaticLayoutTest, FourAndEightCores) {
  Result<ThreadLayout> four = automatic_layout_for(fake_machine(4, 1));
  ASSERT_TRUE(four.is_ok());
  EXPECT_EQ(four->threads, automatic_expected(2, 1, 1, 0, {2, 3}));
  expect_round_trip(*four);
  Result<ThreadLayout> eight = automatic_layout_for(fake_machine(8, 1));
  ASSERT_TRUE(eight.is_ok());
  EXPECT_EQ(eight->threads, automatic_expected(4, 1, 1, 0, range(4, 7)));
  expect_round_trip(*eight);
}

TEST(AutomaticLayoutTest, SixtyFourCores) {
  Result<ThreadLayout> layout = automatic_layout_for(fake_machine(64, 1));
  ASSERT_TRUE(layout.is_ok());
  EXPECT_EQ(layout->threads, automatic_expected(32, 8, 4, 4, range(32, 63)));
  expect_round_trip(*layout);
  // With hyper-threading the LDM threads stay on thread 0 of cores 0-31; tc,
  // recv, send grow with the CPUs; the shared set is both threads of 32-63.
  Result<ThreadLayout> smt = automatic_layout_for(fake_machine(64, 2));
  ASSERT_TRUE(smt.is_ok());
  EXPECT_EQ(smt->threads, automatic_expected(32, 16, 8, 8, join(range(32, 63), range(96, 127))));
  expect_round_trip(*smt);
}

// The blog's worked example: 24 CPU threads (12 cores x 2) give 6 LDM
// threads without hyper-threading and 3 tc threads.
TEST(AutomaticLayoutTest, NotesExampleOfTwelveCoresWithHyperThreading) {
  Result<ThreadLayout> layout = automatic_layout_for(fake_machine(12, 2));
  ASSERT_TRUE(layout.is_ok());
  EXPECT_EQ(layout->threads, automatic_expected(6, 3, 2, 1, join(range(6, 11), range(18, 23))));
  expect_round_trip(*layout);
}

TEST(AutomaticLayoutTest, NoCoresIsAnError) {
  Result<ThreadLayout> layout = automatic_layout_for(MachineTopology{});
  ASSERT_FALSE(layout.is_ok());
  EXPECT_EQ(layout.status().message(), "automatic thread layout: the machine topology has no cores");
}

TEST(AutomaticLayoutTest, WorksOnThisMachine) {
  Result<MachineTopology> machine = detect_machine_topology();
  ASSERT_TRUE(machine.is_ok()) << machine.status().to_string();
  ASSERT_FALSE(machine->cores.empty());
  for (const MachineTopology::Core& core : machine->cores) EXPECT_FALSE(core.cpus.empty());
  Result<ThreadLayout> layout = automatic_layout();
  ASSERT_TRUE(layout.is_ok()) << layout.status().to_string();
  EXPECT_TRUE(validate_placement(*layout, *machine).is_ok());
  EXPECT_GE(layout->count(kLdm), 1u);
  EXPECT_GE(layout->count(kRecv), 1u);
  expect_round_trip(*layout);
  std::cout << format_layout(*layout, nullptr);
}

}  // namespace
}  // namespace fjord::engine
