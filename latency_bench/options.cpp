#include "options.h"

#include <algorithm>
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

struct Flags {
  bool server = false;
  bool client = false;
  bool peer = false;
  std::string command_word;
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
  } else if (name == "--port") {
    o.port = static_cast<uint16_t>(*v);
  } else if (name == "--timeout") {
    o.timeout_s = *v;
  } else if (name == "--x-peer-node") {
    o.peer.node = static_cast<NodeId>(*v);
    f.peer = true;
  } else {
    o.peer.port = static_cast<uint16_t>(*v);
  }
  return Status::ok();
}

// Applies one option that takes a value (a name from kValued).
Status apply_valued(std::string_view name, std::string_view value, Options& o, Flags& f,
                    std::span<const std::string> transporters) {
  if (Status s = apply_number(name, value, o, f); s.code() != StatusCode::kNotFound) return s;
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

constexpr std::string_view kFlags[] = {"--json", "--compare", "--stream", "--verbose", "--server", "--help"};
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
    "--x-peer-node",
    "--x-peer-port",
    "--x-peer-config-text",
    "--x-peer-config-file",
    "--x-peer-link-type",
};

bool listed(std::span<const std::string_view> names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

Status parse_one(std::span<const std::string> args, std::size_t& i, Options& o, Flags& f,
                 std::span<const std::string> transporters) {
  const std::string_view arg = args[i];
  if (arg.empty() || arg[0] != '-') {
    if (!f.command_word.empty() || (arg != "ping" && arg != "all"))
      return bad("unexpected argument '" + std::string(arg) + "' (commands: ping, all)");
    f.command_word = arg;
    return Status::ok();
  }
  const std::size_t eq = arg.find('=');
  const std::string_view name = canonical(arg.substr(0, eq));
  if (listed(kFlags, name)) {
    if (eq != std::string_view::npos) return bad("option " + std::string(name) + " takes no value");
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
  return apply_valued(name, value, o, f, transporters);
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
  if (f.server && f.client) return bad("--server and --client cannot be combined");
  if ((f.server || f.client) && f.command_word == "all")
    return bad("'all' runs every transporter on this machine; it cannot be combined with --server or --client");
  if ((f.server || f.client) && o.compare)
    return bad("--compare measures floors on this machine; it cannot be combined with --server or --client");
  if (f.server && o.stream) return bad("--stream is chosen by the client; the server answers whatever it is sent");
  if (!f.server && o.peer_host != "localhost") return bad("--peer-host only applies to --server");
  if (!o.config_path.empty() && !o.link_params.empty())
    return bad("--link-param adds to the generated link section; with --config, edit the file instead");
  if (f.server)
    o.command = Command::kServer;
  else if (f.client)
    o.command = Command::kClient;
  else if (f.command_word == "ping" ||
           (f.command_word.empty() && (!o.transporter.empty() || !o.config_path.empty() || o.stream)))
    o.command = Command::kPing;
  else
    o.command = Command::kAll;

  if (o.command == Command::kAll) {
    if (!o.transporter.empty()) return bad("'all' runs every transporter; --transporter needs the ping command");
    if (!o.config_path.empty()) return bad("'all' runs every transporter; --config needs the ping command");
    if (o.stream) return bad("'all' already streams over every transporter; --stream needs the ping command");
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
  const bool all = o.command == Command::kAll;
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
  t += "latency_bench: ping-pong and streaming over fjord's transporters, beside the floors and peer tools\n";
  t += "measured in the same run. Times are round trips (RTT) unless a line says otherwise.\n\n";
  t += "usage:\n";
  t += "  latency_bench [all] [OPTIONS]            every transporter built in, both poll modes, ping and\n";
  t += "                                           4096 B streaming, with the floors: one table (< 1 minute)\n";
  t += "  latency_bench ping [OPTIONS]             one transporter; starts its own peer process\n";
  t += "  latency_bench --server [OPTIONS]         echo side for a run from another machine (-server)\n";
  t += "  latency_bench --client HOST [OPTIONS]    measuring side against a server on HOST (-client HOST)\n\n";
  t += "options:\n";
  t += "  --transporter NAME   transporter of the link; built in: " + join(transporters) + " (default tcp)\n";
  t += "  --config FILE        take the link from FILE (NDB config.ini style); the section name ([tcp],\n";
  t += "                       [shm], ...) chooses the transporter; its NodeIdServer side runs here\n";
  t += "  --link-param K=V     add K=V to the generated link section (repeatable), e.g. Checksum=1\n";
  t += "  --size BYTES         payload per message, 0.." + std::to_string(max_payload_bytes(false)) +
       " (K suffix allowed; default 64;\n";
  t += "                       frames add a 40-byte header)\n";
  t += "  --iterations N       measured round trips (default 100000 busy, 20000 sleep; all: 20000/5000),\n";
  t += "                       or messages with --stream (default 1000000; all: 200000)\n";
  t += "  --warmup N           discarded round trips/messages first (default a tenth, at least 100)\n";
  t += "  --poll busy|sleep    busy: both sides spin on receive; sleep: they block on the transporter's\n";
  t += "                       wake-up (poll/futex). Default busy; 'all' runs both unless given\n";
  t += "  --cpus A,B           pin this process to CPU A and the peer to CPU B (default: the first two\n";
  t += "                       CPUs this process may use); --server/--client take one CPU\n";
  t += "  --stream             one side sends as fast as the link accepts, the peer receives, copies\n";
  t += "                       each payload out and checks the counts: messages/s and GB/s\n";
  t += "  --batch N            --stream: frames packed per flush, 1.." + std::to_string(kMaxBatch) + " (default 32)\n";
  t += "  --compare            also measure, in this run: a cache-line mailbox between two processes,\n";
  t += "                       a bare TCP ping-pong, sockperf, ucx_perftest (posix, tcp) and, with\n";
  t += "                       --stream, one core's memcpy; print ratios and the issue's targets\n";
  t += "  --json               print one JSON object instead of the table\n";
  t += "  --port PORT          --server/--client: the port the server listens on (default " +
       std::to_string(kDefaultPort) + ")\n";
  t += "  --peer-host HOST     --server: the client's host, which the link admits (default localhost)\n";
  t += "  --timeout SECONDS    give up when the peer does not connect or answer (default 10)\n";
  t += "  --verbose            transporter log lines on stderr\n";
  t += "  -h, --help           this text\n\n";
  t += "examples:\n";
  t += "  latency_bench ping --transporter shm --size 64 --iterations 200000 --poll busy --cpus 0,1\n";
  t += "  latency_bench ping --transporter shm --size 4096 --stream --compare --json\n";
  t += "  latency_bench ping --config cluster.ini        (swap [tcp] for [shm] there to switch medium)\n";
  t += "  latency_bench -server --peer-host client.example   and   latency_bench -client server.example\n\n";
  t += "A progress line appears on stderr when it is a terminal. Exit status: 0 done, 1 a run failed,\n";
  t += "2 bad options. Options starting --x-peer- are internal (the program starts its own peer with them).\n";
  return t;
}

}  // namespace fjord::bench
