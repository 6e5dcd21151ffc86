// redis-server beside the access table and the throughput mode, started by
// this program on a free port and a Unix socket in a temporary directory
// (no persistence: --save "" --appendonly no), pinned to the data node's
// CPU, and stopped by its pid afterwards.
//
//   GET            one key per round trip     beside serial pk
//   MGET K keys    K keys per round trip      beside batched pk (per row = time / K)
//
// measured over TCP loopback and over the Unix socket by a small RESP client
// of ours, timed exactly like our rows (two clock reads around each request,
// a Histogram, a discarded warm-up, busy-polling non-blocking receive unless
// --poll sleep), on keys "key:%012d" holding values of the row's size. And
// redis-benchmark's pipelined GET rate (-P 32) for the throughput target.
//
// A missing redis-server or redis-benchmark gives rows with outcome
// kNotInstalled, never nothing. Slow path around the timed loops; the
// calling thread should already be pinned.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "access_report.h"
#include "fjord/base/status.h"
#include "progress.h"

namespace fjord::bench {

struct RedisPlan {
  uint64_t keys = 100'000;  // loaded before measuring
  uint32_t value_bytes = 100;
  uint32_t batch = 20;  // keys per MGET
  uint64_t iterations = 10'000;
  uint64_t warmup = 1'000;
  int cpu_server = -1;
  bool busy_poll = true;
  uint64_t timeout_ns = 30'000'000'000ULL;
};

// Four rows: GET and MGET over TCP and over the Unix socket.
std::vector<ComparisonRow> measure_redis(const RedisPlan& plan, Progress& progress);

struct RedisRate {
  Outcome outcome = Outcome::kMeasured;
  std::string reason;
  std::string command;  // the redis-benchmark command line, for the report
  double requests_per_s = 0;
};
// redis-benchmark -t get -P pipeline -c clients against a fresh server with
// `keys` keys of value_bytes; the client on cpu_client, the server on cpu_server.
RedisRate redis_pipelined_get_rate(uint64_t keys, uint32_t value_bytes, uint32_t pipeline, uint32_t clients,
                                   uint64_t requests, int cpu_server, int cpu_client);

// Parsers, public for the tests.
// redis-benchmark --csv: the "rps" field of the first data line.
Result<double> parse_redis_benchmark_csv(std::string_view output);
// The exact reply to GET of a value_bytes value ("$100\r\n...\r\n") and to
// MGET of `keys` such values, in bytes.
std::size_t redis_get_reply_bytes(uint32_t value_bytes);
std::size_t redis_mget_reply_bytes(uint32_t keys, uint32_t value_bytes);
// The RESP request for GET/MGET of keys "key:%012llu" (ids).
std::string redis_request(std::string_view command, const std::vector<uint64_t>& ids);

}  // namespace fjord::bench
