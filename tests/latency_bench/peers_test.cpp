// Parsing the peer tools' output (sockperf 3.7, ucx_perftest from UCX 1.13)
// into round trips, and a missing tool reported as such, never dropped.
#include "peers.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace fjord::bench {
namespace {

// The shape sockperf ping-pong --full-rtt prints (colour escapes included).
constexpr const char* kSockperfOutput =
    "sockperf: \x1b[2;35m== version #3.7-no.git == \x1b[0m\n"
    "sockperf: [Total Run] RunTime=2.000 sec; Warm up time=400 msec; SentMessages=25353; ReceivedMessages=25352\n"
    "sockperf: ========= Printing statistics for Server No: 0\n"
    "sockperf: \x1b[2;35m====> avg-rtt=75.250 (std-dev=10.412)\x1b[0m\n"
    "sockperf: Summary: Round trip is 75.250 usec\n"
    "sockperf: \x1b[2;35mTotal 20623 observations\x1b[0m; each percentile contains 206.23 observations\n"
    "sockperf: ---> <MAX> observation =  912.500\n"
    "sockperf: ---> percentile 99.999 =  900.000\n"
    "sockperf: ---> percentile 99.990 =  800.000\n"
    "sockperf: ---> percentile 99.900 =  300.125\n"
    "sockperf: ---> percentile 99.000 =  120.000\n"
    "sockperf: ---> percentile 90.000 =   80.000\n"
    "sockperf: ---> percentile 75.000 =   72.000\n"
    "sockperf: ---> percentile 50.000 =   70.001\n"
    "sockperf: ---> percentile 25.000 =   68.000\n"
    "sockperf: ---> <MIN> observation =   60.500\n";

TEST(LatencyBenchPeers, SockperfFullRttPercentiles) {
  auto s = parse_sockperf(kSockperfOutput);
  ASSERT_TRUE(s) << s.status().to_string();
  EXPECT_EQ(s->p50_ns, 70'001u);
  EXPECT_EQ(s->p99_ns, 120'000u);
  EXPECT_EQ(s->p999_ns, 300'125u);
  EXPECT_EQ(s->max_ns, 912'500u);
  EXPECT_EQ(s->min_ns, 60'500u);
  EXPECT_DOUBLE_EQ(s->mean_ns, 75'250);
  EXPECT_EQ(s->count, 20'623u);
  EXPECT_TRUE(s->tail_known);
}

TEST(LatencyBenchPeers, SockperfWithoutPercentilesIsAnError) {
  EXPECT_FALSE(parse_sockperf("sockperf: ERROR: Connection refused\n"));
  EXPECT_FALSE(parse_sockperf(""));
}

TEST(LatencyBenchPeers, UcxOneWayIsDoubled) {
  const char* output =
      "+------+\n| Message size: 64 |\n"
      "iterations,50.0_percentile_lat,avg_lat,overall_lat,avg_bw,overall_bw,avg_mr,overall_mr\n"
      "100000,0.210,0.250,0.250,108.41,108.41,1776167,1776167\n";
  auto s = parse_ucx_csv(output);
  ASSERT_TRUE(s) << s.status().to_string();
  EXPECT_EQ(s->p50_ns, 420u);
  EXPECT_DOUBLE_EQ(s->mean_ns, 500);
  EXPECT_EQ(s->count, 100'000u);
  EXPECT_FALSE(s->tail_known);
}

TEST(LatencyBenchPeers, UcxWithoutCsvIsAnError) {
  EXPECT_FALSE(parse_ucx_csv("[1700000000.0] ucx_perftest.c:1234 error: connect failed\n"));
  EXPECT_FALSE(parse_ucx_csv("iterations,foo\n1,2\n"));
}

TEST(LatencyBenchPeers, MissingToolsAreReportedNotDropped) {
  const char* saved = std::getenv("PATH");
  const std::string path = saved ? saved : "";
  ::setenv("PATH", "/nonexistent-latency-bench-test", 1);
  PeerParams p;
  p.iterations = 10;
  const Row sockperf = sockperf_peer(p);
  const Row ucx = ucx_peer(p, "posix");
  ::setenv("PATH", path.c_str(), 1);
  EXPECT_EQ(sockperf.outcome, Outcome::kNotInstalled);
  EXPECT_EQ(sockperf.reason, "sockperf is not on PATH (Debian: sockperf)");
  EXPECT_EQ(sockperf.key, "peer.sockperf_tcp");
  EXPECT_EQ(ucx.outcome, Outcome::kNotInstalled);
  EXPECT_EQ(ucx.reason, "ucx_perftest is not on PATH (Debian: ucx-utils)");
  EXPECT_EQ(ucx.key, "peer.ucx_posix");
}

}  // namespace
}  // namespace fjord::bench
