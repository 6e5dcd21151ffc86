// The measurement loops allocate nothing: a run of many round trips (or
// messages, or access-method samples, or throughput operations) makes
// exactly as many heap allocations, on any thread of this process, as a run
// of a few. Own binary: it replaces the global operator new. The access and
// throughput loops run against a data node in its own process
// (FJORD_DATANODE), so only the API's and our allocations count.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <new>
#include <thread>

#include "access_run.h"
#include "access_table.h"
#include "builtin_transporters.h"
#include "counting_new.h"
#include "fjord/base/clock.h"
#include "link_harness.h"
#include "node_process.h"
#include "ping.h"
#include "process.h"
#include "stream.h"
#include "throughput.h"
#include "wire.h"

using fjord::test::g_allocations;
using fjord::test::g_count_allocations;

namespace fjord::bench {
namespace {

// Allocations made by both sides while `drive` runs against a responder.
uint64_t allocations_during(const std::function<void(transport::Transporter&)>& drive) {
  auto pair = test::make_pair(*test::find_medium("tcp"));
  EXPECT_TRUE(pair) << pair.status().to_string();
  if (!pair) return UINT64_MAX;
  g_allocations = 0;
  g_count_allocations = true;
  std::thread responder([&] { EXPECT_TRUE(serve_session(*pair->server, PollMode::kBusy)); });
  drive(*pair->client);
  g_count_allocations = false;
  EXPECT_TRUE(send_control(*pair->client, kByeSignal, {}, monotonic_ns() + 5'000'000'000ULL));
  responder.join();
  return g_allocations.load();
}

uint64_t ping_allocations(uint64_t iterations) {
  return allocations_during([&](transport::Transporter& t) {
    Histogram rtt;  // allocated before the loop, as the program does
    Progress progress(false);
    EXPECT_TRUE(run_ping(t, PingParams{64, iterations, 10, PollMode::kBusy, 10'000'000'000ULL}, rtt, progress));
  });
}

uint64_t stream_allocations(uint64_t messages) {
  return allocations_during([&](transport::Transporter& t) {
    Progress progress(false);
    EXPECT_TRUE(run_stream(t, StreamParams{1024, messages, 0, 16, PollMode::kBusy, 10'000'000'000ULL}, progress));
  });
}

TEST(LatencyBenchAllocations, PingLoopAllocatesNothingPerRoundTrip) {
  const uint64_t few = ping_allocations(10);
  const uint64_t many = ping_allocations(5000);
  EXPECT_EQ(few, many) << "allocations grow with the number of round trips";
}

TEST(LatencyBenchAllocations, StreamLoopAllocatesNothingPerMessage) {
  const uint64_t few = stream_allocations(10);
  const uint64_t many = stream_allocations(20000);
  EXPECT_EQ(few, many) << "allocations grow with the number of messages";
}

// A data node in its own process, a connection over `medium` and a loaded
// access table.
class NodeFixture : public ::testing::Test {
 public:
  static constexpr uint64_t kRows = 500;

 protected:
  void SetUp() override {
    const char* node = std::getenv("FJORD_DATANODE");
    ASSERT_TRUE(node && *node) << "FJORD_DATANODE must name fjord-datanode (meson sets it)";
    auto dir = make_temp_dir();
    ASSERT_TRUE(dir);
    dir_ = *dir;
    auto port = free_tcp_port();
    ASSERT_TRUE(port);
    EmbeddedConfig c;
    c.transporters = {"tcp"};
    c.port = *port;
    c.spintime_us = 0;
    c.data_dir = dir_;
    c.control_socket = "@latency-bench-alloc-" + std::to_string(::getpid());
    c.api_nodes_per_transporter = 2;
    c.endpoint_base = static_cast<uint64_t>(::getpid()) << 8;
    config_ = dir_ + "/config.ini";
    std::ofstream(config_) << embedded_config_text(c, tools::builtin_registry());
    auto started = NodeProcess::start(
        NodeLaunch{node, config_, kEmbeddedDataNode, -1, c.control_socket, "", "", 10'000'000'000ULL});
    ASSERT_TRUE(started) << started.status().to_string();
    node_ = std::move(started).value();
    for (uint32_t i = 0; i < 2; ++i) {
      api::ConnectOptions o;
      o.config_path = config_;
      o.node_id = embedded_api_node(0, i);
      o.registry = &tools::builtin_registry();
      auto conn = api::Connection::connect(o);
      ASSERT_TRUE(conn) << conn.status().to_string();
      connections_.push_back(std::move(conn).value());
    }
    auto table = create_access_table(*connections_[0], AccessTableSpec{kAccessTableName, kRows, 100});
    ASSERT_TRUE(table) << table.status().to_string();
    Progress progress(false);
    ASSERT_TRUE(load_access_table(*connections_[0], *table, progress));
    tables_.push_back(*table);
    auto described = describe_access_table(*connections_[1], table->spec);
    ASSERT_TRUE(described);
    tables_.push_back(*described);
  }
  void TearDown() override {
    connections_.clear();
    if (node_) {
      EXPECT_TRUE(node_->stop());
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::string dir_, config_;
  std::unique_ptr<NodeProcess> node_;
  std::vector<std::unique_ptr<api::Connection>> connections_;
  std::vector<AccessTable> tables_;
};

using LatencyBenchDatabaseAllocations = NodeFixture;

uint64_t method_allocations(api::Connection& conn, const AccessTable& table, AccessMethod method, uint64_t samples) {
  AccessPlan plan;
  plan.iterations = samples;
  plan.warmup = 5;
  plan.full_scans = samples / 10;
  Progress progress(false);
  g_allocations = 0;
  g_count_allocations = true;
  const MethodResult r = measure_access_method(conn, table, method, plan, progress);
  g_count_allocations = false;
  EXPECT_TRUE(r.status) << access_method_key(method) << ": " << r.status.to_string();
  return g_allocations.load();
}

TEST_F(LatencyBenchDatabaseAllocations, AccessMethodsAllocateNothingPerSample) {
  for (AccessMethod method : kAccessMethods) {
    (void)method_allocations(*connections_[0], tables_[0], method, 30);  // the API's buffers grow once
    const uint64_t few = method_allocations(*connections_[0], tables_[0], method, 30);
    const uint64_t many = method_allocations(*connections_[0], tables_[0], method, 600);
    EXPECT_EQ(few, many) << access_method_key(method) << ": allocations grow with the number of samples";
  }
}

struct Counted {
  uint64_t allocations = 0;
  uint64_t operations = 0;
};

Counted throughput_allocations(std::vector<std::unique_ptr<api::Connection>>& connections,
                               const std::vector<AccessTable>& tables, uint64_t duration_ns) {
  ThroughputPlan plan;
  plan.executors = 2;
  plan.definers = 2;
  plan.in_flight = 16;
  plan.batch = 2;
  plan.read_percent = 70;
  plan.rows = NodeFixture::kRows;
  plan.duration_ns = duration_ns;
  plan.warmup_ns = 10'000'000;
  Progress progress(false);
  g_allocations = 0;
  g_count_allocations = true;
  const ThroughputResult r = run_throughput(connections, tables, plan, progress);
  g_count_allocations = false;
  return {g_allocations.load(), r.operations};
}

// A run of at least `operations` operations: a loaded host may give a short
// run too few, so the duration doubles (up to 6.4 s) until it has them.
Counted throughput_allocations_of_at_least(std::vector<std::unique_ptr<api::Connection>>& connections,
                                           const std::vector<AccessTable>& tables, uint64_t operations) {
  Counted run;
  for (uint64_t duration_ns = 400'000'000; duration_ns <= 6'400'000'000; duration_ns *= 2) {
    run = throughput_allocations(connections, tables, duration_ns);
    if (run.operations >= operations) break;
  }
  return run;
}

// Threads, rings and histograms cost a fixed number of allocations per run,
// and which of the API's transaction objects first grow their buffers in a
// run depends on timing; an allocation per operation would be thousands.
TEST_F(LatencyBenchDatabaseAllocations, ThroughputAllocatesNothingPerOperation) {
  (void)throughput_allocations(connections_, tables_, 100'000'000);  // the API's buffers grow
  const Counted run = throughput_allocations_of_at_least(connections_, tables_, 1000);
  ASSERT_GE(run.operations, 1000u) << "too few operations to tell, even in a 6.4 s run";
  EXPECT_LT(run.allocations, 200u) << run.allocations << " allocations for " << run.operations << " operations";
}

// The open loop: definers queue operations ahead of their scheduled times
// and executors send each once it is due (held back until then): every
// operation is sent, about rate x window of them complete in the window,
// none fails, each has its latency.
TEST_F(LatencyBenchDatabaseAllocations, AnOpenLoopRunSendsEveryScheduledOperation) {
  ThroughputPlan plan;
  plan.executors = 2;
  plan.definers = 2;
  plan.in_flight = 16;
  plan.batch = 2;
  plan.rows = NodeFixture::kRows;
  plan.rate_per_s = 4'000;
  plan.duration_ns = 500'000'000;
  plan.warmup_ns = 50'000'000;
  // 4,000/s for 0.5 s: 2,000 scheduled in the window. What is counted is
  // what completes in it, so a busy machine shifts some across its edges,
  // and one that stops the process for a good part of the window (a 2-core
  // host loaded to 12 runnable threads did) leaves fewer: such a run is
  // repeated, up to four in all. An executor that kept a held operation
  // back for good loses half of them in every run.
  constexpr uint64_t kLow = 1500, kHigh = 2500;
  Progress progress(false);
  ThroughputResult r;
  for (int run = 0; run < 4; ++run) {
    r = run_throughput(connections_, tables_, plan, progress);
    ASSERT_TRUE(r.status) << r.status.to_string();
    if (r.operations >= kLow && r.operations <= kHigh) break;
  }
  EXPECT_EQ(r.failures, 0u);
  EXPECT_GE(r.operations, kLow);
  EXPECT_LE(r.operations, kHigh);
  EXPECT_EQ(r.latency_ns.count(), r.operations);
  EXPECT_GE(r.transactions, r.operations / plan.batch);
}

}  // namespace
}  // namespace fjord::bench
