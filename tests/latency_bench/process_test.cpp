// The child-process launcher: output captured by pipe or memory file, exit
// codes (and signals) reported, CPU pinning applied before the child runs,
// a missing program reported by the child, and a child killed with us.
#include "process.h"

#include <gtest/gtest.h>
#include <sched.h>

#include "fjord/base/clock.h"
#include "machine.h"

namespace fjord::bench {
namespace {

constexpr uint64_t kSecondNs = 1'000'000'000ULL;

TEST(LatencyBenchProcess, MemoryOutputHoldsStdoutAndStderrAndTheExitCode) {
  auto child =
      spawn(SpawnSpec{{"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, {}, -1, SpawnSpec::Output::kMemory});
  ASSERT_TRUE(child) << child.status().to_string();
  auto code = child->wait_for(10 * kSecondNs);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 3);
  EXPECT_EQ(child->read_output(0), "out\nerr\n");
}

TEST(LatencyBenchProcess, PipeOutputIsReadUntilEofAndEnvironmentIsAdded) {
  auto child = spawn(SpawnSpec{{"/bin/sh", "-c", "echo $LATENCY_BENCH_TEST_VALUE"},
                               {"LATENCY_BENCH_TEST_VALUE=42"},
                               -1,
                               SpawnSpec::Output::kCapture});
  ASSERT_TRUE(child);
  EXPECT_EQ(child->read_output(monotonic_ns() + 10 * kSecondNs), "42\n");
  auto code = child->wait_for(10 * kSecondNs);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 0);
}

TEST(LatencyBenchProcess, AMissingProgramExits127WithAMessage) {
  auto child = spawn(SpawnSpec{{"latency-bench-no-such-program"}, {}, -1, SpawnSpec::Output::kMemory});
  ASSERT_TRUE(child);
  auto code = child->wait_for(10 * kSecondNs);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 127);
  EXPECT_EQ(child->read_output(0).rfind("latency_bench: cannot run latency-bench-no-such-program: ", 0), 0u);
  EXPECT_EQ(find_in_path("latency-bench-no-such-program"), "");
  EXPECT_NE(find_in_path("sh"), "");
}

TEST(LatencyBenchProcess, ForkedChildIsPinnedAndStoppedBySignal) {
  const std::vector<int> cpus = allowed_cpus();
  ASSERT_FALSE(cpus.empty());
  const int cpu = cpus.back();
  auto pinned = fork_child(cpu, [cpu] {
    cpu_set_t set;
    CPU_ZERO(&set);
    sched_getaffinity(0, sizeof set, &set);
    return CPU_COUNT(&set) == 1 && CPU_ISSET(cpu, &set) ? 0 : 1;
  });
  ASSERT_TRUE(pinned);
  auto code = pinned->wait_for(10 * kSecondNs);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 0) << "the child did not run on CPU " << cpu << " only";

  auto sleeper = spawn(SpawnSpec{{"/bin/sleep", "60"}, {}, -1, SpawnSpec::Output::kDiscard});
  ASSERT_TRUE(sleeper);
  EXPECT_TRUE(sleeper->running());
  EXPECT_EQ(sleeper->wait_for(0).status().code(), StatusCode::kTimeout);
  sleeper->stop();
  EXPECT_FALSE(sleeper->running());
  auto stopped = sleeper->wait_for(0);
  ASSERT_TRUE(stopped);
  EXPECT_EQ(*stopped, 128 + 15);  // SIGTERM
}

TEST(LatencyBenchProcess, CpuListsAndChecks) {
  EXPECT_EQ(cpu_list_text({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
  EXPECT_EQ(cpu_list_text({}), "none");
  const Status bad = check_cpus({4000});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.message().rfind("--cpus: CPU 4000 is not available to this process (allowed: ", 0), 0u);
  EXPECT_TRUE(check_cpus(default_cpus()));
}

TEST(LatencyBenchProcess, CpuMeterSeesASpinningThreadOnItsCpu) {
  const CpuMeter meter;
  const uint64_t until = monotonic_ns() + 50'000'000;
  while (monotonic_ns() < until) {
  }
  const CpuUsage usage = meter.read();
  EXPECT_GE(usage.wall_ns, 50'000'000u);
  EXPECT_GT(usage.cpu_ns, 0u);
  EXPECT_LE(usage.on_cpu_share(), 1.05);  // accounting granularity; no timing claim beyond that
}

}  // namespace
}  // namespace fjord::bench
