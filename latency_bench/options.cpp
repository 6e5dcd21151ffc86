#include "options.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "fjord/base/assert.h"
#include "fjord/transport/config_file.h"
#include "option_table.h"
#include "wire.h"

namespace fjord::bench {
namespace {

Status bad(std::string message) { return Status(StatusCode::kInvalidArgument, std::move(message)); }

constexpr std::string_view kCommandWords[] = {"access", "throughput", "ping", "ping-all", "all"};

bool listed(std::span<const std::string_view> names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The value of `spec` at args[i] ("--rows=5") or args[i + 1] ("--rows 5"),
// checked against its range when it is a plain number.
Result<OptionValue> value_of(const OptionSpec& spec, std::span<const std::string> args, std::size_t& i) {
  const std::string_view arg = args[i];
  const std::size_t eq = arg.find('=');
  OptionValue value;
  if (spec.value_name.empty()) {
    if (eq != std::string_view::npos) return bad("option " + std::string(spec.name) + " takes no value");
    return value;
  }
  if (eq != std::string_view::npos)
    value.text = arg.substr(eq + 1);
  else if (i + 1 < args.size())
    value.text = args[++i];
  else
    return bad("option " + std::string(spec.name) + " needs a value");
  if (spec.what.empty()) return value;
  auto number = config::parse_uint(value.text);
  if (!number || *number < spec.min || *number > spec.max)
    return bad(std::string(spec.name) + ": '" + std::string(value.text) + "' is not " + accepts_text(spec));
  value.number = *number;
  return value;
}

// One argument: a command word, or an option and its value.
Status parse_one(std::span<const std::string> args, std::size_t& i, ParseState& state) {
  const std::string_view arg = args[i];
  if (arg.empty() || arg[0] != '-') {
    if (!state.command_word.empty() || !listed(kCommandWords, arg))
      return bad("unexpected argument '" + std::string(arg) + "' (commands: access, throughput, ping, ping-all)");
    state.command_word = arg;
    return Status::ok();
  }
  const std::string_view spelling = arg.substr(0, arg.find('='));
  const OptionSpec* spec = find_option(spelling);
  if (spec == nullptr) return bad("unknown option '" + std::string(spelling) + "'");
  auto value = value_of(*spec, args, i);
  if (!value) return value.status();
  state.given.push_back(spec->name);
  return spec->apply(*spec, *value, state);
}

// The command from the word, the mode flags and (without a word) the options
// that only ping has; access is the default.
Command command_of(const Options& o, const ParseState& f) {
  if (f.server) return Command::kServer;
  if (f.client) return Command::kClient;
  if (f.command_word == "ping") return Command::kPing;
  if (f.command_word == "ping-all" || f.command_word == "all") return Command::kPingAll;
  if (f.command_word == "throughput") return Command::kThroughput;
  if (f.command_word == "access") return Command::kAccess;
  if (o.stream || o.size_given || !o.link_params.empty()) return Command::kPing;
  return Command::kAccess;
}

// The command whose help `latency_bench WORD --help` asks for; kHelp: all.
Command help_topic(std::string_view command_word) {
  if (command_word == "access") return Command::kAccess;
  if (command_word == "throughput") return Command::kThroughput;
  if (command_word == "ping") return Command::kPing;
  if (command_word == "ping-all" || command_word == "all") return Command::kPingAll;
  return Command::kHelp;
}

// Each option given must apply to the command (its descriptor's commands).
Status check_scopes(Command command, std::span<const std::string_view> given) {
  for (std::string_view name : given) {
    const OptionSpec* spec = find_option(name);
    FJORD_ASSERT(spec != nullptr);
    if ((spec->commands & command_bit(command)) == 0)
      return bad(std::string(name) + " applies to " + scope_text(*spec) + ", not to " + command_name(command));
  }
  return Status::ok();
}

// access and throughput: the cluster comes from --config or is started here.
Status settle_database(Options& o, const ParseState& f) {
  if (!o.batch_given) o.batch = o.command == Command::kAccess ? kDefaultAccessBatch : kDefaultThroughputBatch;
  if (f.no_compare && o.compare) return bad("--compare and --no-compare cannot be combined");
  o.compare = !f.no_compare;
  const bool from_file = !o.config_path.empty();
  if (!from_file) {
    for (std::string_view option : f.given)
      if (find_option(option)->needs_config)
        return bad(std::string(option) +
                   " names a node of your --config file; without --config the data node is "
                   "started here with a generated config");
  } else if (!o.transporter.empty()) {
    return bad(
        "--transporter: with --config, the link section between the API node and the data node ([tcp], "
        "[shm], ...) chooses the transporter");
  } else if (!o.sweep_param.empty() || !o.node_params.empty()) {
    return bad(std::string(o.sweep_param.empty() ? "--node-param" : "--sweep") +
               ": changes the data node's generated config; with --config, change your file instead");
  }
  const bool over_given = std::find(f.given.begin(), f.given.end(), "--over") != f.given.end();
  if (over_given && o.sweep_param.empty()) return bad("--over: only with --sweep (the share it reports)");
  if (o.command == Command::kAccess && o.rows < o.batch)
    return bad("--rows: " + std::to_string(o.rows) + " is fewer than --batch " + std::to_string(o.batch) +
               " (the index range reads --batch rows in one scan)");
  if (o.command == Command::kThroughput && o.rows < 2) return bad("--rows: throughput needs at least 2 rows");
  if (o.command == Command::kThroughput && !from_file && o.transporter.empty()) o.transporter = "tcp";
  return Status::ok();
}

// Settles the command and rejects combinations that cannot mean anything.
Status settle(ParseState& f) {
  Options& o = f.options;
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
  if (Status s = check_scopes(o.command, f.given); !s) return s;
  if (o.transporter == kTcpTls && o.command != Command::kAccess && o.command != Command::kThroughput)
    return bad(
        "--transporter tcp-tls is a column of access and throughput; ping takes TLS as --link-param "
        "RequireTls=1 --link-param TlsSearchPath=DIR (DIR holding cluster-ca.crt and both ends' "
        "node-<id>.crt and node-<id>.key)");

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
  ParseState state;
  state.transporters = transporters;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (Status s = parse_one(args, i, state); !s) return s;
    if (state.options.command == Command::kHelp) {
      state.options.help_for = help_topic(state.command_word);
      return std::move(state.options);
    }
  }
  if (Status s = settle(state); !s) return s;
  return std::move(state.options);
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

namespace {

constexpr std::size_t kHelpWidth = 104;      // columns --help wraps at
constexpr std::size_t kHelpTextColumn = 23;  // where an option's description starts

struct HelpSectionTitle {
  HelpSection section;
  std::string_view title;
  CommandSet commands;  // whose per-command --help shows it
};
constexpr HelpSectionTitle kHelpSections[] = {
    {HelpSection::kDatabase, "options of access and throughput", command_set({Command::kAccess, Command::kThroughput})},
    {HelpSection::kAccess, "options of access", command_bit(Command::kAccess)},
    {HelpSection::kThroughput, "options of throughput", command_bit(Command::kThroughput)},
    {HelpSection::kPing, "options of ping",
     command_set({Command::kPing, Command::kPingAll, Command::kServer, Command::kClient})},
    {HelpSection::kEvery, "options of every command", kEveryCommand},
};

// `text` with every `mark` replaced by `with`.
std::string replaced(std::string text, std::string_view mark, const std::string& with) {
  for (std::size_t at = text.find(mark); at != std::string::npos; at = text.find(mark, at + with.size()))
    text.replace(at, mark.size(), with);
  return text;
}

// Appends `head` and then `text` word-wrapped to kHelpWidth, every line of
// text starting at kHelpTextColumn.
void append_wrapped(std::string& out, std::string head, std::string_view text) {
  std::string line = std::move(head);
  if (line.size() + 1 > kHelpTextColumn) {
    out += line + "\n";
    line.clear();
  }
  line.resize(kHelpTextColumn, ' ');
  std::size_t words = 0;
  while (!text.empty()) {
    const std::size_t space = text.find(' ');
    const std::string_view word = text.substr(0, space);
    text = space == std::string_view::npos ? std::string_view() : text.substr(space + 1);
    if (words > 0 && line.size() + 1 + word.size() > kHelpWidth) {
      out += line + "\n";
      line.assign(kHelpTextColumn, ' ');
      words = 0;
    }
    line += (words++ > 0 ? " " : "") + std::string(word);
  }
  out += line + "\n";
}

// One option's lines in one section: what it does, what it accepts, its default.
void append_option_help(std::string& out, const OptionSpec& spec, const OptionHelp& help,
                        std::span<const std::string> transporters) {
  std::string built_in;
  for (const std::string& name : transporters) built_in += (built_in.empty() ? "" : ", ") + name;
  std::string text = replaced(std::string(help.text), "{built_in}", built_in.empty() ? "none" : built_in);
  text = replaced(std::move(text), "{max_payload}", std::to_string(max_payload_bytes(false)));
  if (const std::string accepts = accepts_text(spec); !accepts.empty()) text += ": " + accepts;
  if (!help.default_text.empty()) text += "; default " + std::string(help.default_text);
  std::string head = "  ";
  if (spec.alias.size() == 2) head += std::string(spec.alias) + ", ";
  head += spec.name;
  if (!spec.value_name.empty()) head += " " + std::string(spec.value_name);
  append_wrapped(out, std::move(head), text);
}

// The sections of the option table that `command` reads, in order.
std::string options_help(std::span<const std::string> transporters, Command command) {
  std::string out;
  for (const auto& [section, title, commands] : kHelpSections) {
    if (command != Command::kHelp && (commands & command_bit(command)) == 0) continue;
    out += std::string(title) + ":\n";
    for (const OptionSpec& spec : option_table())
      for (const OptionHelp& help : spec.help)
        if (help.section == section) append_option_help(out, spec, help, transporters);
    out += "\n";
  }
  return out;
}

std::string usage_help() {
  std::string t;
  t += "latency_bench: what each fjord transporter buys. The access-method table of NDB's testReadPerf\n";
  t += "(serial vs batched primary-key, unique-key and index access, microseconds per row) against a data\n";
  t += "node, a flexAsynch-style throughput mode, and ping-pong over the bare transporters beside the floors\n";
  t += "and peer tools measured in the same run. Round trips are RTT unless a line says otherwise.\n\n";
  t += "usage:\n";
  t += "  latency_bench [access] [OPTIONS]        the access-method table over every transporter available\n";
  t += "                                          here, against a data node started here (no arguments:\n";
  t += "                                          " + std::to_string(kDefaultRows) +
       " rows, 3-60 s by the machine); or --config FILE\n";
  t += "                                          for your cluster\n";
  t += "  latency_bench throughput [OPTIONS]      definer and executor threads keep many transactions in\n";
  t += "                                          flight: transactions/s, rows/s, latency percentiles\n";
  t += "  latency_bench ping [OPTIONS]            ping-pong over one transporter; starts its own peer process\n";
  t += "  latency_bench ping-all [OPTIONS]        ping over every transporter, both poll modes, 4096 B\n";
  t += "                                          streaming, with the floors: one table ('all' works too)\n";
  t += "  latency_bench --server [OPTIONS]        echo side for a ping from another machine (-server)\n";
  t += "  latency_bench --client HOST [OPTIONS]   measuring side against a server on HOST (-client HOST)\n\n";
  t += "Without a command word, --stream, --size or --link-param mean ping; anything else means access.\n";
  t += "'latency_bench COMMAND --help' lists only the options that COMMAND reads.\n\n";
  return t;
}

std::string examples_help() {
  std::string t;
  t += "examples:\n";
  t += "  latency_bench                          the access table over tcp and shm, NDB 2004's figures beside it\n";
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

}  // namespace

std::string help_text(std::span<const std::string> transporters, Command command) {
  return usage_help() + options_help(transporters, command) + examples_help();
}

}  // namespace fjord::bench
