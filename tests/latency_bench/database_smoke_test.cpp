// The real latency_bench against a real data node, with small tables: the
// access table over tcp and shm, throughput for a fraction of a second
// (closed and open loop), the no-argument default with a small row count,
// your --config with a [shm] or [tcp] section and --start-node, and --plot.
// Checks counts, the JSON schema, exit codes and that nothing is left
// behind; never a time. FJORD_LATENCY_BENCH names the program and
// FJORD_DATANODE the data node (tests/latency_bench/meson.build sets both).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "builtin_transporters.h"
#include "commands.h"
#include "json_value.h"
#include "process.h"
#include "program_run.h"

namespace fjord::bench {
namespace {

using test::JsonValue;

bool runnable(const std::string& type) {
  const transport::TransporterFactory* f = tools::builtin_registry().find(type);
  return f && f->probe().is_ok();
}

class DatabaseProgram : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(program().empty()) << "FJORD_LATENCY_BENCH must name the latency_bench program (meson sets it)";
    const char* node = std::getenv("FJORD_DATANODE");
    ASSERT_TRUE(node && ::access(node, X_OK) == 0) << "FJORD_DATANODE must name fjord-datanode (meson sets it)";
  }
};

// The generated config's directory, named in the node description.
std::string temp_dir_of(const JsonValue& j) {
  const std::string& node = j["conditions"]["node"].text;
  const std::size_t at = node.find("config and log in ");
  if (at == std::string::npos) return "";
  const std::size_t start = at + std::string("config and log in ").size();
  return node.substr(start, node.find(',', start) - start);
}

// Every method measured, with the counts a small table must give.
void expect_access_results(const JsonValue& j, const std::string& transporter, uint64_t rows, uint64_t iterations) {
  int methods = 0;
  for (const JsonValue& r : j["results"].items) {
    if (r["transporter"].text != transporter) continue;
    ++methods;
    const std::string access = r["access"].text;
    ASSERT_EQ(r["status"].text, "measured")
        << transporter << " " << access << ": " << (r.has("reason") ? r["reason"].text : "");
    const double per_sample = r["rows_per_sample"].number;
    if (access == "full_scan") {
      EXPECT_EQ(per_sample, static_cast<double>(rows));
      EXPECT_EQ(r["samples"].number, 3);
    } else {
      EXPECT_EQ(r["samples"].number, static_cast<double>(iterations)) << access;
      const bool batched = access == "batched_pk" || access == "batched_uk" || access == "index_range";
      EXPECT_EQ(per_sample, batched ? 20.0 : 1.0) << access;
      EXPECT_EQ(r["batch"].number, per_sample);
    }
    EXPECT_EQ(r["rows"].number, r["samples"].number * per_sample) << access;
    EXPECT_GT(r["us_per_row"]["p50"].number, 0) << access;
    EXPECT_LE(r["us_per_row"]["p50"].number, r["us_per_row"]["p99"].number) << access;
    EXPECT_EQ(r["us_per_row"]["count"].number, r["samples"].number) << access;
    const bool no_reference = access == "full_scan" || access == "serial_insert" || access == "serial_update";
    EXPECT_TRUE(r["reference_us_per_row"].has("tcp") || no_reference) << access;
  }
  EXPECT_EQ(methods, 9) << transporter;
}

TEST_F(DatabaseProgram, AccessOverTcpAndShm) {
  for (const std::string type : {"tcp", "shm"}) {
    if (!runnable(type)) {
      std::printf("skipping %s: it cannot run here\n", type.c_str());
      continue;
    }
    const ProgramRun r =
        run("access --transporter " + type + " --rows 300 --iterations 40 --warmup 4 --no-compare --json");
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    const JsonValue j = json_of(r);
    EXPECT_EQ(j["mode"].text, "access");
    EXPECT_EQ(j["conditions"]["rows"].number, 300);
    EXPECT_EQ(j["conditions"]["batch"].number, 20);
    EXPECT_NE(j["conditions"]["node_layout"].text.find("LDM(0)"), std::string::npos) << "the node said its layout";
    ASSERT_EQ(j["transporters"].items.size(), 1u);
    EXPECT_EQ(j["transporters"][0]["transporter"].text, type);
    expect_access_results(j, type, 300, 40);
    EXPECT_TRUE(j["memory"]["measured"].boolean) << j["memory"]["reason"].text;
    EXPECT_GT(j["memory"]["pages_after"].number, j["memory"]["pages_before"].number);
    EXPECT_EQ(j["load"]["rows"].number, 300);
    const std::string dir = temp_dir_of(j);
    ASSERT_FALSE(dir.empty()) << j["conditions"]["node"].text;
    EXPECT_FALSE(std::filesystem::exists(dir)) << dir << " was left behind";
  }
}

TEST_F(DatabaseProgram, NoArgumentDefaultWithASmallTable) {
  const ProgramRun r = run("--rows 200 --iterations 30 --warmup 3 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const JsonValue j = json_of(r);
  EXPECT_EQ(j["mode"].text, "access");
  std::vector<std::string> measured;
  for (const JsonValue& t : j["transporters"].items) {
    if (t["status"].text == "measured")
      measured.push_back(t["transporter"].text);
    else
      EXPECT_FALSE(t["reason"].text.empty()) << t["transporter"].text << " skipped without a reason";
  }
  // tcp-tls is tcp with TLS on both ends, measured wherever tcp is.
  for (const std::string type : {"tcp", "tcp-tls", "shm"})
    if (runnable(type == "tcp-tls" ? "tcp" : type)) {
      EXPECT_NE(std::find(measured.begin(), measured.end(), type), measured.end()) << type;
      expect_access_results(j, type, 200, 30);
    }
  // Compared by default: redis (or why not) and the bare TCP floor, whose
  // slices (in turn with serial pk's) add up to the run's iterations.
  std::vector<std::string> compared;
  for (const JsonValue& c : j["compare"].items) {
    compared.push_back(c["name"].text);
    const std::string& status = c["status"].text;
    EXPECT_TRUE(status == "measured" || status == "not installed") << c["name"].text << ": " << status;
    if (c["name"].text == "floor.bare_tcp_busy") {
      EXPECT_EQ(c["samples"].number, 30) << "floor samples";
    }
  }
  for (const char* name :
       {"floor.bare_tcp_busy", "redis.get.tcp", "redis.mget.tcp", "redis.get.unix", "redis.mget.unix"})
    EXPECT_NE(std::find(compared.begin(), compared.end(), name), compared.end()) << name;
  // Beside tcp's and shm's serial pk: the same through a Session of a
  // shared ClusterConnection, as many samples.
  for (const std::string type : {"tcp", "shm"}) {
    if (!runnable(type)) continue;
    const std::string name = "session." + type + ".serial_pk";
    const auto at = std::find(compared.begin(), compared.end(), name);
    ASSERT_NE(at, compared.end()) << name;
    const JsonValue& c = j["compare"][static_cast<std::size_t>(at - compared.begin())];
    EXPECT_EQ(c["status"].text, "measured") << name;
    EXPECT_EQ(c["samples"].number, 30) << name;
  }
  EXPECT_EQ(j["targets"].items.size(), 7u);
  // Around the shm rows, the cache-line mailbox (the host's cross-core
  // state), named beside the shm targets.
  if (runnable("shm")) {
    for (const char* name : {"floor.mailbox.before", "floor.mailbox.after"}) {
      const auto at = std::find(compared.begin(), compared.end(), name);
      ASSERT_NE(at, compared.end()) << name;
      const JsonValue& c = j["compare"][static_cast<std::size_t>(at - compared.begin())];
      EXPECT_EQ(c["status"].text, "measured") << name;
      EXPECT_EQ(c["samples"].number, 20000) << name;
    }
    for (const JsonValue& t : j["targets"].items)
      if (t["target"].text.find("over shm") != std::string::npos) {
        ASSERT_EQ(t.fields.count("host"), 1u) << t["target"].text;
        EXPECT_NE(t["host"].text.find("cache-line mailbox p50 "), std::string::npos) << t["target"].text;
      }
  }
  EXPECT_FALSE(std::filesystem::exists(temp_dir_of(j)));
}

TEST_F(DatabaseProgram, TableByDefaultWithNdb2004Beside) {
  const ProgramRun r = run("access --transporter tcp --rows 100 --iterations 20 --warmup 2 --no-compare");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* text : {"Serial pk access", "Batched pk access (20 rows)", "Index range (20 rows)", "NDB 2004 TCP",
                           "NDB 2004 SCI", "data node: fjord-datanode started here", "memory: DataMemory pages in use"})
    EXPECT_NE(r.out.find(text), std::string::npos) << text << "\n" << r.out;
  EXPECT_NE(
      r.out.find(
          "NDB 2004 TCP and NDB 2004 SCI: NDB's own figures of 2004, from the MySQL Cluster manual, SCI Sockets page"),
      std::string::npos)
      << "the notes name the reference's source\n"
      << r.out;
  for (const char* word : {"seed", "issue"}) EXPECT_EQ(r.out.find(word), std::string::npos) << word << "\n" << r.out;
  EXPECT_TRUE(r.err.empty()) << "no progress line when stderr is not a terminal: " << r.err;
}

TEST_F(DatabaseProgram, ThroughputClosedAndOpenLoop) {
  const std::string type = runnable("shm") ? "shm" : "tcp";
  ProgramRun r = run("throughput --transporter " + type + " --rows 500 --duration 0.3 --mix 80/20 --no-compare --json");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  JsonValue j = json_of(r);
  EXPECT_EQ(j["mode"].text, "throughput");
  EXPECT_EQ(j["status"].text, "measured");
  EXPECT_GT(j["operations"].number, 0);
  EXPECT_EQ(j["operations"].number, j["reads"].number + j["updates"].number);
  EXPECT_EQ(j["operations"].number, j["transactions"].number) << "one operation per transaction by default";
  EXPECT_EQ(j["failures"].number, 0);
  EXPECT_EQ(j["latency_us"]["count"].number, j["operations"].number);
  EXPECT_FALSE(j["conditions"]["open_loop"].boolean);
  EXPECT_EQ(j["conditions"]["ldm_threads"].number, 1);
  ASSERT_EQ(j["executors"].items.size(), 1u);

  r = run("throughput --transporter " + type +
          " --rows 500 --duration 0.3 --rate 2k --executors 2 --definers 2 --batch 2 --no-compare --json");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  j = json_of(r);
  EXPECT_TRUE(j["conditions"]["open_loop"].boolean);
  EXPECT_EQ(j["executors"].items.size(), 2u);
  EXPECT_GT(j["operations"].number, 0);
  // Scheduled before the window closed: 2000/s over 0.03 s of warm-up and 0.3 s.
  EXPECT_LE(j["operations"].number, 660);
  EXPECT_LE(j["transactions"].number, j["operations"].number);
  EXPECT_EQ(j["latency_basis"].text.find("from its scheduled send time"), 0u);
}

// --threads-per-api-node with --rounds: both reports, and the second's target
// judged on the median of one ratio per round.
TEST_F(DatabaseProgram, OneApiNodeAgainstSeveralOverRounds) {
  const std::string type = runnable("shm") ? "shm" : "tcp";
  ProgramRun r = run("throughput --transporter " + type +
                     " --rows 500 --duration 0.2 --threads-per-api-node 2 --rounds 3 --no-compare --json");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const std::size_t newline = r.out.find('\n');
  ASSERT_NE(newline, std::string::npos) << r.out;
  auto separate = test::JsonReader::parse(r.out.substr(0, newline));
  auto shared = test::JsonReader::parse(r.out.substr(newline + 1));
  ASSERT_TRUE(separate) << r.out;
  ASSERT_TRUE(shared) << r.out;
  EXPECT_FALSE((*separate)["conditions"]["one_api_node"].boolean);
  EXPECT_TRUE((*shared)["conditions"]["one_api_node"].boolean);
  EXPECT_GT((*shared)["operations"].number, 0);
  const test::JsonValue& targets = (*shared)["targets"];
  ASSERT_EQ(targets.items.size(), 1u) << r.out;
  const std::string basis = targets[0]["basis"].text;
  EXPECT_EQ(basis.find("median of 3 rounds' ratios"), 0u) << basis;
  // Three ratios, each a positive number with three decimals.
  std::size_t ratios = 0;
  for (std::size_t at = basis.find(':'); (at = basis.find(' ', at)) != std::string::npos; ++at)
    if (std::atof(basis.c_str() + at + 1) > 0) ++ratios;
  EXPECT_EQ(ratios, 3u) << basis;

  r = run("throughput --rounds 3");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--rounds 3 needs --threads-per-api-node"), std::string::npos) << r.err;
}

// Your config: one section decides the medium; --start-node runs the node.
std::string user_config(const std::string& dir, const std::string& link_section, uint16_t port) {
  const std::string unique = std::to_string(::getpid());
  std::string text =
      "[ndbd default]\nDataMemory=64M\n[ndbd]\nNodeId=1\nHostName=127.0.0.1\nServerPort=" + std::to_string(port) +
      "\nDataDir=" + dir + "\nSingleThreaded=1\nControlSocket=@latency-bench-smoke-" + unique + "\n[api]\nNodeId=50\n";
  text += "[" + link_section + "]\nNodeId1=1\nNodeId2=50\n";
  if (link_section == "shm") text += "ShmKey=" + unique + "7\n";
  return text;
}

TEST_F(DatabaseProgram, YourConfigChoosesTheTransporterBySection) {
  const std::string dir = ::testing::TempDir() + "latency_bench_config_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  for (const std::string section : {"shm", "tcp"}) {
    if (!runnable(section)) continue;
    auto port = free_tcp_port();
    ASSERT_TRUE(port);
    const std::string path = dir + "/cluster.ini";
    std::ofstream(path) << user_config(dir, section, *port);
    const ProgramRun r = run("--config '" + path +
                             "' --api-node 50 --start-node --rows 100 --iterations 20 "
                             "--warmup 2 --no-compare --json");
    ASSERT_EQ(r.exit_code, 0) << section << ": " << r.err << r.out;
    const JsonValue j = json_of(r);
    ASSERT_EQ(j["transporters"].items.size(), 1u);
    EXPECT_EQ(j["transporters"][0]["transporter"].text, section);
    EXPECT_EQ(j["transporters"][0]["link"].text, "[" + section + "] link 1-50");
    EXPECT_EQ(j["conditions"]["config"].text, path);
    expect_access_results(j, section, 100, 20);
  }
  std::filesystem::remove_all(dir);
}

TEST_F(DatabaseProgram, PlotWritesAChart) {
  if (find_in_path("gnuplot").empty()) GTEST_SKIP() << "gnuplot is not installed (Debian package gnuplot-nox)";
  for (const char* extension : {".png", ".svg"}) {
    const std::string path = ::testing::TempDir() + "latency_bench_plot_" + std::to_string(::getpid()) + extension;
    const ProgramRun r =
        run("access --transporter tcp --rows 100 --iterations 20 --warmup 2 --no-compare --plot '" + path + "'");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("plot: " + path), std::string::npos) << r.out;
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0) << path << " was not written; stderr: " << r.err;
    EXPECT_GT(st.st_size, 0);
    ::unlink(path.c_str());
  }
}

// Each sweep row: the three methods measured with the counts asked for,
// ordered percentiles, a share, and the node's CPU use.
void expect_sweep_row(const JsonValue& row, const std::string& value, uint64_t iterations) {
  EXPECT_EQ(row["value"].text, value);
  EXPECT_EQ(row["transporter"].text, "tcp");
  ASSERT_EQ(row["status"].text, "measured") << (row.has("reason") ? row["reason"].text : "");
  for (const char* method : {"serial_pk", "serial_insert", "serial_update"}) {
    const JsonValue& m = row[method];
    EXPECT_EQ(m["status"].text, "measured") << method;
    EXPECT_EQ(m["samples"].number, static_cast<double>(iterations)) << method;
    EXPECT_GT(m["p50_us"].number, 0) << method;
    EXPECT_LE(m["p50_us"].number, m["p99_us"].number) << method;
    EXPECT_LE(m["p99_us"].number, m["p999_us"].number) << method;
    EXPECT_GE(m["over_share"].number, 0) << method;
    EXPECT_LE(m["over_share"].number, 1) << method;
  }
  EXPECT_TRUE(row["node_cpu"].has("on_cpu")) << "the node's CPU use was read from /proc";
}

TEST_F(DatabaseProgram, ASweepRestartsTheNodeForEachValueAndGivesOneRowEach) {
  ProgramRun r =
      run("access --sweep SchedulerSpinTimer=0,50 --transporter tcp --rows 100 --iterations 20 --warmup 2 --over 1ms "
          "--poll sleep --json");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  JsonValue j = json_of(r);
  EXPECT_EQ(j["sweep"]["param"].text, "SchedulerSpinTimer");
  EXPECT_EQ(j["sweep"]["over_us"].number, 1000);
  EXPECT_EQ(j["conditions"]["poll"].text, "sleep");
  ASSERT_EQ(j["rows"].items.size(), 2u);
  expect_sweep_row(j["rows"][0], "0", 20);
  expect_sweep_row(j["rows"][1], "50", 20);
  // Each value ran on a node of its own, which says so.
  EXPECT_NE(j["rows"][0]["node_layout"].text.find("spintime 0 us"), std::string::npos)
      << j["rows"][0]["node_layout"].text;
  EXPECT_NE(j["rows"][1]["node_layout"].text.find("spintime 50 us"), std::string::npos)
      << j["rows"][1]["node_layout"].text;

  r =
      run("access --sweep SchedulerExecutionTimer=0,400 --node-param SchedulerSpinTimer=0 --transporter tcp "
          "--rows 100 --iterations 20 --warmup 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  j = json_of(r);
  ASSERT_EQ(j["rows"].items.size(), 2u);
  ASSERT_EQ(j["sweep"]["node_params"].items.size(), 1u);
  expect_sweep_row(j["rows"][0], "0", 20);
  expect_sweep_row(j["rows"][1], "400", 20);
  const std::string& timed = j["rows"][1]["node_layout"].text;
  EXPECT_NE(timed.find("(SchedulerExecutionTimer=400)"), std::string::npos) << timed;
  EXPECT_NE(timed.find("spintime 0 us"), std::string::npos) << timed;
}

TEST_F(DatabaseProgram, ASweepPlotsEachValuesDistribution) {
  if (find_in_path("gnuplot").empty()) GTEST_SKIP() << "gnuplot is not installed (Debian package gnuplot-nox)";
  const std::string path = ::testing::TempDir() + "latency_bench_sweep_" + std::to_string(::getpid()) + ".svg";
  const ProgramRun r =
      run("access --sweep SchedulerSpinTimer=0,20 --transporter tcp --rows 100 --iterations 10 "
          "--warmup 1 --plot '" +
          path + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("plot: " + path), std::string::npos) << r.out;
  std::ifstream svg(path);
  const std::string chart((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  ::unlink(path.c_str());
  EXPECT_NE(chart.find("SchedulerSpinTimer=20"), std::string::npos) << "each value has its line in the legend";
}

TEST_F(DatabaseProgram, BadSweepOptionsExit2NamingTheOption) {
  ProgramRun r = run("access --over 2ms");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--over: only with --sweep"), std::string::npos) << r.err;
  r = run("access --sweep SchedulerSpinTimer");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--sweep: 'SchedulerSpinTimer' is not PARAM=V1,V2,..."), std::string::npos) << r.err;
  r = run("access --sweep SchedulerSpinTimer=0,,5");
  EXPECT_EQ(r.exit_code, 2);
  r = run("access --sweep SchedulerSpinTimer=0,900 --transporter tcp --rows 100 --iterations 10");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("SchedulerSpinTimer takes 0..500 microseconds"), std::string::npos) << r.out;
}

TEST_F(DatabaseProgram, BadOptionsExit2NamingTheOption) {
  ProgramRun r = run("throughput --mix 1/2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "latency_bench: --mix: '1/2' is not READ/UPDATE percentages adding up to 100 (examples: 100/0, 90/10, "
            "50/50)\nTry 'latency_bench --help' for the options.\n");
  r = run("--rate 5k");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--rate applies to throughput, not to access"), std::string::npos) << r.err;
  r = run("--config /nonexistent/cluster.ini --api-node 50");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("/nonexistent/cluster.ini"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace fjord::bench
