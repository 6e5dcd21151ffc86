// The real latency_bench program, run with small counts: the JSON parses,
// the counts match what was asked, bad options exit 2 with their message,
// and --server/--client talk. No timing assertions: figures are not checked.
// FJORD_LATENCY_BENCH names the program (set by tests/latency_bench/meson.build).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "builtin_transporters.h"
#include "commands.h"
#include "fjord/base/clock.h"
#include "json_value.h"
#include "process.h"
#include "program_run.h"

namespace fjord::bench {
namespace {

using test::JsonReader;
using test::JsonValue;

bool built_in(const std::string& type) {
  for (const std::string& name : built_in_transporters())
    if (name == type) return true;
  return false;
}

// The transporters that can run here (probe() is ok).
std::vector<std::string> runnable() {
  std::vector<std::string> out;
  for (const std::string& name : built_in_transporters())
    if (tools::builtin_registry().find(name)->probe()) out.push_back(name);
  return out;
}

class LatencyBenchProgram : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(program().empty()) << "FJORD_LATENCY_BENCH must name the latency_bench program (meson sets it)";
    ASSERT_EQ(::access(program().c_str(), X_OK), 0) << program();
  }
};

void expect_ping(const JsonValue& j, const std::string& transporter, const char* poll, uint64_t iterations) {
  EXPECT_EQ(j["mode"].text, "ping");
  EXPECT_EQ(j["transporter"].text, transporter);
  EXPECT_EQ(j["status"].text, "measured");
  EXPECT_EQ(j["poll"].text, poll);
  EXPECT_EQ(j["iterations"].number, static_cast<double>(iterations));
  EXPECT_EQ(j["rtt_ns"]["count"].number, static_cast<double>(iterations));
  EXPECT_GT(j["rtt_ns"]["p50"].number, 0);
  EXPECT_LE(j["rtt_ns"]["p50"].number, j["rtt_ns"]["max"].number);
  EXPECT_EQ(j["cpus"].items.size(), 2u);
  EXPECT_GT(j["on_cpu"]["wall_ns"].number, 0);
}

TEST_F(LatencyBenchProgram, TcpPingBothPollModes) {
  for (const char* poll : {"busy", "sleep"}) {
    const ProgramRun r = run(std::string("ping --transporter tcp --iterations 300 --warmup 20 --json --poll ") + poll);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    expect_ping(json_of(r), "tcp", poll, 300);
  }
}

TEST_F(LatencyBenchProgram, ShmPing) {
  if (!built_in("shm")) GTEST_SKIP() << "shm is not built into this program yet";
  const ProgramRun r = run("ping --transporter shm --iterations 300 --warmup 20 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_ping(json_of(r), "shm", "busy", 300);
}

TEST_F(LatencyBenchProgram, StreamCountsMatch) {
  for (const std::string& type : runnable()) {
    const ProgramRun r =
        run("ping --stream --transporter " + type + " --size 4096 --iterations 3000 --warmup 100 --json");
    ASSERT_EQ(r.exit_code, 0) << type << ": " << r.err;
    const JsonValue j = json_of(r);
    EXPECT_EQ(j["mode"].text, "stream");
    EXPECT_EQ(j["status"].text, "measured");
    EXPECT_EQ(j["size"].number, 4096);
    EXPECT_EQ(j["stream"]["messages"].number, 3000);
    EXPECT_GT(j["stream"]["gb_per_s"].number, 0);
    EXPECT_FALSE(j.has("rtt_ns"));
  }
}

TEST_F(LatencyBenchProgram, ConfigFileSectionChoosesTheMedium) {
  const std::string path = ::testing::TempDir() + "latency_bench_smoke_" + std::to_string(::getpid()) + ".ini";
  std::ofstream(path) << "[tcp default]\nSendBufferMemory=1M\n[tcp]\nNodeId1=1\nNodeId2=2\nHostName1=127.0.0.1\n"
                         "HostName2=127.0.0.1\nPortNumber=0\n";
  const ProgramRun r = run("ping --config '" + path + "' --iterations 100 --warmup 10 --json");
  ::unlink(path.c_str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const JsonValue j = json_of(r);
  expect_ping(j, "tcp", "busy", 100);
  EXPECT_NE(j["label"].text.find(path), std::string::npos) << j["label"].text;
}

TEST_F(LatencyBenchProgram, CompareListsEveryFloorAndPeerOfTheMode) {
  const ProgramRun r = run("ping --transporter tcp --iterations 200 --warmup 10 --compare --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const JsonValue j = json_of(r);
  std::vector<std::string> names;
  for (const JsonValue& row : j["compare"].items) {
    names.push_back(row["name"].text);
    const std::string status = row["status"].text;
    EXPECT_TRUE(status == "measured" || status == "not installed" || status == "failed") << status;
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"floor.mailbox", "floor.bare_tcp_busy", "peer.ucx_posix", "peer.ucx_tcp"}));
  EXPECT_EQ(j["compare"][0]["status"].text, "measured");  // the floors are ours: always there
  EXPECT_EQ(j["compare"][1]["status"].text, "measured");
  ASSERT_EQ(j["targets"].items.size(), 1u);
  EXPECT_TRUE(j["targets"][0]["evaluated"].boolean);
}

TEST_F(LatencyBenchProgram, PingAllOneReportOverEveryTransporter) {
  const ProgramRun r = run("ping-all --iterations 200 --warmup 10 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const JsonValue j = json_of(r);
  EXPECT_EQ(j["mode"].text, "all");
  std::vector<std::string> runs;
  for (const JsonValue& row : j["runs"].items) {
    runs.push_back(row["name"].text);
    // Runnable transporters must measure, with a peer process or a peer thread.
    if (row["status"].text != "unavailable") {
      EXPECT_EQ(row["status"].text, "measured")
          << row["name"].text << ": " << (row.has("reason") ? row["reason"].text : "");
    }
  }
  for (const std::string& type : runnable())
    for (const char* what : {".busy", ".sleep", ".stream"})
      EXPECT_NE(std::find(runs.begin(), runs.end(), "fjord." + type + what), runs.end()) << type << what;
  EXPECT_EQ(j["compare"].items.size(), 7u);
  EXPECT_EQ(j["targets"].items.size(), 5u);
}

TEST_F(LatencyBenchProgram, TableByDefault) {
  const ProgramRun r = run("ping --iterations 100 --warmup 10");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("round trip (RTT), microseconds"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fjord tcp"), std::string::npos);
  EXPECT_TRUE(r.err.empty()) << "no progress line when stderr is not a terminal: " << r.err;
}

TEST_F(LatencyBenchProgram, BadOptionsExit2NamingTheOption) {
  ProgramRun r = run("--poll fast");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "latency_bench: --poll: 'fast' is not one of: busy, sleep\n"
            "Try 'latency_bench --help' for the options.\n");
  EXPECT_TRUE(r.out.empty());
  r = run("ping --cpus 0,4000");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--cpus: CPU 4000 is not available to this process (allowed: "), std::string::npos) << r.err;
  r = run("ping --config /nonexistent/cluster.ini");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("/nonexistent/cluster.ini"), std::string::npos) << r.err;
  r = run("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("usage:"), std::string::npos);
}

TEST_F(LatencyBenchProgram, ServerAndClient) {
  auto port = free_tcp_port();
  ASSERT_TRUE(port);
  const std::string port_text = std::to_string(*port);
  auto server = spawn(SpawnSpec{{program(), "-server", "--port", port_text}, {}, -1, SpawnSpec::Output::kCapture});
  ASSERT_TRUE(server);
  const ProgramRun r = run("-client 127.0.0.1 --port " + port_text + " --iterations 200 --warmup 10 --json");
  const ProgramRun s = run("-client 127.0.0.1 --port " + port_text + " --stream --iterations 2000 --warmup 0 --json");
  server->stop();
  const std::string server_log = server->read_output(monotonic_ns() + 1'000'000'000ULL);
  ASSERT_EQ(r.exit_code, 0) << r.err << "\nserver:\n" << server_log;
  const JsonValue j = json_of(r);
  EXPECT_EQ(j["mode"].text, "client");
  EXPECT_EQ(j["rtt_ns"]["count"].number, 200);
  ASSERT_EQ(s.exit_code, 0) << s.err << "\nserver:\n" << server_log;
  EXPECT_EQ(json_of(s)["stream"]["messages"].number, 2000);
  EXPECT_NE(server_log.find("session ended (bye): 210 pings"), std::string::npos) << server_log;
}

}  // namespace
}  // namespace fjord::bench
