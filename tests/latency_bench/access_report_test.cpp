// The access and throughput reports from fixed figures (no measurement):
// NDB's access-method table, the JSON schema (one object per transporter and
// access method), the gnuplot script, the targets' arithmetic, the redis
// parsers, the embedded node's config, and the definer-executor ring.
#include "access_report.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "builtin_transporters.h"
#include "fjord/base/clock.h"
#include "fjord/engine/cluster_config.h"
#include "json_value.h"
#include "node_process.h"
#include "redis_peer.h"
#include "throughput.h"
#include "throughput_report.h"

namespace fjord::bench {
namespace {

using test::JsonReader;
using test::JsonValue;

MachineFacts fixed_machine() {
  MachineFacts m;
  m.online_cpus = 2;
  m.allowed_cpus = "0-1";
  m.cpu_model = "Test CPU";
  m.kernel = "6.1-test";
  m.clocksource = "tsc";
  m.clock_read_ns = 21;
  m.load_start = 0.1;
  m.started_utc = "2025-01-01T00:00:00Z";
  return m;
}

LatencySummary summary(uint64_t p50_ns, uint64_t p99_ns) {
  LatencySummary s;
  s.count = 1000;
  s.min_ns = p50_ns / 2;
  s.p50_ns = p50_ns;
  s.p99_ns = p99_ns;
  s.p999_ns = p99_ns * 2;
  s.max_ns = p99_ns * 3;
  s.mean_ns = static_cast<double>(p50_ns);
  return s;
}

// tcp and shm measured (shm's serial pk at 1.5 us, batched at 0.25 us/row),
// sim skipped, one failed cell, a redis row and the bare TCP floor.
AccessReport fixed_access_report() {
  AccessReport r;
  r.machine = fixed_machine();
  r.conditions.title = "latency_bench access: test";
  r.conditions.rows = 1000;
  r.conditions.row_bytes = 100;
  r.conditions.batch = 20;
  r.conditions.iterations = 500;
  r.conditions.warmup = 50;
  r.conditions.full_scans = 3;
  r.conditions.poll = "busy";
  r.conditions.cpus = {0, 1};
  r.conditions.node = "fjord-datanode started here (test)";
  r.conditions.node_layout = "node 1 thread layout (test):\nsingle 0: blocks DICT,TC(0),LDM(0)\n";
  r.conditions.config = "generated";
  r.conditions.node_schedule = {true, 0.98, 0.01};
  r.transporters = {{"tcp", Outcome::kMeasured, "", 50, "[tcp] link 1-50"},
                    {"shm", Outcome::kMeasured, "", 60, "[shm] link 1-60"},
                    {"sim", Outcome::kUnavailable, "in-process only", kNoNode, ""}};
  uint64_t base = 10'000;
  for (const char* t : {"tcp", "shm"}) {
    for (AccessMethod m : kAccessMethods) {
      AccessCell c;
      c.transporter = t;
      c.method = m;
      c.rows_per_sample = rows_per_sample(m, 20, 1000);
      c.samples = m == AccessMethod::kFullScan ? 3 : 500;
      c.rows = c.samples * c.rows_per_sample;
      c.per_row_ns = summary(base, base * 2);
      c.usage = CpuUsage{1'000'000'000, 900'000'000, 3};
      r.cells.push_back(c);
    }
    base = 1'500;
  }
  r.cells[kAccessMethods.size() + 1].per_row_ns = summary(250, 400);  // shm batched pk
  r.cells[4].outcome = Outcome::kFailed;                              // tcp eq-bound
  r.cells[4].reason = "a test failure";
  ComparisonRow redis;
  redis.key = "redis.get.tcp";
  redis.label = "redis-server GET, TCP loopback, one client";
  redis.beside = "serial_pk";
  redis.samples = 500;
  redis.per_row_ns = summary(25'000, 40'000);
  ComparisonRow bare;
  bare.key = "floor.bare_tcp_busy";
  bare.label = "bare TCP ping-pong, non-blocking";
  bare.beside = "serial_pk";
  bare.unit = "rtt";
  bare.per_row_ns = summary(8'000, 12'000);
  r.compare = {redis, bare};
  r.memory = MemoryFigure{true, "", 1000, 100, 2, 10, 32768};
  r.load = LoadFigure{1000, 5'000'000, 256, "tcp"};
  r.targets = {evaluated_target("serial pk read over shm: median <= 2 us", 1.5, 2.0, "us", "", false),
               evaluated_target("serial pk read over tcp: median <= bare busy-poll TCP RTT + 3 us", 10.0, 11.0, "us",
                                "bare TCP p50 8.000 us + 3 us", false),
               unevaluated_target("memory: 1,000,000 rows of 100 bytes <= 2x their payload", "this run loaded 1000")};
  r.notes = {"a note with \"quotes\""};
  return r;
}

TEST(LatencyBenchAccessReport, NdbStyleTableWithTheReferenceColumns) {
  const std::string table = format_access_table(fixed_access_report());
  EXPECT_EQ(table.rfind("latency_bench access: test\n", 0), 0u) << table;
  EXPECT_NE(table.find("data node: fjord-datanode started here (test)"), std::string::npos);
  EXPECT_NE(table.find("1000 rows of 100 bytes; batches of 20; 500 samples per method after 50 discarded"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("this program on CPU 0, the data node started here on CPU 1"), std::string::npos);
  EXPECT_NE(table.find("single 0: blocks DICT,TC(0),LDM(0)"), std::string::npos) << "the node's layout";
  EXPECT_NE(table.find("ran 0.98 CPU-seconds per second and waited 0.01 s/s"), std::string::npos) << table;
  for (const char* row : {"Serial pk access", "Batched pk access (20 rows)", "Serial uk access",
                          "Batched uk access (20 rows)", "Indexed eq-bound (1 row)", "Index range (20 rows)",
                          "Full table scan (1000 rows)", "NDB 2004 TCP", "NDB 2004 SCI"})
    EXPECT_NE(table.find(row), std::string::npos) << row << "\n" << table;
  // Ours beside NDB 2004's: p50 / p99, then its TCP and SCI figures.
  EXPECT_NE(table.find("10.000 / 20.000"), std::string::npos) << table;
  EXPECT_NE(table.find("1.500 / 3.000          400          160"), std::string::npos) << table;
  EXPECT_NE(table.find("0.250 / 0.400           28           22"), std::string::npos) << table;
  EXPECT_NE(table.find("\ntargets, evaluated on this run:\n"), std::string::npos) << table;
  for (const char* word : {"seed", "issue"}) EXPECT_EQ(table.find(word), std::string::npos) << word << "\n" << table;
  EXPECT_NE(table.find("sim: unavailable: in-process only"), std::string::npos);
  EXPECT_NE(table.find("tcp indexed_eq_bound: failed: a test failure"), std::string::npos) << table;
  EXPECT_NE(table.find("redis-server GET, TCP loopback, one client"), std::string::npos);
  EXPECT_NE(table.find("25.000    40.000  Serial pk access"), std::string::npos) << table;
  EXPECT_NE(table.find("Serial pk access (a round trip)"), std::string::npos) << table;
  EXPECT_NE(table.find("pages in use 2 before the table, 10 after loading"), std::string::npos) << table;
  EXPECT_NE(table.find("= 2.62x the payload"), std::string::npos) << table;
  EXPECT_NE(table.find("load: 1000 rows in 0.01 s (200000 rows/s), 256 inserts per transaction, over tcp"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("1.500 us, limit <= 2.000  met"), std::string::npos) << table;
  EXPECT_NE(table.find("(bare TCP p50 8.000 us + 3 us)  met"), std::string::npos) << table;
  EXPECT_NE(table.find("not evaluated: this run loaded 1000"), std::string::npos) << table;
}

TEST(LatencyBenchAccessReport, JsonHasOneObjectPerTransporterAndMethod) {
  const std::string text = format_access_json(fixed_access_report());
  auto json = JsonReader::parse(text);
  ASSERT_TRUE(json) << text;
  EXPECT_EQ((*json)["mode"].text, "access");
  for (const char* key :
       {"conditions", "machine", "transporters", "results", "compare", "memory", "load", "targets", "notes"})
    EXPECT_TRUE(json->has(key)) << key;
  const JsonValue& results = (*json)["results"];
  ASSERT_EQ(results.items.size(), 2 * kAccessMethods.size());
  for (const JsonValue& r : results.items) {
    for (const char* key : {"transporter", "access", "batch", "status", "samples", "rows", "reference_us_per_row"})
      EXPECT_TRUE(r.has(key)) << key;
    if (r["status"].text == "measured") {
      EXPECT_TRUE(r["us_per_row"].has("p50"));
      EXPECT_TRUE(r["us_per_row"].has("p99"));
    }
  }
  EXPECT_EQ(results[0]["transporter"].text, "tcp");
  EXPECT_EQ(results[0]["access"].text, "serial_pk");
  EXPECT_EQ(results[0]["batch"].number, 1);
  EXPECT_EQ(results[0]["us_per_row"]["p50"].number, 10.0);
  EXPECT_EQ(results[0]["us_per_row"]["p99"].number, 20.0);
  EXPECT_EQ(results[0]["reference_us_per_row"]["tcp"].number, 400);
  EXPECT_EQ(results[0]["reference_us_per_row"]["sci"].number, 160);
  EXPECT_EQ(results[0]["reference_us_per_row"]["source"].text, "MySQL Cluster manual, SCI Sockets page");
  EXPECT_EQ(text.find("seed"), std::string::npos) << text;
  EXPECT_EQ(results[1]["batch"].number, 20);
  EXPECT_EQ(results[4]["status"].text, "failed");
  EXPECT_FALSE(results[4].has("us_per_row"));
  EXPECT_EQ(results[6]["access"].text, "full_scan");
  EXPECT_EQ(results[6]["batch"].number, 1000);
  EXPECT_EQ(results[6]["reference_us_per_row"].type, JsonValue::Type::kNull);
  EXPECT_EQ(results[kAccessMethods.size() + 1]["us_per_row"]["p50"].number, 0.25);
  EXPECT_EQ((*json)["transporters"][2]["status"].text, "unavailable");
  EXPECT_EQ((*json)["compare"][1]["rtt_us"]["p50"].number, 8.0);
  EXPECT_EQ((*json)["memory"]["bytes_used"].number, 8 * 32768);
  EXPECT_EQ((*json)["conditions"]["node_schedule"]["on_cpu_per_s"].number, 0.98);
  EXPECT_TRUE((*json)["targets"][0]["met"].boolean);
  EXPECT_FALSE((*json)["targets"][2]["evaluated"].boolean);
}

TEST(LatencyBenchAccessReport, PlotScriptFollowsTheFileNameAndCarriesTheData) {
  const AccessReport r = fixed_access_report();
  const std::string svg = access_plot_script(r, "/tmp/it's.svg");
  EXPECT_NE(svg.find("set terminal svg"), std::string::npos);
  EXPECT_NE(svg.find("set output '/tmp/it''s.svg'"), std::string::npos) << svg;
  EXPECT_NE(svg.find("set logscale y"), std::string::npos);
  EXPECT_NE(svg.find("set style histogram errorbars"), std::string::npos);
  EXPECT_NE(svg.find("\"Serial pk access\" 10.000 10.000 20.000 1.500 1.500 3.000 400.000 400.000 400.000 160.000 "
                     "160.000 160.000\n"),
            std::string::npos)
      << svg;
  EXPECT_NE(svg.find("\"Indexed eq-bound\" ? ? ? "), std::string::npos) << "the failed cell is missing data";
  EXPECT_NE(svg.find("\"Full table scan\" 10.000 10.000 20.000 1.500 1.500 3.000 ? ? ? ? ? ?\n"), std::string::npos)
      << svg;
  EXPECT_NE(svg.find("using 2:3:4:xtic(1) title 'fjord tcp'"), std::string::npos) << svg;
  EXPECT_NE(svg.find("using 5:6:7 title 'fjord shm'"), std::string::npos) << svg;
  EXPECT_NE(svg.find("using 8:9:10 title 'NDB 2004 TCP'"), std::string::npos) << svg;
  EXPECT_NE(svg.find("using 11:12:13 title 'NDB 2004 SCI'"), std::string::npos) << svg;
  EXPECT_NE(svg.find("NDB 2004 from the MySQL Cluster manual, SCI Sockets page"), std::string::npos) << svg;
  EXPECT_EQ(svg.find("seed"), std::string::npos) << svg;
  EXPECT_EQ(svg.find("fjord sim"), std::string::npos) << "unmeasured transporters have no bars";
  EXPECT_NE(access_plot_script(r, "a.png").find("set terminal pngcairo"), std::string::npos);
}

TEST(LatencyBenchAccessReport, TargetsSayMetOrMissedByDirection) {
  EXPECT_TRUE(evaluated_target("t", 2.0, 2.0, "us", "", false).met);
  EXPECT_FALSE(evaluated_target("t", 2.1, 2.0, "us", "", false).met);
  EXPECT_TRUE(evaluated_target("t", 5.0, 5.0, "M reads/s", "", true).met);
  EXPECT_FALSE(evaluated_target("t", 0.3, 5.0, "M reads/s", "", true).met);
  RunTarget with_host = evaluated_target("batched", 0.25, 0.2, "us/row", "", false);
  with_host.host = "cache-line mailbox p50 0.550 us before, 0.560 us after the shm rows";
  const std::string two_lines = format_target_line(with_host);
  EXPECT_NE(two_lines.find("MISSED\n"), std::string::npos) << two_lines;
  EXPECT_NE(two_lines.find("host: cache-line mailbox p50 0.550 us before"), std::string::npos) << two_lines;
  EXPECT_EQ(format_target_line(evaluated_target("t", 2.0, 2.0, "us", "", false)).find("host:"), std::string::npos);
  const RunTarget missed = evaluated_target("reads", 0.3, 5.0, "M reads/s", "one ldm thread", true);
  EXPECT_EQ(format_target_line(missed).find("0.300 M reads/s, limit >= 5.000 (one ldm thread)  MISSED"),
            std::string(format_target_line(missed)).find("0.300"));
  EXPECT_FALSE(unevaluated_target("t", "why").evaluated);
}

TEST(LatencyBenchRedis, RequestsAndReplySizes) {
  EXPECT_EQ(redis_request("GET", {42}), "*2\r\n$3\r\nGET\r\n$16\r\nkey:000000000042\r\n");
  EXPECT_EQ(redis_request("MGET", {1, 2}),
            "*3\r\n$4\r\nMGET\r\n$16\r\nkey:000000000001\r\n$16\r\nkey:000000000002\r\n");
  EXPECT_EQ(redis_get_reply_bytes(100), std::string("$100\r\n").size() + 100 + 2);
  EXPECT_EQ(redis_mget_reply_bytes(20, 100), std::string("*20\r\n").size() + 20 * (6 + 100 + 2));
}

TEST(LatencyBenchRedis, BenchmarkCsv) {
  const std::string out =
      "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\"\n"
      "\"GET\",\"1052631.62\",\"0.097\",\"0.040\",\"0.079\"\n";
  auto rps = parse_redis_benchmark_csv(out);
  ASSERT_TRUE(rps) << rps.status().to_string();
  EXPECT_DOUBLE_EQ(*rps, 1052631.62);
  EXPECT_FALSE(parse_redis_benchmark_csv("GET: 1000 requests per second"));
  EXPECT_FALSE(parse_redis_benchmark_csv("\"test\",\"rps\"\n\"GET\",\"x\"\n"));
}

TEST(LatencyBenchEmbeddedNode, ConfigLoadsWithAnApiNodePerTransporterAndUniqueShmKeys) {
  EmbeddedConfig c;
  c.transporters = {"tcp", "shm"};
  c.port = 23456;
  c.node_cpu = 1;
  c.spintime_us = 500;
  c.data_dir = "/tmp";
  c.control_socket = "@fjord-latency-bench-test";
  c.data_memory_bytes = embedded_data_memory_bytes(100'000, 100);
  c.api_nodes_per_transporter = 2;
  c.endpoint_base = 777;
  const std::string text = embedded_config_text(c, tools::builtin_registry());
  EXPECT_NE(text.find("SingleThreaded=1"), std::string::npos) << text;
  EXPECT_NE(text.find("SchedulerSpinTimer=500"), std::string::npos);
  EXPECT_NE(text.find("ThreadConfig=ldm={cpubind=1,spintime=500}"), std::string::npos);
  EXPECT_NE(text.find("ShmKey=778"), std::string::npos) << text;
  EXPECT_NE(text.find("ShmKey=779"), std::string::npos) << text;
  // A link section names both ends at the address its medium uses (an RDMA
  // device's, in the soft-RoCE guest).
  const std::string host = tools::builtin_registry().find("shm")->local_host();
  EXPECT_NE(text.find("HostName1=" + host + "\nHostName2=" + host + "\n"), std::string::npos) << text;
  auto file = config::parse_text(text, "<embedded>");
  ASSERT_TRUE(file) << file.status().to_string();
  auto cluster = engine::load_cluster_config(*file, tools::builtin_registry());
  ASSERT_TRUE(cluster) << cluster.status().to_string() << "\n" << text;
  EXPECT_EQ(cluster->of_kind(engine::NodeKind::kApi).size(), 4u);
  EXPECT_EQ(cluster->links.find(1, embedded_api_node(0, 1))->type, "tcp");
  EXPECT_EQ(cluster->links.find(1, embedded_api_node(1, 0))->type, "shm");
  EXPECT_EQ(embedded_api_node(1, 0), 60);
  EXPECT_EQ(cluster->node(1)->params.get_uint("ServerPort"), 23456u);
  EXPECT_GE(c.data_memory_bytes, 100'000u * 100 * 2) << "room for the rows and their indexes";
}

TEST(LatencyBenchThroughput, RingMatchesADequeAndIsBounded) {
  RequestRing ring(8);
  std::deque<uint64_t> model;
  uint64_t next = 0, seed = 12345;
  for (int step = 0; step < 10'000; ++step) {
    seed = seed * 6364136223846793005ULL + 1;
    if ((seed >> 33) % 3 != 0) {
      KeyRequest r;
      r.id = next;
      const bool pushed = ring.push(r);
      EXPECT_EQ(pushed, model.size() < 8) << "step " << step;
      if (pushed) model.push_back(next++);
    } else {
      KeyRequest r;
      const bool popped = ring.pop(r);
      ASSERT_EQ(popped, !model.empty()) << "step " << step;
      if (popped) {
        EXPECT_EQ(r.id, model.front());
        model.pop_front();
      }
    }
  }
}

TEST(LatencyBenchThroughput, RingBetweenTwoThreadsLosesAndReordersNothing) {
  RequestRing ring(64);
  constexpr uint64_t kCount = 200'000;
  std::thread producer([&] {
    for (uint64_t i = 0; i < kCount; ++i) {
      KeyRequest r;
      r.id = i;
      r.scheduled_ns = i * 3;
      while (!ring.push(r)) std::this_thread::yield();
    }
  });
  uint64_t expected = 0;
  while (expected < kCount) {
    KeyRequest r;
    if (!ring.pop(r)) {
      std::this_thread::yield();
      continue;
    }
    ASSERT_EQ(r.id, expected);
    ASSERT_EQ(r.scheduled_ns, expected * 3);
    ++expected;
  }
  producer.join();
}

// A definer that found its ring full sleeps (wait_for_room) until the
// executor has taken half of it, not for a fixed time: a fixed sleep longer
// than the executor takes to drain the ring would cap closed-loop runs.
TEST(LatencyBenchThroughput, AProducerAsleepOnAFullRingWakesWhenHalfIsTaken) {
  RequestRing ring(64);
  for (uint64_t i = 0; i < 64; ++i) ASSERT_TRUE(ring.push(KeyRequest{i, 0, false}));
  ASSERT_FALSE(ring.push(KeyRequest{}));
  constexpr uint64_t kLong = 30'000'000'000ULL;  // far longer than the test waits
  std::atomic<bool> woke{false};
  std::thread producer([&] {
    ring.wait_for_room(kLong);
    woke.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // asleep by now, most likely
  KeyRequest r;
  for (int i = 0; i < 31; ++i) ASSERT_TRUE(ring.pop(r));  // 33 left: more than half
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(woke.load()) << "woken before half the ring was taken";
  ASSERT_TRUE(ring.pop(r));  // 32 left: half
  for (int i = 0; i < 500 && !woke.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(woke.load()) << "still asleep with half the ring free";
  ring.wake();  // lets the thread go if the assertion above failed
  producer.join();
  for (uint64_t i = 64; i < 96; ++i) ASSERT_TRUE(ring.push(KeyRequest{i, 0, false}));
  ASSERT_FALSE(ring.push(KeyRequest{}));

  // wake() (a run stopping) ends the sleep too; and a producer whose ring
  // is already half free when it would sleep does not sleep at all.
  woke.store(false);
  std::thread stopped([&] {
    ring.wait_for_room(kLong);
    woke.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ring.wake();
  stopped.join();
  EXPECT_TRUE(woke.load());
  for (int i = 0; i < 32; ++i) ASSERT_TRUE(ring.pop(r));
  const uint64_t before = monotonic_ns();
  ring.wait_for_room(kLong);
  EXPECT_LT(monotonic_ns() - before, kLong / 2);
  // Nothing lost or reordered by any of it.
  for (uint64_t expected = 64; expected < 96; ++expected) {
    ASSERT_TRUE(ring.pop(r));
    EXPECT_EQ(r.id, expected);
  }
  EXPECT_FALSE(ring.pop(r));
}

ThroughputReport fixed_throughput_report() {
  ThroughputReport r;
  r.machine = fixed_machine();
  r.conditions.title = "latency_bench throughput: test";
  r.conditions.transporter = "shm";
  r.conditions.link = "[shm] link 1-60";
  r.conditions.plan.rate_per_s = 100'000;
  r.conditions.plan.duration_ns = 2'000'000'000;
  r.conditions.plan.warmup_ns = 200'000'000;
  r.conditions.poll = "busy";
  r.conditions.cpus = {0, 1};
  r.conditions.node = "test node";
  r.conditions.ldm_threads = 1;
  r.conditions.node_schedule = {true, 0.5, 0.1};
  r.window_ns = 2'000'000'000;
  r.transactions = r.operations = r.reads = 200'000;
  r.transactions_per_s = r.operations_per_s = 100'000;
  r.latency_ns = summary(20'000, 90'000);
  r.latency_basis = "from its scheduled send time to completion (open loop: queueing included)";
  r.definer_late_ns = summary(3'000, 9'000);
  r.executors.push_back(ExecutorRow{60, 200'000, 100'000, summary(20'000, 90'000), CpuUsage{1, 1, 0}});
  r.redis_measured = true;
  r.redis.command = "redis-benchmark -t get -P 32";
  r.redis.requests_per_s = 1'000'000;
  r.targets = {unevaluated_target("asynchronous pk reads with one LDM thread: >= 5 M reads/s", "open loop")};
  return r;
}

TEST(LatencyBenchThroughputReport, TableAndJson) {
  const ThroughputReport r = fixed_throughput_report();
  const std::string table = format_throughput_table(r);
  EXPECT_NE(table.find("open loop at 100000 operations/s"), std::string::npos) << table;
  EXPECT_NE(table.find("over [shm] link 1-60"), std::string::npos) << table;
  EXPECT_NE(table.find("100000         100000     20.000     90.000"), std::string::npos) << table;
  EXPECT_NE(table.find("executor, API node 60"), std::string::npos);
  EXPECT_NE(table.find("from its scheduled send time"), std::string::npos);
  EXPECT_NE(table.find("behind schedule by p50 3.000, p99 9.000, max 27.000 us"), std::string::npos) << table;
  EXPECT_NE(table.find("redis-benchmark -t get -P 32: 1000000 GET/s"), std::string::npos) << table;
  EXPECT_NE(table.find("rows per CPU-second the node ran: 200000 (it ran 0.50 CPU-s/s"), std::string::npos) << table;
  EXPECT_NE(table.find("\ntargets, evaluated on this run:\n  asynchronous pk reads"), std::string::npos) << table;
  EXPECT_EQ(table.find("issue"), std::string::npos) << table;
  auto json = JsonReader::parse(format_throughput_json(r));
  ASSERT_TRUE(json);
  EXPECT_EQ((*json)["mode"].text, "throughput");
  EXPECT_EQ((*json)["rows_per_s"].number, 100'000);
  EXPECT_EQ((*json)["rows_per_node_cpu_s"].number, 200'000);
  EXPECT_EQ((*json)["conditions"]["node_schedule"]["waiting_per_s"].number, 0.1);
  EXPECT_EQ((*json)["transactions_per_s"].number, 100'000);
  EXPECT_EQ((*json)["latency_us"]["p99"].number, 90);
  EXPECT_TRUE((*json)["conditions"]["open_loop"].boolean);
  EXPECT_EQ((*json)["conditions"]["rate_per_s"].number, 100'000);
  EXPECT_EQ((*json)["definer_late_us"]["p99"].number, 9);
  EXPECT_EQ((*json)["executors"][0]["api_node"].number, 60);
  EXPECT_EQ((*json)["redis"]["requests_per_s"].number, 1'000'000);
}

}  // namespace
}  // namespace fjord::bench
