#include "option_table.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <type_traits>
#include <utility>

#include "fjord/transport/config_file.h"
#include "wire.h"

namespace fjord::bench {
namespace {

using C = Command;

Status bad(std::string message) { return Status(StatusCode::kInvalidArgument, std::move(message)); }

// "--poll: 'fast' is not one of: busy, sleep".
Status not_accepted(const OptionSpec& spec, std::string_view value) {
  return bad(std::string(spec.name) + ": '" + std::string(value) + "' is not " + accepts_text(spec));
}

// N's decimal digits as a string constant, for the defaults in --help.
template <uint64_t N>
constexpr std::array<char, 21> decimal_digits() {
  std::array<char, 21> reversed{};
  std::array<char, 21> out{};
  std::size_t n = 0;
  uint64_t v = N;
  do {
    reversed[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  for (std::size_t i = 0; i < n; ++i) out[i] = reversed[n - 1 - i];
  return out;
}
template <uint64_t N>
inline constexpr std::array<char, 21> kDecimalDigits = decimal_digits<N>();
template <uint64_t N>
constexpr std::string_view decimal() {
  return std::string_view(kDecimalDigits<N>.data());
}

// A decimal number (digits, at most one '.'), or nullopt.
std::optional<double> decimal_number(std::string_view text) {
  if (text.empty() || text.size() > 24) return std::nullopt;
  int dots = 0;
  for (char c : text) {
    if (c == '.') ++dots;
    if ((c < '0' || c > '9') && c != '.') return std::nullopt;
  }
  if (dots > 1 || text == ".") return std::nullopt;
  return std::strtod(std::string(text).c_str(), nullptr);
}

Status apply_size(const OptionSpec& spec, const OptionValue& value, ParseState& s) {
  auto bytes = config::parse_bytes(value.text);
  if (!bytes) return not_accepted(spec, value.text);
  const uint64_t max = max_payload_bytes(false);
  if (*bytes > max)
    return bad(std::string(spec.name) + ": " + std::to_string(*bytes) + " is more than " + std::to_string(max) +
               ", the largest payload one 32 KB frame carries");
  s.options.size_bytes = *bytes;
  s.options.size_given = true;
  return Status::ok();
}

// One or two CPU numbers, "0" or "0,1".
Status apply_cpus(const OptionSpec& spec, const OptionValue& value, ParseState& s) {
  std::vector<int> cpus;
  std::string_view rest = value.text;
  while (!rest.empty() || cpus.empty()) {
    const std::size_t comma = rest.find(',');
    auto cpu = config::parse_uint(rest.substr(0, comma));
    if (!cpu || *cpu > 4095 || cpus.size() == 2) return not_accepted(spec, value.text);
    cpus.push_back(static_cast<int>(*cpu));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
    if (rest.empty()) return not_accepted(spec, value.text);
  }
  s.options.cpus = std::move(cpus);
  return Status::ok();
}

// Seconds with decimals ("0.5"), kept in milliseconds; min and max are ms.
Status apply_duration(const OptionSpec& spec, const OptionValue& value, ParseState& s) {
  const auto seconds = decimal_number(value.text);
  if (!seconds || *seconds * 1000 < static_cast<double>(spec.min) || *seconds * 1000 > static_cast<double>(spec.max))
    return not_accepted(spec, value.text);
  s.options.duration_ms = static_cast<uint64_t>(std::llround(*seconds * 1000));
  return Status::ok();
}

// "200000", "200k", "1.5M", each optionally followed by "/s".
Status apply_rate(const OptionSpec& spec, const OptionValue& value, ParseState& s) {
  std::string_view number = value.text;
  if (number.size() > 2 && number.substr(number.size() - 2) == "/s") number.remove_suffix(2);
  double scale = 1;
  if (!number.empty() && (number.back() == 'k' || number.back() == 'K')) scale = 1e3;
  if (!number.empty() && number.back() == 'M') scale = 1e6;
  if (scale != 1) number.remove_suffix(1);
  const auto parsed = decimal_number(number);
  if (!parsed) return not_accepted(spec, value.text);
  const double per_s = *parsed * scale;
  if (per_s < static_cast<double>(spec.min) || per_s > static_cast<double>(spec.max))
    return not_accepted(spec, value.text);
  s.options.rate_per_s = static_cast<uint64_t>(std::llround(per_s));
  return Status::ok();
}

// "90/10": read and update percentages adding up to 100.
Status apply_mix(const OptionSpec& spec, const OptionValue& value, ParseState& s) {
  const std::string_view text = value.text;
  const std::size_t slash = text.find('/');
  auto reads = config::parse_uint(text.substr(0, slash));
  auto updates = config::parse_uint(slash == std::string_view::npos ? std::string_view() : text.substr(slash + 1));
  if (!reads || !updates || *reads > 100 || *updates > 100 || *reads + *updates != 100) return not_accepted(spec, text);
  s.options.read_percent = static_cast<uint32_t>(*reads);
  return Status::ok();
}

Status apply_plot(const OptionSpec& spec, const OptionValue& value, ParseState& s) {
  const std::string_view v = value.text;
  const bool png = v.size() > 4 && v.substr(v.size() - 4) == ".png";
  const bool svg = v.size() > 4 && v.substr(v.size() - 4) == ".svg";
  if (!png && !svg) return bad(std::string(spec.name) + ": '" + std::string(v) + "' must end in .png or .svg");
  s.options.plot_path = v;
  return Status::ok();
}

// KEY=VALUE for the generated [ndbd] section: a key of letters, a value
// without spaces or line breaks.
bool node_param_ok(std::string_view text) {
  const std::size_t eq = text.find('=');
  if (eq == 0 || eq == std::string_view::npos || eq + 1 == text.size()) return false;
  const bool key_ok = std::all_of(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(eq),
                                  [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; });
  const bool value_ok = text.find_first_of(" \t\r\n#;", eq) == std::string_view::npos;
  return key_ok && value_ok;
}

Status apply_node_param(const OptionSpec& spec, const OptionValue& value, ParseState& s) {
  if (!node_param_ok(value.text)) return not_accepted(spec, value.text);
  s.options.node_params.emplace_back(value.text);
  return Status::ok();
}

// "SchedulerSpinTimer=0,50,100": a data-node parameter and its values.
Status apply_sweep(const OptionSpec& spec, const OptionValue& value, ParseState& s) {
  if (!node_param_ok(value.text)) return not_accepted(spec, value.text);
  const std::size_t eq = value.text.find('=');
  std::vector<std::string> values;
  for (std::size_t at = eq + 1; at <= value.text.size();) {
    std::size_t comma = value.text.find(',', at);
    if (comma == std::string_view::npos) comma = value.text.size();
    if (comma == at) return not_accepted(spec, value.text);
    values.emplace_back(value.text.substr(at, comma - at));
    at = comma + 1;
  }
  if (values.size() > kMaxSweepValues)
    return bad(std::string(spec.name) + ": " + std::to_string(values.size()) + " values; at most " +
               std::to_string(kMaxSweepValues));
  s.options.sweep_param = value.text.substr(0, eq);
  s.options.sweep_values = std::move(values);
  return Status::ok();
}

// "2ms", "500us", "1.5ms", "3s": a duration, into nanoseconds.
Status apply_over(const OptionSpec& spec, const OptionValue& value, ParseState& s) {
  std::string_view number = value.text;
  double scale = 0;
  for (const auto& [suffix, ns] : {std::pair<std::string_view, double>{"us", 1e3}, {"ms", 1e6}, {"s", 1e9}}) {
    if (number.size() > suffix.size() && number.substr(number.size() - suffix.size()) == suffix) {
      scale = ns;
      number.remove_suffix(suffix.size());
      break;
    }
  }
  const auto parsed = decimal_number(number);
  if (scale == 0 || !parsed) return not_accepted(spec, value.text);
  const double ns = *parsed * scale;
  if (ns < 1 || ns > static_cast<double>(kMaxOverNs)) return not_accepted(spec, value.text);
  s.options.over_ns = static_cast<uint64_t>(std::llround(ns));
  return Status::ok();
}

std::string join(std::span<const std::string> names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

Status apply_transporter(const OptionSpec& spec, const OptionValue& value, ParseState& s) {
  if (std::find(s.transporters.begin(), s.transporters.end(), value.text) == s.transporters.end())
    return bad(std::string(spec.name) + ": '" + std::string(value.text) +
               "' is not built in (built in: " + join(s.transporters) + ")");
  s.options.transporter = value.text;
  return Status::ok();
}

Status apply_poll(const OptionSpec& spec, const OptionValue& value, ParseState& s) {
  if (value.text != "busy" && value.text != "sleep") return not_accepted(spec, value.text);
  s.options.poll = value.text == "busy" ? PollMode::kBusy : PollMode::kSleep;
  s.options.poll_given = true;
  return Status::ok();
}

Status apply_link_param(const OptionSpec& spec, const OptionValue& value, ParseState& s) {
  const std::size_t eq = value.text.find('=');
  if (eq == 0 || eq == std::string_view::npos || value.text.find('\n') != std::string_view::npos)
    return not_accepted(spec, value.text);
  s.options.link_params.emplace_back(value.text);
  return Status::ok();
}

// The plain setters the table uses: a number into an Options field (and its
// "given" flag), a flag, free text, a mode flag of the parse.
template <auto Field, auto Given = nullptr>
Status set_number(const OptionSpec& /*spec*/, const OptionValue& value, ParseState& s) {
  auto& field = s.options.*Field;
  field = static_cast<std::remove_reference_t<decltype(field)>>(value.number);
  if constexpr (!std::is_null_pointer_v<decltype(Given)>) s.options.*Given = true;
  return Status::ok();
}
template <auto Field>
Status set_flag(const OptionSpec& /*spec*/, const OptionValue& /*value*/, ParseState& s) {
  s.options.*Field = true;
  return Status::ok();
}
template <auto Field>
Status set_text(const OptionSpec& /*spec*/, const OptionValue& value, ParseState& s) {
  s.options.*Field = value.text;
  return Status::ok();
}
template <auto Field>
Status set_mode(const OptionSpec& /*spec*/, const OptionValue& /*value*/, ParseState& s) {
  s.*Field = true;
  return Status::ok();
}

Status apply_help(const OptionSpec& /*spec*/, const OptionValue& /*value*/, ParseState& s) {
  s.options.command = Command::kHelp;
  return Status::ok();
}

Status apply_client(const OptionSpec& /*spec*/, const OptionValue& value, ParseState& s) {
  s.options.host = value.text;
  s.client = true;
  return Status::ok();
}

// The hidden options the ping peer process is started with.
Status apply_peer_node(const OptionSpec& /*spec*/, const OptionValue& value, ParseState& s) {
  s.options.peer.node = static_cast<NodeId>(value.number);
  s.peer = true;
  return Status::ok();
}
Status apply_peer_port(const OptionSpec& /*spec*/, const OptionValue& value, ParseState& s) {
  s.options.peer.port = static_cast<uint16_t>(value.number);
  return Status::ok();
}
Status apply_peer_config_text(const OptionSpec& /*spec*/, const OptionValue& value, ParseState& s) {
  s.options.peer.config_text = value.text;
  return Status::ok();
}
Status apply_peer_config_file(const OptionSpec& /*spec*/, const OptionValue& value, ParseState& s) {
  s.options.peer.config_path = value.text;
  return Status::ok();
}
Status apply_peer_link_type(const OptionSpec& /*spec*/, const OptionValue& value, ParseState& s) {
  s.options.peer.link_type = value.text;
  return Status::ok();
}

constexpr CommandSet kDatabase = command_set({C::kAccess, C::kThroughput});
constexpr CommandSet kPingSide = command_set({C::kPing, C::kPingAll, C::kClient, C::kServer});
constexpr CommandSet kCounted = command_set({C::kAccess, C::kPing, C::kPingAll, C::kClient});
constexpr std::string_view kTextOfDuration = "(throughput runs for --duration)";

using H = HelpSection;

const OptionSpec kOptions[] = {
    // access and throughput
    {.name = "--transporter",
     .value_name = "NAME",
     .apply = apply_transporter,
     .help = {{H::kDatabase, "measure this transporter only; built in: {built_in}",
               "access: every one that can run here; throughput: tcp"},
              {H::kPing, "transporter of the link", "tcp"}}},
    {.name = "--rows",
     .value_name = "N",
     .commands = kDatabase,
     .what = "a number",
     .min = 1,
     .max = kMaxRows,
     .apply = set_number<&Options::rows, &Options::rows_given>,
     .help = {{H::kDatabase, "rows in the table", decimal<kDefaultRows>()}}},
    {.name = "--row-bytes",
     .value_name = "B",
     .commands = kDatabase,
     .what = "a row size in bytes",
     .min = kMinRowBytes,
     .max = kMaxRowBytes,
     .apply = set_number<&Options::row_bytes>,
     .help = {{H::kDatabase, "bytes per row: 24 of keys (id, unique key, ordered key) plus a binary filler",
               decimal<kDefaultRowBytes>()}}},
    {.name = "--batch",
     .value_name = "N",
     .what = "a number",
     .min = 1,
     .max = kMaxBatch,
     .apply = set_number<&Options::batch, &Options::batch_given>,
     .help = {{H::kDatabase,
               "access: rows per batched execute and per index-range scan; throughput: key operations per "
               "transaction",
               "access 20, throughput 1"},
              {H::kPing, "--stream: frames packed per flush", decimal<kDefaultStreamBatch>()}}},
    {.name = "--config",
     .value_name = "FILE",
     .apply = set_text<&Options::config_path>,
     .help = {{H::kDatabase,
               "your cluster's config file (NDB config.ini style): the link section between the API node and the "
               "data node ([tcp], [shm], ...) chooses the transporter; the data node must be running unless "
               "--start-node",
               ""},
              {H::kPing,
               "take the link from FILE; the section name ([tcp], [shm], ...) chooses the transporter; its "
               "NodeIdServer side runs here",
               ""}}},
    {.name = "--api-node",
     .value_name = "N",
     .commands = kDatabase,
     .needs_config = true,
     .what = "a node id",
     .min = 1,
     .max = kMaxNodeId,
     .apply = set_number<&Options::api_node>,
     .help = {{H::kDatabase,
               "with --config: this program's [api] node id; throughput executors take it and the [api] sections "
               "after it",
               "the first [api]"}}},
    {.name = "--data-node",
     .value_name = "M",
     .commands = kDatabase,
     .needs_config = true,
     .what = "a node id",
     .min = 1,
     .max = kMaxNodeId,
     .apply = set_number<&Options::data_node>,
     .help = {{H::kDatabase, "with --config: the [ndbd] node to use", "and only choice: the first"}}},
    {.name = "--start-node",
     .commands = kDatabase,
     .needs_config = true,
     .apply = set_flag<&Options::start_node>,
     .help = {{H::kDatabase, "with --config: start fjord-datanode for that node here, stop it at the end", ""}}},
    {.name = "--no-compare",
     .commands = kDatabase,
     .apply = set_mode<&ParseState::no_compare>,
     .help = {{H::kDatabase,
               "skip what is otherwise measured beside ours in the same run: redis-server (GET and MGET of K keys "
               "over TCP and a Unix socket; throughput: redis-benchmark -P 32 GET), the bare TCP ping-pong floor "
               "that the targets compare with, and the cache-line mailbox between the CPUs before and after the "
               "shm rows (the host's state, shown beside the shm targets)",
               ""}}},
    {.name = "--plot",
     .value_name = "FILE",
     .commands = command_bit(C::kAccess),
     .apply = apply_plot,
     .help = {{H::kDatabase,
               "access: write a chart of microseconds per row by access method and transporter (p50 bars, p99 "
               "whiskers, NDB 2004's TCP and SCI figures beside them), or with --sweep the latency distribution "
               "of each value; FILE ends in .png or .svg; needs gnuplot",
               ""}}},
    {.name = "--node-param",
     .value_name = "K=V",
     .commands = command_bit(C::kAccess),
     .accepts = "KEY=VALUE (a data-node parameter, such as SchedulerExecutionTimer=400)",
     .apply = apply_node_param,
     .help = {{H::kDatabase,
               "access without --config: add a line to the generated data node's [ndbd] section (repeatable; "
               "SchedulerSpinTimer replaces the node's spin time)",
               ""}}},
    {.name = "--sweep",
     .value_name = "P=V1,V2",
     .commands = command_bit(C::kAccess),
     .accepts = "PARAM=V1,V2,... (a data-node parameter and up to 32 values, such as SchedulerSpinTimer=0,50,400)",
     .apply = apply_sweep,
     .help = {{H::kDatabase,
               "access without --config: start the data node afresh for each value of the parameter and measure "
               "serial pk read, insert and update over each transporter: p50, p99, p99.9, the share of samples "
               "over --over, and the node's CPU use, one row per value (--json: one object per value and "
               "transporter; --plot: the latency distribution of each value). With --poll sleep the API sleeps "
               "while it waits, so only the node spins",
               ""}}},
    {.name = "--over",
     .value_name = "TIME",
     .commands = command_bit(C::kAccess),
     .accepts = "a duration with us, ms or s (examples: 2ms, 500us, 1.5ms)",
     .apply = apply_over,
     .help = {{H::kDatabase, "with --sweep: report the share of samples slower than TIME", "2ms"}}},
    // access, and ping
    {.name = "--iterations",
     .value_name = "N",
     .commands = kCounted,
     .scope_note = kTextOfDuration,
     .what = "a number",
     .min = 1,
     .max = kMaxIterations,
     .apply = set_number<&Options::iterations>,
     .help = {{H::kAccess,
               "measured samples per access method: executes, or scans (the full scan runs N/2000 times, at "
               "least 3)",
               "10000"},
              {H::kPing, "measured round trips, or messages with --stream",
               "100000 busy, 20000 sleep, 1000000 streamed; ping-all: 20000, 5000, 200000"}}},
    {.name = "--warmup",
     .value_name = "N",
     .commands = kCounted,
     .scope_note = kTextOfDuration,
     .what = "a number",
     .min = 0,
     .max = kMaxIterations,
     .apply = set_number<&Options::warmup>,
     .help = {{H::kAccess, "discarded samples first, per method", "a tenth, at least 100"},
              {H::kPing, "discarded round trips or messages first", "a tenth, at least 100"}}},
    // throughput
    {.name = "--duration",
     .value_name = "SECONDS",
     .commands = command_bit(C::kThroughput),
     .min = 50,  // ms; `accepts` says the same in seconds
     .max = 3'600'000,
     .accepts = "a number of seconds from 0.05 to 3600 (decimals allowed, e.g. 0.5)",
     .apply = apply_duration,
     .help = {{H::kThroughput, "measured time, after a discarded warm-up of a tenth of it",
               decimal<kDefaultDurationMs / 1000>()}}},
    {.name = "--definers",
     .value_name = "N",
     .commands = command_bit(C::kThroughput),
     .what = "a number",
     .min = 1,
     .max = kMaxDefiners,
     .apply = set_number<&Options::definers>,
     .help = {{H::kThroughput, "threads that prepare key operations", "1"}}},
    {.name = "--executors",
     .value_name = "N",
     .commands = command_bit(C::kThroughput),
     .what = "a number",
     .min = 1,
     .max = kMaxExecutors,
     .apply = set_number<&Options::executors>,
     .help = {{H::kThroughput,
               "threads that each own one API connection (one API node id) and keep transactions in flight", "1"}}},
    {.name = "--threads-per-api-node",
     .value_name = "N",
     .commands = command_bit(C::kThroughput),
     .what = "a number",
     .min = 2,
     .max = kMaxExecutors,
     .apply = set_number<&Options::threads_per_api_node>,
     .help = {{H::kThroughput,
               "sets --executors N and runs twice: N API nodes with one executor each, then one API node (one "
               "cluster connection) with N executor threads, a session each; prints both and their ratio",
               "off"}}},
    {.name = "--rounds",
     .value_name = "N",
     .commands = command_bit(C::kThroughput),
     .what = "a number",
     .min = 1,
     .max = 21,
     .apply = set_number<&Options::rounds>,
     .help = {{H::kThroughput,
               "with --threads-per-api-node: N pairs of runs, the later ones in alternating order (one API node "
               "first in odd rounds), each pair's ratio printed; the target is judged on their median",
               "1"}}},
    {.name = "--in-flight",
     .value_name = "N",
     .commands = command_bit(C::kThroughput),
     .what = "a number",
     .min = 1,
     .max = kMaxInFlight,
     .apply = set_number<&Options::in_flight>,
     .help = {{H::kThroughput, "transactions in flight per executor", decimal<kDefaultInFlight>()}}},
    {.name = "--mix",
     .value_name = "R/U",
     .commands = command_bit(C::kThroughput),
     .accepts = "READ/UPDATE percentages adding up to 100 (examples: 100/0, 90/10, 50/50)",
     .apply = apply_mix,
     .help = {{H::kThroughput, "percent reads and updates", "100/0"}}},
    {.name = "--rate",
     .value_name = "N",
     .commands = command_bit(C::kThroughput),
     .min = 1,
     .max = kMaxRatePerS,
     .accepts = "a rate per second from {min} to {max} (examples: 50000, 200k, 1.5M, 200k/s)",
     .apply = apply_rate,
     .help = {{H::kThroughput,
               "open loop at N operations per second in total: each operation is timed from its scheduled send "
               "time, so queueing shows in the latency (no coordinated omission)",
               "closed loop, as fast as it goes"}}},
    // ping
    {.name = "--link-param",
     .value_name = "K=V",
     .commands = kPingSide,
     .accepts = "KEY=VALUE",
     .apply = apply_link_param,
     .help = {{H::kPing, "add a line to the generated link section (repeatable; e.g. Checksum=1)", ""}}},
    {.name = "--size",
     .value_name = "BYTES",
     .commands = kPingSide,
     .accepts = "a byte count (examples: 64, 4096, 4K)",
     .apply = apply_size,
     .help = {{H::kPing, "payload per message, at most {max_payload}; frames add a 40-byte header", "64"}}},
    {.name = "--stream",
     .commands = kPingSide,
     .apply = set_flag<&Options::stream>,
     .help = {{H::kPing,
               "one side sends as fast as the link accepts, the peer receives, copies each payload out and checks "
               "the counts: messages/s and GB/s",
               ""}}},
    {.name = "--compare",
     .apply = set_flag<&Options::compare>,
     .help = {{H::kPing,
               "also measure, in this run: a cache-line mailbox between two processes, a bare TCP ping-pong, "
               "sockperf, ucx_perftest (posix, tcp) and, with --stream, one core's memcpy; print ratios and the "
               "targets, each against the floor it is relative to",
               ""}}},
    {.name = "--port",
     .value_name = "PORT",
     .what = "a port",
     .min = 1,
     .max = 65535,
     .apply = set_number<&Options::port>,
     .help = {{H::kPing, "--server/--client: the port the server listens on", decimal<kDefaultPort>()}}},
    {.name = "--host",
     .value_name = "ADDRESS",
     .commands = command_set({C::kClient, C::kServer}),
     .apply = set_text<&Options::own_host>,
     .help = {{H::kPing,
               "--server: the address it listens on (0.0.0.0: every address, over rdma every RDMA device); "
               "--client: the address it connects from (0.0.0.0: the one the route to the server picks)",
               "0.0.0.0"}}},
    {.name = "--peer-host",
     .value_name = "HOST",
     .apply = set_text<&Options::peer_host>,
     .help = {{H::kPing, "--server: the client's host, which the link admits", "localhost"}}},
    // every command
    {.name = "--poll",
     .value_name = "busy|sleep",
     .accepts = "one of: busy, sleep",
     .apply = apply_poll,
     .help = {{H::kEvery,
               "busy: spin on receive; sleep: block on the transporter's wake-up (poll/futex); ping-all runs both "
               "unless given",
               "busy"}}},
    {.name = "--cpus",
     .value_name = "A,B",
     .accepts = "one or two CPU numbers like 0,1",
     .apply = apply_cpus,
     .help = {{H::kEvery,
               "pin this program to CPU A and its peer (the data node started here, or the ping peer) to CPU B; "
               "--server/--client take one CPU",
               "the first two CPUs this process may use"}}},
    {.name = "--json",
     .apply = set_flag<&Options::json>,
     .help = {{H::kEvery, "print one JSON object instead of the table", ""}}},
    {.name = "--timeout",
     .value_name = "SECONDS",
     .what = "a number of seconds",
     .min = 1,
     .max = 3600,
     .apply = set_number<&Options::timeout_s>,
     .help = {{H::kEvery, "give up when a peer or the data node does not connect or answer",
               decimal<kDefaultTimeoutS>()}}},
    {.name = "--verbose",
     .apply = set_flag<&Options::verbose>,
     .help = {{H::kEvery, "transporter and API log lines on stderr", ""}}},
    {.name = "--help", .alias = "-h", .apply = apply_help, .help = {{H::kEvery, "this text", ""}}},
    // The modes, in the usage lines of --help; Dolphin's tool spells them with one dash.
    {.name = "--server", .alias = "-server", .apply = set_mode<&ParseState::server>},
    {.name = "--client", .alias = "-client", .value_name = "HOST", .apply = apply_client},
    // Internal: the ping peer process is started with these.
    {.name = "--x-peer-node",
     .value_name = "N",
     .what = "a number",
     .min = 1,
     .max = kMaxNodeId,
     .apply = apply_peer_node},
    {.name = "--x-peer-port", .value_name = "PORT", .what = "a port", .min = 0, .max = 65535, .apply = apply_peer_port},
    {.name = "--x-peer-config-text", .value_name = "TEXT", .apply = apply_peer_config_text},
    {.name = "--x-peer-config-file", .value_name = "FILE", .apply = apply_peer_config_file},
    {.name = "--x-peer-link-type", .value_name = "TYPE", .apply = apply_peer_link_type},
};

}  // namespace

std::span<const OptionSpec> option_table() noexcept { return kOptions; }

const OptionSpec* find_option(std::string_view spelling) noexcept {
  for (const OptionSpec& spec : kOptions)
    if (spelling == spec.name || (!spec.alias.empty() && spelling == spec.alias)) return &spec;
  return nullptr;
}

std::string scope_text(const OptionSpec& spec) {
  std::string out;
  const auto add = [&](CommandSet group, const char* name) {
    if ((spec.commands & group) == 0) return;
    out += (out.empty() ? "" : " and ") + std::string(name);
  };
  add(command_bit(C::kAccess), "access");
  add(command_bit(C::kThroughput), "throughput");
  add(kPingSide, "ping");
  if (spec.needs_config) out += " (with --config)";
  if (!spec.scope_note.empty()) out += " " + std::string(spec.scope_note);
  return out;
}

std::string accepts_text(const OptionSpec& spec) {
  if (!spec.what.empty())
    return std::string(spec.what) + " from " + std::to_string(spec.min) + " to " + std::to_string(spec.max);
  std::string out(spec.accepts);
  for (const auto& [mark, number] : {std::pair{std::string_view("{min}"), spec.min}, {"{max}", spec.max}})
    if (const std::size_t at = out.find(mark); at != std::string::npos)
      out.replace(at, mark.size(), std::to_string(number));
  return out;
}

}  // namespace fjord::bench
