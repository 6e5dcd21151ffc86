#include "options.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "fjord/transport/config_file.h"
#include "wire.h"

namespace fjord::bench {
namespace {

Status bad(std::string message) { return Status(StatusCode::kInvalidArgument, std::move(message)); }

std::string join(std::span<const std::string> names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

// A number in [min, max]; the message names the option and the range.
Result<uint64_t> number_in(std::string_view option, std::string_view text, uint64_t min, uint64_t max,
                           const char* what = "a number") {
  auto value = config::parse_uint(text);
  if (!value || *value < min || *value > max)
    return bad(std::string(option) + ": '" + std::string(text) + "' is not " + what + " from " + std::to_string(min) +
               " to " + std::to_string(max));
  return *value;
}

Result<uint64_t> payload_size(std::string_view text) {
  auto value = config::parse_bytes(text);
  if (!value) return bad("--size: '" + std::string(text) + "' is not a byte count (examples: 64, 4096, 4K)");
  const uint64_t max = max_payload_bytes(false);
  if (*value > max)
    return bad("--size: " + std::to_string(*value) + " is more than " + std::to_string(max) +
               ", the largest payload one 32 KB frame carries");
  return *value;
}

Result<std::vector<int>> cpu_list(std::string_view text) {
  std::vector<int> cpus;
  const auto fail = [&] { return bad("--cpus: '" + std::string(text) + "' is not one or two CPU numbers like 0,1"); };
  std::string_view rest = text;
  while (!rest.empty() || cpus.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    auto cpu = config::parse_uint(item);
    if (!cpu || *cpu > 4095 || cpus.size() == 2) return fail();
    cpus.push_back(static_cast<int>(*cpu));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
    if (rest.empty()) return fail();
  }
  return cpus;
}

// A decimal number (digits, at most one '.'), or nullopt.
std::optional<double> decimal(std::string_view text) {
  if (text.empty() || text.size() > 24) return std::nullopt;
  int dots = 0;
  for (char c : text) {
    if (c == '.') ++dots;
    if ((c < '0' || c > '9') && c != '.') return std::nullopt;
  }
  if (dots > 1 || text == ".") return std::nullopt;
  return std::strtod(std::string(text).c_str(), nullptr);
}

// "0.5" seconds -> 500 ms, within 0.05..3600 s.
Result<uint64_t> duration_ms(std::string_view text) {
  const auto seconds = decimal(text);
  if (!seconds || *seconds < 0.05 || *seconds > 3600)
    return bad("--duration: '" + std::string(text) +
               "' is not a number of seconds from 0.05 to 3600 (decimals allowed, e.g. 0.5)");
  return static_cast<uint64_t>(std::llround(*seconds * 1000));
}

// "200000", "200k", "1.5M", each optionally followed by "/s".
Result<uint64_t> rate(std::string_view text) {
  const auto fail = [&] {
    return bad("--rate: '" + std::string(text) + "' is not a rate per second from 1 to " +
               std::to_string(kMaxRatePerS) + " (examples: 50000, 200k, 1.5M, 200k/s)");
  };
  std::string_view number = text;
  if (number.size() > 2 && number.substr(number.size() - 2) == "/s") number.remove_suffix(2);
  double scale = 1;
  if (!number.empty() && (number.back() == 'k' || number.back() == 'K')) scale = 1e3;
  if (!number.empty() && number.back() == 'M') scale = 1e6;
  if (scale != 1) number.remove_suffix(1);
  const auto value = decimal(number);
  if (!value) return fail();
  const double per_s = *value * scale;
  if (per_s < 1 || per_s > static_cast<double>(kMaxRatePerS)) return fail();
  return static_cast<uint64_t>(std::llround(per_s));
}

// "90/10": read and update percentages adding up to 100.
Result<uint32_t> mix(std::string_view text) {
  const std::size_t slash = text.find('/');
  const std::string_view read_text = text.substr(0, slash);
  const std::string_view update_text = slash == std::string_view::npos ? std::string_view() : text.substr(slash + 1);
  auto reads = config::parse_uint(read_text);
  auto updates = config::parse_uint(update_text);
  if (!reads || !updates || *reads > 100 || *updates > 100 || *reads + *updates != 100)
    return bad("--mix: '" + std::string(text) +
               "' is not READ/UPDATE percentages adding up to 100 (examples: 100/0, 90/10, 50/50)");
  return static_cast<uint32_t>(*reads);
}

struct Flags {
  bool server = false;
  bool client = false;
  bool peer = false;
  bool no_compare = false;
  std::string command_word;
  std::vector<std::string_view> given;  // every option named, canonical spelling
};

// Applies a valued option whose value is a number; kNotFound for other names.
Status apply_number(std::string_view name, std::string_view value, Options& o, Flags& f) {
  Result<uint64_t> v = Status(StatusCode::kNotFound, "");
  if (name == "--size") v = payload_size(value);
  if (name == "--iterations") v = number_in(name, value, 1, kMaxIterations);
  if (name == "--warmup") v = number_in(name, value, 0, kMaxIterations);
  if (name == "--batch") v = number_in(name, value, 1, kMaxBatch);
  if (name == "--port") v = number_in(name, value, 1, 65535, "a port");
  if (name == "--timeout") v = number_in(name, value, 1, 3600, "a number of seconds");
  if (name == "--rows") v = number_in(name, value, 1, kMaxRows);
  if (name == "--row-bytes") v = number_in(name, value, kMinRowBytes, kMaxRowBytes, "a row size in bytes");
  if (name == "--api-node" || name == "--data-node") v = number_in(name, value, 1, kMaxNodeId, "a node id");
  if (name == "--definers") v = number_in(name, value, 1, kMaxDefiners);
  if (name == "--executors") v = number_in(name, value, 1, kMaxExecutors);
  if (name == "--in-flight") v = number_in(name, value, 1, kMaxInFlight);
  if (name == "--x-peer-node") v = number_in(name, value, 1, kMaxNodeId);
  if (name == "--x-peer-port") v = number_in(name, value, 0, 65535, "a port");
  if (!v) return v.status();
  if (name == "--size") {
    o.size_bytes = *v;
    o.size_given = true;
  } else if (name == "--iterations") {
    o.iterations = *v;
  } else if (name == "--warmup") {
    o.warmup = *v;
  } else if (name == "--batch") {
    o.batch = static_cast<uint32_t>(*v);
    o.batch_given = true;
  } else if (name == "--port") {
    o.port = static_cast<uint16_t>(*v);
  } else if (name == "--timeout") {
    o.timeout_s = *v;
  } else if (name == "--rows") {
    o.rows = *v;
    o.rows_given = true;
  } else if (name == "--row-bytes") {
    o.row_bytes = static_cast<uint32_t>(*v);
  } else if (name == "--api-node") {
    o.api_node = static_cast<NodeId>(*v);
  } else if (name == "--data-node") {
    o.data_node = static_cast<NodeId>(*v);
  } else if (name == "--definers") {
    o.definers = static_cast<uint32_t>(*v);
  } else if (name == "--executors") {
    o.executors = static_cast<uint32_t>(*v);
  } else if (name == "--in-flight") {
    o.in_flight = static_cast<uint32_t>(*v);
  } else if (name == "--x-peer-node") {
    o.peer.node = static_cast<NodeId>(*v);
    f.peer = true;
  } else {
    o.peer.port = static_cast<uint16_t>(*v);
  }
  return Status::ok();
}

// The valued options of access and throughput that are not plain numbers;
// kNotFound for other names.
Status apply_database_valued(std::string_view name, std::string_view value, Options& o) {
  if (name == "--duration") {
    auto v = duration_ms(value);
    if (!v) return v.status();
    o.duration_ms = *v;
  } else if (name == "--rate") {
    auto v = rate(value);
    if (!v) return v.status();
    o.rate_per_s = *v;
  } else if (name == "--mix") {
    auto v = mix(value);
    if (!v) return v.status();
    o.read_percent = *v;
  } else if (name == "--plot") {
    const bool png = value.size() > 4 && value.substr(value.size() - 4) == ".png";
    const bool svg = value.size() > 4 && value.substr(value.size() - 4) == ".svg";
    if (!png && !svg) return bad("--plot: '" + std::string(value) + "' must end in .png or .svg");
    o.plot_path = value;
  } else {
    return Status(StatusCode::kNotFound, "");
  }
  return Status::ok();
}

// Applies one option that takes a value (a name from kValued).
Status apply_valued(std::string_view name, std::string_view value, Options& o, Flags& f,
                    std::span<const std::string> transporters) {
  if (Status s = apply_number(name, value, o, f); s.code() != StatusCode::kNotFound) return s;
  if (Status s = apply_database_valued(name, value, o); s.code() != StatusCode::kNotFound) return s;
  if (name == "--transporter") {
    if (std::find(transporters.begin(), transporters.end(), value) == transporters.end())
      return bad("--transporter: '" + std::string(value) + "' is not built in (built in: " + join(transporters) + ")");
    o.transporter = value;
  } else if (name == "--poll") {
    if (value != "busy" && value != "sleep")
      return bad("--poll: '" + std::string(value) + "' is not one of: busy, sleep");
    o.poll = value == "busy" ? PollMode::kBusy : PollMode::kSleep;
    o.poll_given = true;
  } else if (name == "--cpus") {
    auto v = cpu_list(value);
    if (!v) return v.status();
    o.cpus = std::move(v).value();
  } else if (name == "--config") {
    o.config_path = value;
  } else if (name == "--link-param") {
    const std::size_t eq = value.find('=');
    if (eq == 0 || eq == std::string_view::npos || value.find('\n') != std::string_view::npos)
      return bad("--link-param: '" + std::string(value) + "' is not KEY=VALUE");
    o.link_params.emplace_back(value);
  } else if (name == "--client") {
    o.host = value;
    f.client = true;
  } else if (name == "--peer-host") {
    o.peer_host = value;
  } else if (name == "--x-peer-config-text") {
    o.peer.config_text = value;
  } else if (name == "--x-peer-config-file") {
    o.peer.config_path = value;
  } else {
    FJORD_ASSERT(name == "--x-peer-link-type");
    o.peer.link_type = value;
  }
  return Status::ok();
}

// Applies a flag (a name from kFlags).
Status apply_flag(std::string_view name, Options& o, Flags& f) {
  if (name == "--json") {
    o.json = true;
  } else if (name == "--compare") {
    o.compare = true;
  } else if (name == "--stream") {
    o.stream = true;
  } else if (name == "--verbose") {
    o.verbose = true;
  } else if (name == "--server") {
    f.server = true;
  } else if (name == "--start-node") {
    o.start_node = true;
  } else if (name == "--no-compare") {
    f.no_compare = true;
  } else {
    FJORD_ASSERT(name == "--help");
    o.command = Command::kHelp;
  }
  return Status::ok();
}

// Dolphin's tool spells its modes with one dash; -h is the usual help.
std::string_view canonical(std::string_view name) {
  if (name == "-server") return "--server";
  if (name == "-client") return "--client";
  if (name == "-h") return "--help";
  return name;
}

constexpr std::string_view kFlags[] = {"--json",    "--compare", "--no-compare", "--stream",
                                       "--verbose", "--server",  "--start-node", "--help"};
constexpr std::string_view kValued[] = {
    "--transporter",
    "--size",
    "--iterations",
    "--warmup",
    "--poll",
    "--cpus",
    "--batch",
    "--config",
    "--link-param",
    "--port",
    "--client",
    "--peer-host",
    "--timeout",
    "--rows",
    "--row-bytes",
    "--api-node",
    "--data-node",
    "--plot",
    "--duration",
    "--definers",
    "--executors",
    "--in-flight",
    "--mix",
    "--rate",
    "--x-peer-node",
    "--x-peer-port",
    "--x-peer-config-text",
    "--x-peer-config-file",
    "--x-peer-link-type",
};
constexpr std::string_view kCommandWords[] = {"access", "throughput", "ping", "ping-all", "all"};

bool listed(std::span<const std::string_view> names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

Status parse_one(std::span<const std::string> args, std::size_t& i, Options& o, Flags& f,
                 std::span<const std::string> transporters) {
  const std::string_view arg = args[i];
  if (arg.empty() || arg[0] != '-') {
    if (!f.command_word.empty() || !listed(kCommandWords, arg))
      return bad("unexpected argument '" + std::string(arg) + "' (commands: access, throughput, ping, ping-all)");
    f.command_word = arg;
    return Status::ok();
  }
  const std::size_t eq = arg.find('=');
  const std::string_view name = canonical(arg.substr(0, eq));
  if (listed(kFlags, name)) {
    if (eq != std::string_view::npos) return bad("option " + std::string(name) + " takes no value");
    f.given.push_back(name);
    return apply_flag(name, o, f);
  }
  if (!listed(kValued, name)) return bad("unknown option '" + std::string(arg.substr(0, eq)) + "'");
  std::string_view value;
  if (eq != std::string_view::npos)
    value = arg.substr(eq + 1);
  else if (i + 1 < args.size())
    value = args[++i];
  else
    return bad("option " + std::string(name) + " needs a value");
  f.given.push_back(*std::find(std::begin(kValued), std::end(kValued), name));
  return apply_valued(name, value, o, f, transporters);
}

// The command from the word, the mode flags and (without a word) the options
// that only ping has; access is the default.
Command command_of(const Options& o, const Flags& f) {
  if (f.server) return Command::kServer;
  if (f.client) return Command::kClient;
  if (f.command_word == "ping") return Command::kPing;
  if (f.command_word == "ping-all" || f.command_word == "all") return Command::kPingAll;
  if (f.command_word == "throughput") return Command::kThroughput;
  if (f.command_word == "access") return Command::kAccess;
  if (o.stream || o.size_given || !o.link_params.empty()) return Command::kPing;
  return Command::kAccess;
}

// Options that belong to some commands only: each names where it applies.
struct Scope {
  std::string_view option;
  std::initializer_list<Command> commands;
  std::string_view where;
};

Status check_scopes(Command command, const Flags& f) {
  using C = Command;
  static const Scope kScopes[] = {
      {"--rows", {C::kAccess, C::kThroughput}, "access and throughput"},
      {"--row-bytes", {C::kAccess, C::kThroughput}, "access and throughput"},
      {"--api-node", {C::kAccess, C::kThroughput}, "access and throughput (with --config)"},
      {"--data-node", {C::kAccess, C::kThroughput}, "access and throughput (with --config)"},
      {"--start-node", {C::kAccess, C::kThroughput}, "access and throughput (with --config)"},
      {"--plot", {C::kAccess}, "access"},
      {"--no-compare", {C::kAccess, C::kThroughput}, "access and throughput"},
      {"--duration", {C::kThroughput}, "throughput"},
      {"--definers", {C::kThroughput}, "throughput"},
      {"--executors", {C::kThroughput}, "throughput"},
      {"--in-flight", {C::kThroughput}, "throughput"},
      {"--mix", {C::kThroughput}, "throughput"},
      {"--rate", {C::kThroughput}, "throughput"},
      {"--iterations",
       {C::kAccess, C::kPing, C::kPingAll, C::kClient},
       "access and ping (throughput runs for --duration)"},
      {"--warmup", {C::kAccess, C::kPing, C::kPingAll, C::kClient}, "access and ping (throughput runs for --duration)"},
      {"--stream", {C::kPing, C::kPingAll, C::kClient, C::kServer}, "ping"},
      {"--size", {C::kPing, C::kPingAll, C::kClient, C::kServer}, "ping"},
      {"--link-param", {C::kPing, C::kPingAll, C::kClient, C::kServer}, "ping"},
  };
  for (const Scope& scope : kScopes) {
    if (!listed(f.given, scope.option)) continue;
    if (std::find(scope.commands.begin(), scope.commands.end(), command) == scope.commands.end())
      return bad(std::string(scope.option) + " applies to " + std::string(scope.where) + ", not to " +
                 command_name(command));
  }
  return Status::ok();
}

// access and throughput: the cluster comes from --config or is started here.
Status settle_database(Options& o, const Flags& f) {
  if (!o.batch_given) o.batch = o.command == Command::kAccess ? kDefaultAccessBatch : 1;
  if (f.no_compare && o.compare) return bad("--compare and --no-compare cannot be combined");
  o.compare = !f.no_compare;
  const bool from_file = !o.config_path.empty();
  if (!from_file) {
    for (std::string_view option : {"--api-node", "--data-node", "--start-node"})
      if (listed(f.given, option))
        return bad(std::string(option) +
                   " names a node of your --config file; without --config the data node is "
                   "started here with a generated config");
  } else if (!o.transporter.empty()) {
    return bad(
        "--transporter: with --config, the link section between the API node and the data node ([tcp], "
        "[shm], ...) chooses the transporter");
  }
  if (o.command == Command::kAccess && o.rows < o.batch)
    return bad("--rows: " + std::to_string(o.rows) + " is fewer than --batch " + std::to_string(o.batch) +
               " (the index range reads --batch rows in one scan)");
  if (o.command == Command::kThroughput && o.rows < 2) return bad("--rows: throughput needs at least 2 rows");
  if (o.command == Command::kThroughput && !from_file && o.transporter.empty()) o.transporter = "tcp";
  return Status::ok();
}

// Settles the command and rejects combinations that cannot mean anything.
Status settle(Options& o, const Flags& f) {
  if (o.command == Command::kHelp) return Status::ok();
  if (f.peer) {
    o.command = Command::kPeer;
    if (o.peer.config_text.empty() == o.peer.config_path.empty())
      return bad("--x-peer-node needs exactly one of --x-peer-config-text and --x-peer-config-file");
    return Status::ok();
  }
  const bool ping_all_word = f.command_word == "all" || f.command_word == "ping-all";
  if (f.server && f.client) return bad("--server and --client cannot be combined");
  if ((f.server || f.client) && ping_all_word)
    return bad("'" + f.command_word +
               "' runs every transporter on this machine; it cannot be combined with --server or --client");
  if ((f.server || f.client) && (f.command_word == "access" || f.command_word == "throughput"))
    return bad("--server and --client run ping between machines; '" + f.command_word +
               "' runs against a data node (use --config with the node's host)");
  if ((f.server || f.client) && o.compare)
    return bad("--compare measures floors on this machine; it cannot be combined with --server or --client");
  if (f.server && o.stream) return bad("--stream is chosen by the client; the server answers whatever it is sent");
  if (!f.server && o.peer_host != "localhost") return bad("--peer-host only applies to --server");
  if (!o.config_path.empty() && !o.link_params.empty())
    return bad("--link-param adds to the generated link section; with --config, edit the file instead");
  o.command = command_of(o, f);
  if (Status s = check_scopes(o.command, f); !s) return s;

  if (o.command == Command::kPingAll) {
    const std::string word = f.command_word.empty() ? "ping-all" : f.command_word;
    if (!o.transporter.empty())
      return bad("'" + word + "' runs every transporter; --transporter needs the ping command");
    if (!o.config_path.empty()) return bad("'" + word + "' runs every transporter; --config needs the ping command");
    if (o.stream) return bad("'" + word + "' already streams over every transporter; --stream needs the ping command");
  }
  if (o.command == Command::kAccess || o.command == Command::kThroughput) {
    if (Status s = settle_database(o, f); !s) return s;
  } else if (!o.batch_given) {
    o.batch = kDefaultStreamBatch;
  }
  const bool remote = o.command == Command::kServer || o.command == Command::kClient;
  if (remote && o.cpus.size() > 1)
    return bad("--cpus: --server and --client run one process here; give one CPU (e.g. --cpus 1)");
  if (!remote && o.cpus.size() == 1)
    return bad("--cpus: give two CPUs, one for this process and one for its peer (e.g. --cpus 0,1)");
  return Status::ok();
}

}  // namespace

const char* poll_mode_name(PollMode mode) noexcept { return mode == PollMode::kBusy ? "busy" : "sleep"; }

const char* command_name(Command command) noexcept {
  switch (command) {
    case Command::kAccess: return "access";
    case Command::kThroughput: return "throughput";
    case Command::kPingAll: return "ping-all";
    case Command::kPing: return "ping";
    case Command::kServer: return "--server";
    case Command::kClient: return "--client";
    case Command::kPeer: return "the peer process";
    case Command::kHelp: return "--help";
  }
  return "?";
}

Result<Options> parse_options(std::span<const std::string> args, std::span<const std::string> transporters) {
  Options o;
  Flags f;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (Status s = parse_one(args, i, o, f, transporters); !s) return s;
    if (o.command == Command::kHelp) return o;
  }
  if (Status s = settle(o, f); !s) return s;
  return o;
}

uint64_t effective_iterations(const Options& o) {
  if (o.iterations != 0) return o.iterations;
  if (o.command == Command::kAccess) return 10'000;
  const bool all = o.command == Command::kPingAll;
  if (o.stream) return all ? 200'000 : 1'000'000;
  if (o.poll == PollMode::kSleep) return all ? 5'000 : 20'000;
  return all ? 20'000 : 100'000;
}

uint64_t effective_warmup(const Options& o) {
  if (o.warmup != UINT64_MAX) return o.warmup;
  return std::max<uint64_t>(effective_iterations(o) / 10, 100);
}

std::string help_text(std::span<const std::string> transporters) {
  std::string t;
  t += "latency_bench: what each fjord transporter buys. The access-method table of NDB's testReadPerf\n";
  t += "(serial vs batched primary-key, unique-key and index access, microseconds per row) against a data\n";
  t += "node, a flexAsynch-style throughput mode, and ping-pong over the bare transporters beside the floors\n";
  t += "and peer tools measured in the same run. Round trips are RTT unless a line says otherwise.\n\n";
  t += "usage:\n";
  t += "  latency_bench [access] [OPTIONS]        the access-method table over every transporter available\n";
  t += "                                          here, against a data node started here (no arguments:\n";
  t += "                                          " + std::to_string(kDefaultRows) +
       " rows, 3-60 s by the machine); or --config FILE for your cluster\n";
  t += "  latency_bench throughput [OPTIONS]      definer and executor threads keep many transactions in\n";
  t += "                                          flight: transactions/s, rows/s, latency percentiles\n";
  t += "  latency_bench ping [OPTIONS]            ping-pong over one transporter; starts its own peer process\n";
  t += "  latency_bench ping-all [OPTIONS]        ping over every transporter, both poll modes, 4096 B\n";
  t += "                                          streaming, with the floors: one table ('all' works too)\n";
  t += "  latency_bench --server [OPTIONS]        echo side for a ping from another machine (-server)\n";
  t += "  latency_bench --client HOST [OPTIONS]   measuring side against a server on HOST (-client HOST)\n\n";
  t += "Without a command word, --stream, --size or --link-param mean ping; anything else means access.\n\n";
  t += "options of access and throughput:\n";
  t += "  --transporter NAME   measure this transporter only; built in: " + join(transporters) + "\n";
  t += "                       (access default: every one that can run here; throughput default: tcp)\n";
  t += "  --rows N             rows in the table, 1.." + std::to_string(kMaxRows) + " (default " +
       std::to_string(kDefaultRows) + ")\n";
  t += "  --row-bytes B        bytes per row: 24 of keys (id, unique key, ordered key) plus a binary filler,\n";
  t += "                       " + std::to_string(kMinRowBytes) + ".." + std::to_string(kMaxRowBytes) + " (default " +
       std::to_string(kDefaultRowBytes) + ")\n";
  t += "  --batch K            access: rows per batched execute and per index-range scan, 1.." +
       std::to_string(kMaxBatch) + " (default " + std::to_string(kDefaultAccessBatch) + ");\n";
  t += "                       throughput: key operations per transaction (default 1)\n";
  t += "  --config FILE        your cluster's config file (NDB config.ini style): the link section between\n";
  t += "                       the API node and the data node ([tcp], [shm], ...) chooses the transporter;\n";
  t += "                       the data node must be running unless --start-node\n";
  t += "  --api-node N         with --config: this program's [api] node id (default: the first [api]);\n";
  t += "                       throughput executors take it and the [api] sections after it\n";
  t += "  --data-node M        with --config: the [ndbd] node to use (default and only choice: the first)\n";
  t += "  --start-node         with --config: start fjord-datanode for that node here, stop it at the end\n";
  t += "  --no-compare         skip what is otherwise measured beside ours in the same run: redis-server\n";
  t += "                       (GET and MGET of K keys over TCP and a Unix socket; throughput: redis-benchmark\n";
  t += "                       -P 32 GET), the bare TCP ping-pong floor that the targets compare with, and\n";
  t += "                       the cache-line mailbox between the CPUs before and after the shm rows (the\n";
  t += "                       host's state, shown beside the shm targets)\n";
  t += "  --plot FILE          access: write a chart of microseconds per row by access method and\n";
  t += "                       transporter (p50 bars, p99 whiskers, the seed's figures beside them);\n";
  t += "                       FILE ends in .png or .svg; needs gnuplot\n\n";
  t += "options of access:\n";
  t += "  --iterations N       measured samples per access method: executes, or scans (default 10000;\n";
  t += "                       the full scan runs N/2000 times, at least 3)\n";
  t += "  --warmup N           discarded samples first, per method (default a tenth, at least 100)\n\n";
  t += "options of throughput:\n";
  t += "  --duration SECONDS   measured time, 0.05..3600, decimals allowed (default 5), after a discarded\n";
  t += "                       warm-up of a tenth of it\n";
  t += "  --definers N         threads that prepare key operations, 1.." + std::to_string(kMaxDefiners) +
       " (default 1)\n";
  t += "  --executors N        threads that each own one API connection (one API node id) and keep\n";
  t += "                       transactions in flight, 1.." + std::to_string(kMaxExecutors) + " (default 1)\n";
  t += "  --in-flight N        transactions in flight per executor, 1.." + std::to_string(kMaxInFlight) +
       " (default 64)\n";
  t += "  --mix R/U            percent reads and updates, adding up to 100 (default 100/0)\n";
  t += "  --rate N             open loop at N operations per second in total (200k, 1.5M, 200k/s): each\n";
  t += "                       operation is timed from its scheduled send time, so queueing shows in the\n";
  t += "                       latency (no coordinated omission). Default: closed loop, as fast as it goes\n\n";
  t += "options of ping:\n";
  t += "  --transporter NAME   transporter of the link (default tcp)\n";
  t += "  --config FILE        take the link from FILE; the section name ([tcp], [shm], ...) chooses the\n";
  t += "                       transporter; its NodeIdServer side runs here\n";
  t += "  --link-param K=V     add K=V to the generated link section (repeatable), e.g. Checksum=1\n";
  t += "  --size BYTES         payload per message, 0.." + std::to_string(max_payload_bytes(false)) +
       " (K suffix allowed; default 64;\n";
  t += "                       frames add a 40-byte header)\n";
  t += "  --iterations N       measured round trips (default 100000 busy, 20000 sleep; ping-all: 20000/5000),\n";
  t += "                       or messages with --stream (default 1000000; ping-all: 200000)\n";
  t += "  --warmup N           discarded round trips/messages first (default a tenth, at least 100)\n";
  t += "  --stream             one side sends as fast as the link accepts, the peer receives, copies\n";
  t += "                       each payload out and checks the counts: messages/s and GB/s\n";
  t += "  --batch N            --stream: frames packed per flush, 1.." + std::to_string(kMaxBatch) + " (default " +
       std::to_string(kDefaultStreamBatch) + ")\n";
  t += "  --compare            also measure, in this run: a cache-line mailbox between two processes,\n";
  t += "                       a bare TCP ping-pong, sockperf, ucx_perftest (posix, tcp) and, with\n";
  t += "                       --stream, one core's memcpy; print ratios and the issue's targets\n";
  t += "  --port PORT          --server/--client: the port the server listens on (default " +
       std::to_string(kDefaultPort) + ")\n";
  t += "  --peer-host HOST     --server: the client's host, which the link admits (default localhost)\n\n";
  t += "options of every command:\n";
  t += "  --poll busy|sleep    busy: spin on receive; sleep: block on the transporter's wake-up\n";
  t += "                       (poll/futex). Default busy; ping-all runs both unless given\n";
  t += "  --cpus A,B           pin this program to CPU A and its peer (the data node started here, or the\n";
  t += "                       ping peer) to CPU B (default: the first two CPUs this process may use);\n";
  t += "                       --server/--client take one CPU\n";
  t += "  --json               print one JSON object instead of the table\n";
  t += "  --timeout SECONDS    give up when a peer or the data node does not connect or answer (default 10)\n";
  t += "  --verbose            transporter and API log lines on stderr\n";
  t += "  -h, --help           this text\n\n";
  t += "examples:\n";
  t += "  latency_bench                                          the access table, tcp and shm, seed beside it\n";
  t += "  latency_bench access --transporter shm --rows 1000000 --row-bytes 100 --json\n";
  t += "  latency_bench access --plot access.svg --no-compare\n";
  t += "  latency_bench access --config cluster.ini --api-node 50 --start-node\n";
  t += "                       (change the [tcp] section between nodes 1 and 50 to [shm] to switch medium)\n";
  t += "  latency_bench throughput --transporter shm --executors 2 --in-flight 128 --duration 10\n";
  t += "  latency_bench throughput --transporter tcp --rate 100k --mix 90/10\n";
  t += "  latency_bench ping --transporter shm --size 64 --iterations 200000 --poll busy --cpus 0,1\n";
  t += "  latency_bench ping --transporter shm --size 4096 --stream --compare --json\n";
  t += "  latency_bench -server --peer-host client.example   and   latency_bench -client server.example\n\n";
  t += "The data node started here is build/tools/fjord-datanode next to this program (or FJORD_DATANODE,\n";
  t += "or fjord-datanode in PATH), single-threaded and spinning, with its config and log in a temporary\n";
  t += "directory that is removed afterwards. A progress line appears on stderr when it is a terminal.\n";
  t += "Exit status: 0 done, 1 a run failed, 2 bad options. Options starting --x-peer- are internal (the\n";
  t += "program starts its own peer with them).\n";
  return t;
}

}  // namespace fjord::bench
