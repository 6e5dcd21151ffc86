#include "peers.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>
#include <system_error>
#include <vector>

#include "fjord/base/clock.h"
#include "process.h"

namespace fjord::bench {
namespace {

// "41.280" (usec) -> 41280 ns. False if no number starts at `text`.
bool usec_to_ns(std::string_view text, uint64_t& ns) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  char* end = nullptr;
  const std::string copy(text.substr(0, 32));
  const double usec = std::strtod(copy.c_str(), &end);
  if (end == copy.c_str() || usec < 0) return false;
  ns = static_cast<uint64_t>(std::llround(usec * 1000.0));
  return true;
}

// The number after "<marker>" and the next '=' on a line containing marker.
bool value_after(std::string_view output, std::string_view marker, uint64_t& ns) {
  const std::size_t at = output.find(marker);
  if (at == std::string_view::npos) return false;
  const std::size_t eq = output.find('=', at + marker.size());
  const std::size_t line_end = output.find('\n', at);
  if (eq == std::string_view::npos || (line_end != std::string_view::npos && eq > line_end)) return false;
  return usec_to_ns(output.substr(eq + 1), ns);
}

std::vector<std::string_view> split(std::string_view line, char separator) {
  std::vector<std::string_view> out;
  for (std::size_t start = 0;;) {
    const std::size_t next = line.find(separator, start);
    out.push_back(line.substr(start, next - start));
    if (next == std::string_view::npos) return out;
    start = next + 1;
  }
}

Row peer_row(std::string key, std::string label, std::string poll, const PeerParams& p) {
  Row row;
  row.kind = RowKind::kPeer;
  row.key = std::move(key);
  row.label = std::move(label);
  row.poll = std::move(poll);
  row.size_bytes = row.wire_bytes = p.message_bytes;
  return row;
}

Row with_outcome(Row row, Outcome outcome, std::string reason) {
  row.outcome = outcome;
  row.reason = std::move(reason);
  return row;
}

// Starts `server`, waits until it listens on `port`, runs `client` to the
// end and returns its output; stops the server.
Result<std::string> run_pair(const SpawnSpec& server, const SpawnSpec& client, uint16_t port, uint64_t timeout_ns) {
  auto server_process = spawn(server);
  if (!server_process) return server_process.status();
  if (Status s = wait_for_listener(port, monotonic_ns() + 5'000'000'000ULL); !s) return s;
  auto client_process = spawn(client);
  if (!client_process) return client_process.status();
  std::string output = client_process->read_output(monotonic_ns() + timeout_ns);
  auto code = client_process->wait_for(2'000'000'000ULL);
  server_process->stop();
  if (!code) return Status(StatusCode::kTimeout, "the client did not finish within the timeout");
  if (*code != 0) {
    const std::size_t tail = output.size() > 300 ? output.size() - 300 : 0;
    return Status(StatusCode::kIoError, "exit code " + std::to_string(*code) + "; output ends: " + output.substr(tail));
  }
  return output;
}

}  // namespace

Result<LatencySummary> parse_sockperf(std::string_view output) {
  LatencySummary s;
  uint64_t count = 0;
  const bool ok =
      value_after(output, "percentile 50.000", s.p50_ns) && value_after(output, "percentile 99.000", s.p99_ns) &&
      value_after(output, "percentile 99.900", s.p999_ns) && value_after(output, "<MAX> observation", s.max_ns) &&
      value_after(output, "<MIN> observation", s.min_ns) && value_after(output, "avg-", count);
  if (!ok) return Status(StatusCode::kProtocolError, "sockperf printed no percentile lines");
  s.mean_ns = static_cast<double>(count);
  // "Total 2285 observations" (an earlier "[Total Run]" line has no number).
  for (std::size_t at = output.find("Total "); at != std::string_view::npos; at = output.find("Total ", at + 1)) {
    const std::string_view digits = output.substr(at + 6, 20);
    if (std::from_chars(digits.data(), digits.data() + digits.size(), s.count).ec == std::errc()) break;
  }
  return s;
}

Result<LatencySummary> parse_ucx_csv(std::string_view output) {
  const std::size_t header_at = output.find("iterations,");
  if (header_at == std::string_view::npos) return Status(StatusCode::kProtocolError, "ucx_perftest printed no CSV");
  const std::size_t header_end = output.find('\n', header_at);
  if (header_end == std::string_view::npos) return Status(StatusCode::kProtocolError, "ucx_perftest CSV has no data");
  const std::size_t data_end = output.find('\n', header_end + 1);
  const auto names = split(output.substr(header_at, header_end - header_at), ',');
  const auto values = split(output.substr(header_end + 1, data_end - header_end - 1), ',');
  LatencySummary s;
  s.tail_known = false;
  bool have_median = false, have_mean = false;
  for (std::size_t i = 0; i < names.size() && i < values.size(); ++i) {
    uint64_t ns = 0;
    if (names[i].find("percentile_lat") != std::string_view::npos && usec_to_ns(values[i], ns)) {
      s.p50_ns = 2 * ns;  // one-way -> round trip
      have_median = true;
    } else if (names[i] == "avg_lat" && usec_to_ns(values[i], ns)) {
      s.mean_ns = 2.0 * static_cast<double>(ns);
      have_mean = true;
    } else if (names[i] == "iterations") {
      std::from_chars(values[i].data(), values[i].data() + values[i].size(), s.count);
    }
  }
  if (!have_median || !have_mean) return Status(StatusCode::kProtocolError, "ucx_perftest CSV lacks latency columns");
  return s;
}

Row sockperf_peer(const PeerParams& p) {
  Row row = peer_row("peer.sockperf_tcp", "peer: sockperf ping-pong --tcp", "sleep", p);
  row.note = "sockperf's own RTT (--full-rtt); blocking recvfrom";
  const std::string path = find_in_path("sockperf");
  if (path.empty()) return with_outcome(row, Outcome::kNotInstalled, "sockperf is not on PATH (Debian: sockperf)");
  auto port = free_tcp_port();
  if (!port) return with_outcome(row, Outcome::kFailed, port.status().message());
  const std::string port_text = std::to_string(*port);
  SpawnSpec server{
      {path, "server", "--tcp", "-i", "127.0.0.1", "-p", port_text}, {}, p.cpu_peer, SpawnSpec::Output::kDiscard};
  SpawnSpec client{{path, "ping-pong", "--tcp", "-i", "127.0.0.1", "-p", port_text, "-m",
                    std::to_string(p.message_bytes), "-t", std::to_string(p.sockperf_seconds), "--full-rtt"},
                   {},
                   p.cpu_self,
                   SpawnSpec::Output::kCapture};
  auto output = run_pair(server, client, *port, p.timeout_ns + p.sockperf_seconds * 1'000'000'000ULL);
  if (!output) return with_outcome(row, Outcome::kFailed, "sockperf: " + output.status().message());
  auto summary = parse_sockperf(*output);
  if (!summary) return with_outcome(row, Outcome::kFailed, summary.status().message());
  row.rtt = *summary;
  row.iterations = summary->count;
  return row;
}

Row ucx_peer(const PeerParams& p, std::string_view tls) {
  Row row =
      peer_row("peer.ucx_" + std::string(tls), "peer: ucx_perftest tag_lat, UCX_TLS=" + std::string(tls), "busy", p);
  row.note = "ucx prints one-way: doubled; median and mean only";
  row.iterations = p.iterations;
  row.warmup = p.warmup;
  const std::string path = find_in_path("ucx_perftest");
  if (path.empty()) return with_outcome(row, Outcome::kNotInstalled, "ucx_perftest is not on PATH (Debian: ucx-utils)");
  auto port = free_tcp_port();
  if (!port) return with_outcome(row, Outcome::kFailed, port.status().message());
  const std::string port_text = std::to_string(*port);
  const std::vector<std::string> env = {"UCX_TLS=" + std::string(tls), "UCX_WARN_UNUSED_ENV_VARS=n"};
  SpawnSpec server{{path, "-p", port_text}, env, p.cpu_peer, SpawnSpec::Output::kDiscard};
  SpawnSpec client{{path, "127.0.0.1", "-p", port_text, "-t", "tag_lat", "-s", std::to_string(p.message_bytes), "-n",
                    std::to_string(p.iterations), "-w", std::to_string(p.warmup), "-v"},
                   env,
                   p.cpu_self,
                   SpawnSpec::Output::kCapture};
  const uint64_t timeout_ns = p.timeout_ns + (p.iterations + p.warmup) * kPerIterationAllowanceNs;
  auto output = run_pair(server, client, *port, timeout_ns);
  if (!output) return with_outcome(row, Outcome::kFailed, "ucx_perftest: " + output.status().message());
  auto summary = parse_ucx_csv(*output);
  if (!summary) return with_outcome(row, Outcome::kFailed, summary.status().message());
  row.rtt = *summary;
  return row;
}

}  // namespace fjord::bench
