// NDB's scheduler and CPU parameters on a data node built from a config
// file: the layout the node describes (what --print-thread-config prints)
// shows the CPUs, the execution timer and the batch size they give.
#include <gtest/gtest.h>

#include <string>

#include "builtin_transporters.h"
#include "fjord/engine/data_node.h"
#include "fjord/engine/thread_config.h"

namespace fjord::engine {
namespace {

Result<std::string> layout_of(const std::string& ndbd_lines) {
  DataNodeOptions o;
  o.config_text = "[ndbd]\nNodeId=1\nDataMemory=16M\n" + ndbd_lines + "[api]\nNodeId=50\n";
  o.node_id = 1;
  o.registry = &tools::builtin_registry();
  auto node = DataNode::create(o);
  if (!node) return node.status();
  return (*node)->layout_text();
}

bool has_two_cpus() {
  auto machine = detect_machine_topology();
  return machine && machine->cpu_count() >= 2;
}

TEST(NodeSchedulerKnobsTest, TheLayoutShowsTheExecutionTimerAndTheBatchOfTheResponsiveness) {
  auto layout = layout_of("SingleThreaded=1\nSchedulerExecutionTimer=400\nSchedulerResponsiveness=10\n");
  ASSERT_TRUE(layout) << layout.status().to_string();
  EXPECT_NE(layout->find("sending: after 400 us of executing, and before waiting (SchedulerExecutionTimer=400); "
                         "batches of up to 32 signals\n"),
            std::string::npos)
      << *layout;
  layout = layout_of("SingleThreaded=1\n");
  ASSERT_TRUE(layout) << layout.status().to_string();
  EXPECT_NE(layout->find("sending: after every batch (SchedulerExecutionTimer=0); batches of up to 256 signals\n"),
            std::string::npos)
      << *layout;
}

TEST(NodeSchedulerKnobsTest, ThreadConfigPlacementWinsAndTheOtherThreadsTakeTheGivenCpus) {
  if (!has_two_cpus()) GTEST_SKIP() << "this machine has fewer than 2 CPUs for the layout to name";
  auto layout = layout_of(
      "ThreadConfig=ldm={cpubind=0},recv,main,rep,io,wd\nLockExecuteThreadToCPU=0-1\nLockMaintThreadsToCPU=0\n");
  ASSERT_TRUE(layout) << layout.status().to_string();
  EXPECT_NE(layout->find("ldm 0: blocks LDM(0); cpus bind 0;"), std::string::npos) << *layout;
  // CPU 0 is ThreadConfig's: main, recv and rep share what is left.
  EXPECT_NE(layout->find("main 0: blocks DICT,TC(0); cpus bind 1;"), std::string::npos) << *layout;
  EXPECT_NE(layout->find("recv 0: blocks -; cpus bind 1;"), std::string::npos) << *layout;
  EXPECT_NE(layout->find("wd 0: the watchdog (reports a loop step longer than 6000 ms); cpus bind 0"),
            std::string::npos)
      << *layout;
}

TEST(NodeSchedulerKnobsTest, ASingleThreadedNodeRunsOnTheFirstGivenCpu) {
  if (!has_two_cpus()) GTEST_SKIP() << "this machine has fewer than 2 CPUs for the layout to name";
  auto layout = layout_of("SingleThreaded=1\nLockExecuteThreadToCPU=1\n");
  ASSERT_TRUE(layout) << layout.status().to_string();
  EXPECT_NE(layout->find("single 0: blocks DICT,TC(0),LDM(0); cpus bind 1;"), std::string::npos) << *layout;
}

TEST(NodeSchedulerKnobsTest, TooFewCpusForALayoutWithTcThreadsAreRefusedNamingTheSection) {
  auto layout = layout_of("MaxNoOfExecutionThreads=9\nLockExecuteThreadToCPU=0\n");
  ASSERT_FALSE(layout);
  EXPECT_NE(layout.status().message().find("LockExecuteThreadToCPU=0 leaves 1 CPU for 9 execution threads"),
            std::string::npos)
      << layout.status().message();
  EXPECT_EQ(layout.status().message().rfind("<config>:1: ", 0), 0u) << layout.status().message();
}

}  // namespace
}  // namespace fjord::engine
