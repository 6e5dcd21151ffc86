// latency_bench reports: the table and the JSON schema, from a fixed
// histogram and fixed rows (no measurement), and the targets' arithmetic.
#include "report.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compare.h"
#include "json.h"
#include "json_value.h"

namespace fjord::bench {
namespace {

using test::JsonReader;
using test::JsonValue;

// 1000 round trips: 1..1000 us in 1 us steps (p50 = 500 us, max = 1000 us).
Histogram fixed_histogram() {
  Histogram h;
  for (uint64_t us = 1; us <= 1000; ++us) h.record(us * 1000);
  return h;
}

MachineFacts fixed_machine() {
  MachineFacts m;
  m.online_cpus = 2;
  m.allowed_cpus = "0-1";
  m.cpu_model = "Test CPU";
  m.kernel = "6.1-test";
  m.clocksource = "tsc";
  m.clock_read_ns = 21;
  m.load_start = 0.1;
  m.load_end = 1.9;
  m.started_utc = "2025-01-01T00:00:00Z";
  return m;
}

Row fjord_rtt_row(const std::string& transporter, const std::string& poll, uint64_t p50_ns) {
  Row row;
  row.key = "fjord." + transporter + "." + poll;
  row.label = "fjord " + transporter;
  row.transporter = transporter;
  row.poll = poll;
  row.size_bytes = 64;
  row.wire_bytes = 104;
  row.iterations = 1000;
  row.warmup = 100;
  row.rtt = LatencySummary::from(fixed_histogram());
  row.rtt->p50_ns = p50_ns;
  row.usage = CpuUsage{2'000'000'000, 1'500'000'000, 42};  // 75% on its CPU, preempted 42 times
  return row;
}

Row floor_row(const std::string& key, uint64_t p50_ns) {
  Row row;
  row.kind = RowKind::kFloor;
  row.key = key;
  row.label = "floor: " + key;
  row.poll = "busy";
  LatencySummary s;
  s.p50_ns = p50_ns;
  s.mean_ns = static_cast<double>(p50_ns);
  row.rtt = s;
  return row;
}

Report single_ping_report() {
  Report report;
  report.machine = fixed_machine();
  report.conditions = {"latency_bench ping: fjord tcp, test", "ping", {0, 1}, "peer process started here", 0};
  report.rows.push_back(fjord_rtt_row("tcp", "busy", 500'000));
  Row missing;
  missing.kind = RowKind::kPeer;
  missing.key = "peer.sockperf_tcp";
  missing.label = "peer: sockperf ping-pong --tcp";
  missing.poll = "sleep";
  missing.outcome = Outcome::kNotInstalled;
  missing.reason = "sockperf is not on PATH";
  report.rows.push_back(missing);
  report.rows.push_back(floor_row("floor.bare_tcp_busy", 470'000));
  report.targets = evaluate_targets(report.rows, false, std::vector<std::string>{"tcp"});
  report.notes = {"a note with \"quotes\" and a\ttab"};
  return report;
}

TEST(LatencyBenchReport, SummaryComesFromTheHistogram) {
  const LatencySummary s = LatencySummary::from(fixed_histogram());
  EXPECT_EQ(s.count, 1000u);
  EXPECT_NEAR(static_cast<double>(s.p50_ns), 500'000, 500'000 * 0.01);
  EXPECT_NEAR(static_cast<double>(s.p99_ns), 990'000, 990'000 * 0.01);
  EXPECT_NEAR(static_cast<double>(s.p999_ns), 999'000, 999'000 * 0.01);
  EXPECT_EQ(s.max_ns, 1'000'000u);
  EXPECT_EQ(s.min_ns, 1'000u);
  EXPECT_DOUBLE_EQ(s.mean_ns, 500'500.0);
}

TEST(LatencyBenchReport, TableLabelsRoundTripsConditionsAndMissingPeers) {
  const std::string table = format_table(single_ping_report());
  EXPECT_EQ(table.rfind("latency_bench ping: fjord tcp, test\n", 0), 0u) << table;
  EXPECT_NE(table.find("this process on CPU 0, peer process on CPU 1"), std::string::npos) << table;
  EXPECT_NE(table.find("2 CPUs online (this process may use 0-1), Test CPU, kernel 6.1-test"), std::string::npos);
  EXPECT_NE(table.find("21 ns per read"), std::string::npos);
  EXPECT_NE(table.find("round trip (RTT), microseconds"), std::string::npos);
  EXPECT_NE(table.find("fjord tcp"), std::string::npos);
  EXPECT_NE(table.find("500.000"), std::string::npos) << table;   // p50 in us
  EXPECT_NE(table.find("1000.000"), std::string::npos) << table;  // max in us
  EXPECT_NE(table.find("not installed: sockperf is not on PATH"), std::string::npos) << table;
  EXPECT_NE(table.find("tcp RTT p50, busy-poll <= 1.1x bare non-blocking TCP"), std::string::npos) << table;
  EXPECT_NE(table.find("= 1.06x (limit <= 1.10x)  met"), std::string::npos) << table;
  EXPECT_NE(table.find("\ntargets, each against a floor or peer tool of this run:\n"), std::string::npos) << table;
  EXPECT_EQ(table.find("issue"), std::string::npos) << table;
  EXPECT_EQ(table.find("streaming, one way"), std::string::npos) << "no streaming rows, no streaming section";
  EXPECT_NE(table.find("on-cpu"), std::string::npos);
  EXPECT_NE(table.find("   75%"), std::string::npos) << table;
}

TEST(LatencyBenchReport, UnderLoadIsSaid) {
  Report report = single_ping_report();
  EXPECT_NE(format_table(report).find("the machine was otherwise quiet"), std::string::npos);
  report.machine.load_start = 3.5;
  EXPECT_NE(format_table(report).find("MEASURED UNDER LOAD"), std::string::npos);
}

TEST(LatencyBenchReport, SingleRunJsonHasThePromisedFieldsAtTopLevel) {
  const std::string text = format_json(single_ping_report());
  auto json = JsonReader::parse(text);
  ASSERT_TRUE(json) << text;
  for (const char* key : {"transporter", "size", "iterations", "poll", "cpus", "rtt_ns", "machine", "compare",
                          "targets", "mode", "warmup", "wire_bytes", "notes"})
    EXPECT_TRUE(json->has(key)) << key << " missing in " << text;
  EXPECT_EQ((*json)["transporter"].text, "tcp");
  EXPECT_EQ((*json)["size"].number, 64);
  EXPECT_EQ((*json)["iterations"].number, 1000);
  EXPECT_EQ((*json)["poll"].text, "busy");
  EXPECT_EQ((*json)["cpus"].items.size(), 2u);
  const JsonValue& rtt = (*json)["rtt_ns"];
  for (const char* key : {"p50", "p99", "p999", "max", "mean", "min", "count"}) EXPECT_TRUE(rtt.has(key)) << key;
  EXPECT_EQ(rtt["p50"].number, 500'000);
  EXPECT_EQ(rtt["max"].number, 1'000'000);
  EXPECT_EQ(rtt["mean"].number, 500'500);
  const JsonValue& compare = (*json)["compare"];
  ASSERT_EQ(compare.items.size(), 2u);
  EXPECT_EQ(compare[0]["name"].text, "peer.sockperf_tcp");
  EXPECT_EQ(compare[0]["status"].text, "not installed");
  EXPECT_FALSE(compare[0].has("rtt_ns"));
  EXPECT_EQ((*json)["targets"][0]["met"].type, JsonValue::Type::kBool);
  EXPECT_EQ((*json)["notes"][0].text, "a note with \"quotes\" and a\ttab");
  EXPECT_TRUE((*json)["machine"]["under_load"].type == JsonValue::Type::kBool);
  EXPECT_EQ((*json)["on_cpu"]["share"].number, 0.75);
  EXPECT_EQ((*json)["on_cpu"]["involuntary_switches"].number, 42);
}

TEST(LatencyBenchReport, AllJsonListsRunsAndPeersWithUnknownTailsAsNull) {
  Report report;
  report.machine = fixed_machine();
  report.conditions.command = "all";
  report.rows.push_back(fjord_rtt_row("tcp", "busy", 14'000));
  Row stream;
  stream.key = "fjord.tcp.stream";
  stream.metric = Metric::kThroughput;
  stream.throughput = Throughput{1000, 4096, 1'000'000, 3};
  report.rows.push_back(stream);
  Row ucx = floor_row("peer.ucx_posix", 420);
  ucx.kind = RowKind::kPeer;
  ucx.rtt->tail_known = false;
  report.rows.push_back(ucx);
  auto json = JsonReader::parse(format_json(report));
  ASSERT_TRUE(json);
  EXPECT_FALSE(json->has("transporter"));
  ASSERT_EQ((*json)["runs"].items.size(), 2u);
  const JsonValue& s = (*json)["runs"][1]["stream"];
  EXPECT_EQ(s["messages"].number, 1000);
  EXPECT_DOUBLE_EQ(s["messages_per_s"].number, 1e6);
  EXPECT_NEAR(s["gb_per_s"].number, 4.096, 1e-9);
  EXPECT_EQ(s["full_waits"].number, 3);
  const JsonValue& peer = (*json)["compare"][0];
  EXPECT_EQ(peer["rtt_ns"]["p50"].number, 420);
  EXPECT_EQ(peer["rtt_ns"]["p99"].type, JsonValue::Type::kNull);
}

TEST(LatencyBenchReport, JsonWriterEscapesAndNests) {
  JsonWriter w;
  w.begin_object();
  w.key("a\"b");
  w.begin_array();
  w.value("line\nbreak\x01");
  w.value(uint64_t{18446744073709551615ULL});
  w.value(1.5);
  w.value(true);
  w.null();
  w.end_array();
  w.end_object();
  EXPECT_TRUE(w.complete());
  EXPECT_EQ(w.text(), "{\"a\\\"b\":[\"line\\nbreak\\u0001\",18446744073709551615,1.500,true,null]}");
  EXPECT_TRUE(JsonReader::parse(w.text()));
}

TEST(LatencyBenchTargets, RatiosAndReasons) {
  std::vector<Row> rows = {fjord_rtt_row("shm", "busy", 300), floor_row("floor.mailbox", 100),
                           floor_row("peer.ucx_posix", 420)};
  rows[2].kind = RowKind::kPeer;
  const auto checks = evaluate_targets(rows, true, std::vector<std::string>{"tcp", "shm"});
  ASSERT_EQ(checks.size(), 5u);
  EXPECT_TRUE(checks[0].evaluated);
  EXPECT_DOUBLE_EQ(checks[0].ratio, 3.0);
  EXPECT_FALSE(checks[0].met);  // 3.0x > 1.5x
  EXPECT_TRUE(checks[1].evaluated);
  EXPECT_TRUE(checks[1].met);  // 300 < 420
  EXPECT_FALSE(checks[2].evaluated);
  EXPECT_EQ(checks[2].reason, "this run has no fjord.tcp.busy row");
  EXPECT_FALSE(checks[4].evaluated);
  EXPECT_EQ(checks[4].reason, "this run has no fjord.shm.stream row");

  rows[1].outcome = Outcome::kFailed;
  rows[1].reason = "fork: no";
  const auto failed = evaluate_targets(rows, false, std::vector<std::string>{"tcp"});
  ASSERT_EQ(failed.size(), 2u);  // only the targets about the rows present
  EXPECT_EQ(failed[0].reason, "floor: floor.mailbox: failed (fork: no)");
  const auto no_shm = evaluate_targets({}, true, std::vector<std::string>{"tcp"});
  EXPECT_EQ(no_shm[0].reason, "shm is not built into this program");
}

TEST(LatencyBenchTargets, StreamingTargetIsFor4KMessages) {
  Row ours;
  ours.key = "fjord.shm.stream";
  ours.metric = Metric::kThroughput;
  ours.size_bytes = 4096;
  ours.throughput = Throughput{1000, 4096, 1000, 0};  // 4096 GB/s: arithmetic only
  Row memcpy_row;
  memcpy_row.kind = RowKind::kFloor;
  memcpy_row.key = "floor.memcpy";
  memcpy_row.metric = Metric::kThroughput;
  memcpy_row.throughput = Throughput{1000, 4096, 500, 0};
  auto checks = evaluate_targets({ours, memcpy_row}, false, std::vector<std::string>{"shm"});
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_TRUE(checks[0].evaluated);
  EXPECT_DOUBLE_EQ(checks[0].ratio, 0.5);
  EXPECT_TRUE(checks[0].met);
  ours.size_bytes = 64;
  checks = evaluate_targets({ours, memcpy_row}, false, std::vector<std::string>{"shm"});
  EXPECT_FALSE(checks[0].evaluated);
  EXPECT_EQ(checks[0].reason, "the target is for 4096 B messages; this run used 64 B");
}

}  // namespace
}  // namespace fjord::bench
