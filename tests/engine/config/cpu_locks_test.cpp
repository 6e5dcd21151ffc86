// LockExecuteThreadToCPU and LockMaintThreadsToCPU on a thread layout: the
// CPU list's grammar and errors, NDB's ways of handing CPUs to the
// execution threads, and ThreadConfig's precedence.
#include <gtest/gtest.h>

#include "fjord/engine/thread_config.h"

namespace fjord::engine {
namespace {

ThreadLayout parse_ok(const std::string& text) {
  auto layout = parse_thread_config(text);
  EXPECT_TRUE(layout) << layout.status().to_string();
  return layout ? std::move(layout).value() : ThreadLayout{};
}

const ThreadSpec& thread(const ThreadLayout& layout, ThreadType type, uint32_t instance = 0) {
  for (const ThreadSpec& t : layout.threads)
    if (t.type == type && t.instance == instance) return t;
  ADD_FAILURE() << "no " << thread_type_name(type) << " " << instance;
  static const ThreadSpec kNone;
  return kNone;
}

// "bind 3", "set 0-1" or "any".
std::string where(const ThreadLayout& layout, ThreadType type, uint32_t instance = 0) {
  const ThreadSpec& t = thread(layout, type, instance);
  switch (t.binding) {
    case ThreadSpec::Binding::kNone: return "any";
    case ThreadSpec::Binding::kBind: return "bind " + format_cpu_list(t.cpus);
    case ThreadSpec::Binding::kSet: return "set " + format_cpu_list(t.cpus);
  }
  return "?";
}

std::vector<int> cpus_of(const std::string& text) {
  auto cpus = parse_cpu_id_list(text);
  EXPECT_TRUE(cpus) << cpus.status().to_string();
  return cpus ? std::move(cpus).value() : std::vector<int>{};
}

std::string list_error(const std::string& text) {
  auto cpus = parse_cpu_id_list(text);
  return cpus ? "no error" : cpus.status().message();
}

TEST(CpuIdListTest, RangesAndRepeatsMergeIntoAscendingCpus) {
  EXPECT_EQ(cpus_of("0-3,8"), (std::vector<int>{0, 1, 2, 3, 8}));
  EXPECT_EQ(cpus_of(" 5 , 1 - 2 ,2"), (std::vector<int>{1, 2, 5}));
  EXPECT_EQ(cpus_of("65535"), (std::vector<int>{65535}));
}

TEST(CpuIdListTest, BadListsNameTheirBadPart) {
  const std::string expected = "; expected CPU ids 0..65535 and ranges such as 0-3,8";
  EXPECT_EQ(list_error(""), "empty CPU list" + expected);
  EXPECT_EQ(list_error("4-2"), "'4-2' is a reversed range" + expected);
  EXPECT_EQ(list_error("x"), "'x' is not a CPU id" + expected);
  EXPECT_EQ(list_error("1,"), "'' is not a CPU id" + expected);
  EXPECT_EQ(list_error("65536"), "'65536' is not a CPU id" + expected);
  EXPECT_EQ(list_error("1-2-3"), "'2-3' is not a CPU id" + expected);
}

TEST(CpuLocksTest, EnoughCpusGiveEachThreadItsOwnInNdbsOrder) {
  ThreadLayout layout = parse_ok("ldm={count=2},tc,recv,main,rep,io,wd");
  ASSERT_TRUE(apply_cpu_locks({cpus_of("10-15"), -1}, layout));
  // NDB's order: main, ldm, recv, rep, tc, send.
  EXPECT_EQ(where(layout, ThreadType::kMain), "bind 10");
  EXPECT_EQ(where(layout, ThreadType::kLdm, 0), "bind 11");
  EXPECT_EQ(where(layout, ThreadType::kLdm, 1), "bind 12");
  EXPECT_EQ(where(layout, ThreadType::kRecv), "bind 13");
  EXPECT_EQ(where(layout, ThreadType::kRep), "bind 14");
  EXPECT_EQ(where(layout, ThreadType::kTc), "bind 15");
  EXPECT_EQ(where(layout, ThreadType::kIo), "any");
  EXPECT_EQ(where(layout, ThreadType::kWatchdog), "any");
  EXPECT_NE(layout.source.find("LockExecuteThreadToCPU=10-15: each thread its own CPU"), std::string::npos)
      << layout.source;
}

TEST(CpuLocksTest, OneCpuTakesEveryExecutionThread) {
  ThreadLayout layout = parse_ok("ldm={count=2},tc,recv,main,rep");
  ASSERT_TRUE(apply_cpu_locks({{3}, -1}, layout));
  for (const ThreadSpec& t : layout.threads) {
    const bool execution = t.type != ThreadType::kIo && t.type != ThreadType::kWatchdog;
    EXPECT_EQ(t.cpus, execution ? std::vector<int>{3} : std::vector<int>{}) << thread_type_name(t.type);
  }
}

TEST(CpuLocksTest, MoreCpusThanLdmThreadsGiveEachLdmItsOwnAndTheRestShare) {
  ThreadLayout layout = parse_ok("ldm={count=2},recv,main,rep");
  ASSERT_TRUE(apply_cpu_locks({cpus_of("0-3"), -1}, layout));  // 5 threads, 4 CPUs
  EXPECT_EQ(where(layout, ThreadType::kLdm, 0), "bind 0");
  EXPECT_EQ(where(layout, ThreadType::kLdm, 1), "bind 1");
  EXPECT_EQ(where(layout, ThreadType::kMain), "bind 2");
  EXPECT_EQ(where(layout, ThreadType::kRep), "bind 2");
  EXPECT_EQ(where(layout, ThreadType::kRecv), "bind 3");
}

TEST(CpuLocksTest, FewerCpusThanLdmThreadsShareOneAndRoundRobinTheLdms) {
  ThreadLayout layout = parse_ok("ldm={count=4},tc,recv,main,rep");
  ASSERT_TRUE(apply_cpu_locks({cpus_of("0-2"), -1}, layout));
  EXPECT_EQ(where(layout, ThreadType::kMain), "bind 0");
  EXPECT_EQ(where(layout, ThreadType::kRep), "bind 0");
  EXPECT_EQ(where(layout, ThreadType::kRecv), "bind 0");
  EXPECT_EQ(where(layout, ThreadType::kLdm, 0), "bind 1");
  EXPECT_EQ(where(layout, ThreadType::kLdm, 1), "bind 2");
  EXPECT_EQ(where(layout, ThreadType::kLdm, 2), "bind 1");
  EXPECT_EQ(where(layout, ThreadType::kLdm, 3), "bind 2");
  EXPECT_EQ(where(layout, ThreadType::kTc), "any");  // NDB leaves tc and send where they are
}

TEST(CpuLocksTest, ThreadConfigPlacementWinsAndItsCpusAreNotHandedOut) {
  ThreadLayout layout = parse_ok("ldm={count=2,cpubind=0-1},recv,main,rep,io={cpubind=7},wd");
  ASSERT_TRUE(apply_cpu_locks({cpus_of("0-3"), 5}, layout));
  EXPECT_EQ(where(layout, ThreadType::kLdm, 0), "bind 0");
  EXPECT_EQ(where(layout, ThreadType::kLdm, 1), "bind 1");
  // CPUs 2 and 3 for main, rep and recv, with no unplaced ldm: the sharing rule.
  EXPECT_EQ(where(layout, ThreadType::kMain), "bind 2");
  EXPECT_EQ(where(layout, ThreadType::kRep), "bind 2");
  EXPECT_EQ(where(layout, ThreadType::kRecv), "bind 3");
  EXPECT_EQ(where(layout, ThreadType::kIo), "bind 7");
  EXPECT_EQ(where(layout, ThreadType::kWatchdog), "bind 5");
}

TEST(CpuLocksTest, ALayoutFromMaxNoOfExecutionThreadsWithTcNeedsACpuPerThread) {
  auto layout = layout_from_max_execution_threads(9);  // 4 ldm, 2 tc, 1 recv, main, rep
  ASSERT_TRUE(layout);
  ThreadLayout short_of_cpus = *layout;
  const Status s = apply_cpu_locks({cpus_of("0-1"), -1}, short_of_cpus);
  EXPECT_EQ(s.message(),
            "LockExecuteThreadToCPU=0-1 leaves 2 CPUs for 9 execution threads; a layout from "
            "MaxNoOfExecutionThreads with tc or send threads, or several recv threads, needs a CPU per thread; "
            "expected at least 9 CPUs, or ThreadConfig to place them");
  ASSERT_TRUE(apply_cpu_locks({cpus_of("0-8"), -1}, *layout));
  EXPECT_EQ(where(*layout, ThreadType::kTc, 1), "bind 8");
}

TEST(CpuLocksTest, GivenCpusReplaceTheAutomaticPlacement) {
  MachineTopology machine;
  for (int c = 0; c < 4; ++c) machine.cores.push_back({0, {c}});
  machine.origin = "test";
  auto layout = automatic_layout_for(machine);
  ASSERT_TRUE(layout);
  ASSERT_EQ(where(*layout, ThreadType::kLdm, 0), "bind 0");
  ASSERT_TRUE(apply_cpu_locks({{3}, 2}, *layout));
  EXPECT_EQ(where(*layout, ThreadType::kLdm, 0), "bind 3");
  EXPECT_EQ(where(*layout, ThreadType::kMain), "bind 3");
  EXPECT_EQ(where(*layout, ThreadType::kIo), "bind 2");
  EXPECT_NE(layout->source.find("the CPUs given below replace that placement"), std::string::npos);
}

TEST(CpuLocksTest, NoLocksLeaveTheLayoutAsItIs) {
  ThreadLayout layout = parse_ok("ldm={count=2},tc,recv,main,rep,io,wd");
  const ThreadLayout before = layout;
  ASSERT_TRUE(apply_cpu_locks({}, layout));
  EXPECT_EQ(layout.threads, before.threads);
  EXPECT_EQ(layout.source, before.source);
}

}  // namespace
}  // namespace fjord::engine
