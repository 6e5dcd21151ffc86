// latency_bench option parsing: what each command line means, and the exact
// message for each mistake (users read these; scripts may match them).
#include "options.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "option_table.h"

namespace fjord::bench {
namespace {

const std::vector<std::string> kBuiltIn = {"tcp", "shm"};

Result<Options> parse(std::vector<std::string> args) { return parse_options(args, kBuiltIn); }

std::string error_of(std::vector<std::string> args) {
  auto o = parse(std::move(args));
  EXPECT_FALSE(o.is_ok());
  if (o.is_ok()) return "(parsed)";
  EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument);
  return o.status().message();
}

TEST(LatencyBenchOptions, NoArgumentsRunsTheAccessTableWithNdbsDefaults) {
  auto o = parse({});
  ASSERT_TRUE(o);
  EXPECT_EQ(o->command, Command::kAccess);
  EXPECT_TRUE(o->transporter.empty()) << "every transporter that can run";
  EXPECT_TRUE(o->config_path.empty()) << "a data node started here";
  EXPECT_EQ(o->rows, 100'000u);
  EXPECT_EQ(o->row_bytes, 100u);
  EXPECT_EQ(o->batch, 20u);
  EXPECT_EQ(effective_iterations(*o), 10'000u);
  EXPECT_EQ(effective_warmup(*o), 1'000u);
  EXPECT_FALSE(o->poll_given);
}

TEST(LatencyBenchOptions, ThePingTableIsPingAll) {
  for (const char* word : {"ping-all", "all"}) {
    auto o = parse({word});
    ASSERT_TRUE(o) << word;
    EXPECT_EQ(o->command, Command::kPingAll);
    EXPECT_EQ(o->size_bytes, 64u);
    EXPECT_EQ(o->batch, 32u);
    EXPECT_EQ(effective_iterations(*o), 20'000u);
  }
}

TEST(LatencyBenchOptions, AccessWithEveryOption) {
  auto o = parse({"access", "--transporter", "shm",       "--rows",   "5000",    "--row-bytes", "200",   "--batch",
                  "10",     "--iterations",  "300",       "--warmup", "30",      "--poll",      "sleep", "--cpus",
                  "1,0",    "--json",        "--compare", "--plot",   "out.svg", "--timeout",   "3"});
  ASSERT_TRUE(o) << o.status().to_string();
  EXPECT_EQ(o->command, Command::kAccess);
  EXPECT_EQ(o->transporter, "shm");
  EXPECT_EQ(o->rows, 5000u);
  EXPECT_EQ(o->row_bytes, 200u);
  EXPECT_EQ(o->batch, 10u);
  EXPECT_EQ(effective_iterations(*o), 300u);
  EXPECT_EQ(effective_warmup(*o), 30u);
  EXPECT_EQ(o->poll, PollMode::kSleep);
  EXPECT_EQ(o->plot_path, "out.svg");
  EXPECT_TRUE(o->compare);
  auto quiet = parse({"access", "--no-compare"});
  ASSERT_TRUE(quiet);
  EXPECT_FALSE(quiet->compare);
  EXPECT_TRUE(parse({})->compare) << "the default run measures redis and the TCP floor beside ours";
  EXPECT_FALSE(parse({"ping"})->compare) << "ping compares only when asked";
  EXPECT_EQ(error_of({"--compare", "--no-compare"}), "--compare and --no-compare cannot be combined");
  EXPECT_EQ(error_of({"ping", "--no-compare"}), "--no-compare applies to access and throughput, not to ping");
}

TEST(LatencyBenchOptions, AccessAgainstYourConfig) {
  auto o = parse({"--config", "cluster.ini", "--api-node", "50", "--data-node", "1", "--start-node", "--rows=2000"});
  ASSERT_TRUE(o) << o.status().to_string();
  EXPECT_EQ(o->command, Command::kAccess) << "--config without a ping option means the access table";
  EXPECT_EQ(o->config_path, "cluster.ini");
  EXPECT_EQ(o->api_node, 50);
  EXPECT_EQ(o->data_node, 1);
  EXPECT_TRUE(o->start_node);
  EXPECT_EQ(o->rows, 2000u);
}

TEST(LatencyBenchOptions, ThroughputWithEveryOption) {
  auto o = parse({"throughput", "--transporter", "shm", "--duration", "0.25", "--definers", "2", "--executors", "3",
                  "--in-flight", "128", "--mix", "90/10", "--rate", "1.5M/s", "--batch", "4", "--rows", "1000"});
  ASSERT_TRUE(o) << o.status().to_string();
  EXPECT_EQ(o->command, Command::kThroughput);
  EXPECT_EQ(o->duration_ms, 250u);
  EXPECT_EQ(o->definers, 2u);
  EXPECT_EQ(o->executors, 3u);
  EXPECT_EQ(o->in_flight, 128u);
  EXPECT_EQ(o->read_percent, 90u);
  EXPECT_EQ(o->rate_per_s, 1'500'000u);
  EXPECT_EQ(o->batch, 4u);
  EXPECT_EQ(o->rows, 1000u);
}

TEST(LatencyBenchOptions, ThroughputDefaults) {
  auto o = parse({"throughput"});
  ASSERT_TRUE(o);
  EXPECT_EQ(o->transporter, "tcp");
  EXPECT_EQ(o->duration_ms, 5000u);
  EXPECT_EQ(o->definers, 1u);
  EXPECT_EQ(o->executors, 1u);
  EXPECT_EQ(o->in_flight, 64u);
  EXPECT_EQ(o->batch, 1u);
  EXPECT_EQ(o->read_percent, 100u);
  EXPECT_EQ(o->rate_per_s, 0u) << "closed loop";
  for (const char* rate : {"200000", "200k", "200K", "200k/s", "0.2M"}) {
    auto r = parse({"throughput", "--rate", rate});
    ASSERT_TRUE(r) << rate;
    EXPECT_EQ(r->rate_per_s, 200'000u) << rate;
  }
}

TEST(LatencyBenchOptions, BadAccessAndThroughputValuesNameTheOption) {
  EXPECT_EQ(error_of({"--rows", "0"}), "--rows: '0' is not a number from 1 to 100000000");
  EXPECT_EQ(error_of({"--row-bytes", "16"}), "--row-bytes: '16' is not a row size in bytes from 32 to 8024");
  EXPECT_EQ(error_of({"--api-node", "300", "--config", "c.ini"}), "--api-node: '300' is not a node id from 1 to 255");
  EXPECT_EQ(error_of({"--plot", "chart.pdf"}), "--plot: 'chart.pdf' must end in .png or .svg");
  EXPECT_EQ(error_of({"throughput", "--duration", "0"}),
            "--duration: '0' is not a number of seconds from 0.05 to 3600 (decimals allowed, e.g. 0.5)");
  EXPECT_EQ(error_of({"throughput", "--duration", "1s"}),
            "--duration: '1s' is not a number of seconds from 0.05 to 3600 (decimals allowed, e.g. 0.5)");
  EXPECT_EQ(error_of({"throughput", "--rate", "fast"}),
            "--rate: 'fast' is not a rate per second from 1 to 100000000 (examples: 50000, 200k, 1.5M, 200k/s)");
  EXPECT_EQ(error_of({"throughput", "--rate", "0"}),
            "--rate: '0' is not a rate per second from 1 to 100000000 (examples: 50000, 200k, 1.5M, 200k/s)");
  EXPECT_EQ(error_of({"throughput", "--mix", "90/20"}),
            "--mix: '90/20' is not READ/UPDATE percentages adding up to 100 (examples: 100/0, 90/10, 50/50)");
  EXPECT_EQ(error_of({"throughput", "--mix", "90"}),
            "--mix: '90' is not READ/UPDATE percentages adding up to 100 (examples: 100/0, 90/10, 50/50)");
  EXPECT_EQ(error_of({"throughput", "--executors", "9"}), "--executors: '9' is not a number from 1 to 8");
  EXPECT_EQ(error_of({"throughput", "--definers", "0"}), "--definers: '0' is not a number from 1 to 16");
  EXPECT_EQ(error_of({"throughput", "--in-flight", "2000"}), "--in-flight: '2000' is not a number from 1 to 1024");
}

TEST(LatencyBenchOptions, OptionsOfOneCommandAreRefusedByTheOthers) {
  EXPECT_EQ(error_of({"ping", "--rows", "10"}), "--rows applies to access and throughput, not to ping");
  EXPECT_EQ(error_of({"ping-all", "--plot", "a.png"}), "--plot applies to access, not to ping-all");
  EXPECT_EQ(error_of({"--rate", "10k"}), "--rate applies to throughput, not to access");
  EXPECT_EQ(error_of({"access", "--duration", "1"}), "--duration applies to throughput, not to access");
  EXPECT_EQ(error_of({"throughput", "--plot", "a.svg"}), "--plot applies to access, not to throughput");
  EXPECT_EQ(error_of({"throughput", "--iterations", "5"}),
            "--iterations applies to access and ping (throughput runs for --duration), not to throughput");
  EXPECT_EQ(error_of({"access", "--stream"}), "--stream applies to ping, not to access");
  EXPECT_EQ(error_of({"access", "--size", "64"}), "--size applies to ping, not to access");
  EXPECT_EQ(error_of({"-client", "h", "--rows", "5"}), "--rows applies to access and throughput, not to --client");
  EXPECT_EQ(error_of({"--api-node", "50"}),
            "--api-node names a node of your --config file; without --config the data node is started here with a "
            "generated config");
  EXPECT_EQ(error_of({"--config", "c.ini", "--transporter", "shm"}),
            "--transporter: with --config, the link section between the API node and the data node ([tcp], [shm], "
            "...) chooses the transporter");
  EXPECT_EQ(error_of({"--rows", "10"}),
            "--rows: 10 is fewer than --batch 20 (the index range reads --batch rows in one scan)");
  EXPECT_EQ(error_of({"access", "-server"}),
            "--server and --client run ping between machines; 'access' runs against a data node (use --config with "
            "the node's host)");
  EXPECT_EQ(error_of({"access", "--cpus", "1"}),
            "--cpus: give two CPUs, one for this process and one for its peer (e.g. --cpus 0,1)");
}

TEST(LatencyBenchOptions, PingWithEveryOption) {
  auto o = parse({"ping", "--transporter", "shm", "--size", "4K", "--iterations", "500", "--warmup", "7", "--poll",
                  "sleep", "--cpus", "1,0", "--json", "--compare", "--batch", "8", "--timeout", "3"});
  ASSERT_TRUE(o) << o.status().to_string();
  EXPECT_EQ(o->command, Command::kPing);
  EXPECT_EQ(o->transporter, "shm");
  EXPECT_EQ(o->size_bytes, 4096u);
  EXPECT_EQ(effective_iterations(*o), 500u);
  EXPECT_EQ(effective_warmup(*o), 7u);
  EXPECT_EQ(o->poll, PollMode::kSleep);
  EXPECT_EQ(o->cpus, (std::vector<int>{1, 0}));
  EXPECT_TRUE(o->json);
  EXPECT_TRUE(o->compare);
  EXPECT_EQ(o->batch, 8u);
  EXPECT_EQ(o->timeout_s, 3u);
}

TEST(LatencyBenchOptions, EqualsFormAndImpliedPing) {
  auto o = parse({"--transporter=tcp", "--size=0", "--stream"});
  ASSERT_TRUE(o) << o.status().to_string();
  EXPECT_EQ(o->command, Command::kPing);
  EXPECT_EQ(o->size_bytes, 0u);
  EXPECT_TRUE(o->stream);
  EXPECT_EQ(effective_iterations(*o), 1'000'000u);
  EXPECT_EQ(effective_warmup(*o), 100'000u);
}

TEST(LatencyBenchOptions, DefaultIterationsFollowTheMode) {
  auto sleep = parse({"ping", "--poll", "sleep"});
  ASSERT_TRUE(sleep);
  EXPECT_EQ(effective_iterations(*sleep), 20'000u);
  EXPECT_EQ(effective_warmup(*sleep), 2'000u);
  auto busy = parse({"ping"});
  ASSERT_TRUE(busy);
  EXPECT_EQ(effective_iterations(*busy), 100'000u);
  auto tiny = parse({"ping", "--iterations", "10"});
  ASSERT_TRUE(tiny);
  EXPECT_EQ(effective_warmup(*tiny), 100u);  // at least 100
}

TEST(LatencyBenchOptions, DolphinStyleServerAndClient) {
  auto server = parse({"-server", "--port", "12000", "--peer-host", "10.0.0.2"});
  ASSERT_TRUE(server) << server.status().to_string();
  EXPECT_EQ(server->command, Command::kServer);
  EXPECT_EQ(server->port, 12000);
  EXPECT_EQ(server->peer_host, "10.0.0.2");
  auto client = parse({"-client", "db1.example", "--transporter", "tcp", "--cpus", "1"});
  ASSERT_TRUE(client) << client.status().to_string();
  EXPECT_EQ(client->command, Command::kClient);
  EXPECT_EQ(client->host, "db1.example");
  EXPECT_EQ(client->port, kDefaultPort);
  auto long_form = parse({"ping", "--client", "localhost"});
  ASSERT_TRUE(long_form);
  EXPECT_EQ(long_form->command, Command::kClient);
}

// --host: the server's own address (every address when not given) and the
// client's source; meaningless for local runs.
TEST(LatencyBenchOptions, HostNamesThisSidesOwnAddress) {
  auto server = parse({"-server", "--host", "10.88.0.1", "--transporter", "tcp"});
  ASSERT_TRUE(server) << server.status().to_string();
  EXPECT_EQ(server->own_host, "10.88.0.1");
  auto client = parse({"-client", "10.88.0.1", "--host", "10.88.0.2"});
  ASSERT_TRUE(client) << client.status().to_string();
  EXPECT_EQ(client->host, "10.88.0.1");
  EXPECT_EQ(client->own_host, "10.88.0.2");
  auto plain = parse({"-server"});
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->own_host, "");
  auto local = parse({"ping", "--host", "10.88.0.1"});
  ASSERT_FALSE(local);
  EXPECT_NE(local.status().message().find("--host applies to"), std::string::npos) << local.status().message();
}

TEST(LatencyBenchOptions, HelpWinsAndListsEveryOption) {
  auto o = parse({"--size", "64", "-h", "--bogus"});
  ASSERT_TRUE(o);
  EXPECT_EQ(o->command, Command::kHelp);
  const std::string help = help_text(kBuiltIn);
  for (const char* option : {"--transporter",      "--config",       "--link-param", "--size",      "--iterations",
                             "--warmup",           "--poll",         "--cpus",       "--stream",    "--batch",
                             "--compare",          "--json",         "--port",       "--peer-host", "--host",
                             "--timeout",          "--verbose",      "--help",       "-server",     "-client",
                             "built in: tcp, shm", "--rows",         "--row-bytes",  "--api-node",  "--data-node",
                             "--start-node",       "--plot",         "--duration",   "--definers",  "--executors",
                             "--in-flight",        "--mix",          "--rate",       "access",      "throughput",
                             "ping-all",           "FJORD_DATANODE", "--no-compare"})
    EXPECT_NE(help.find(option), std::string::npos) << option;
}

TEST(LatencyBenchOptions, HiddenPeerOptions) {
  auto o = parse({"--x-peer-node", "2", "--x-peer-port", "4000", "--x-peer-link-type", "tcp", "--x-peer-config-text",
                  "[tcp]\nNodeId1=1\n", "--poll", "sleep"});
  ASSERT_TRUE(o) << o.status().to_string();
  EXPECT_EQ(o->command, Command::kPeer);
  EXPECT_EQ(o->peer.node, 2);
  EXPECT_EQ(o->peer.port, 4000);
  EXPECT_EQ(o->peer.config_text, "[tcp]\nNodeId1=1\n");
  EXPECT_EQ(error_of({"--x-peer-node", "2"}),
            "--x-peer-node needs exactly one of --x-peer-config-text and --x-peer-config-file");
}

TEST(LatencyBenchOptions, BadValuesNameTheOptionAndWhatIsAccepted) {
  EXPECT_EQ(error_of({"--poll", "fast"}), "--poll: 'fast' is not one of: busy, sleep");
  EXPECT_EQ(error_of({"--transporter", "rdma"}), "--transporter: 'rdma' is not built in (built in: tcp, shm)");
  EXPECT_EQ(error_of({"--size", "abc"}), "--size: 'abc' is not a byte count (examples: 64, 4096, 4K)");
  EXPECT_EQ(error_of({"--size", "40000"}),
            "--size: 40000 is more than 32728, the largest payload one 32 KB frame carries");
  EXPECT_EQ(error_of({"--iterations", "0"}), "--iterations: '0' is not a number from 1 to 1000000000");
  EXPECT_EQ(error_of({"--iterations", "-5"}), "--iterations: '-5' is not a number from 1 to 1000000000");
  EXPECT_EQ(error_of({"--warmup", "x"}), "--warmup: 'x' is not a number from 0 to 1000000000");
  EXPECT_EQ(error_of({"--cpus", "0,x"}), "--cpus: '0,x' is not one or two CPU numbers like 0,1");
  EXPECT_EQ(error_of({"--cpus", "0,1,2"}), "--cpus: '0,1,2' is not one or two CPU numbers like 0,1");
  EXPECT_EQ(error_of({"--cpus", "0,"}), "--cpus: '0,' is not one or two CPU numbers like 0,1");
  EXPECT_EQ(error_of({"--batch", "0"}), "--batch: '0' is not a number from 1 to 1024");
  EXPECT_EQ(error_of({"--port", "70000"}), "--port: '70000' is not a port from 1 to 65535");
  EXPECT_EQ(error_of({"--timeout", "0"}), "--timeout: '0' is not a number of seconds from 1 to 3600");
  EXPECT_EQ(error_of({"--link-param", "Checksum"}), "--link-param: 'Checksum' is not KEY=VALUE");
}

TEST(LatencyBenchOptions, UnknownOptionsMissingValuesAndStrayWords) {
  EXPECT_EQ(error_of({"--bogus"}), "unknown option '--bogus'");
  EXPECT_EQ(error_of({"--bogus=1"}), "unknown option '--bogus'");
  EXPECT_EQ(error_of({"-x"}), "unknown option '-x'");
  EXPECT_EQ(error_of({"--size"}), "option --size needs a value");
  EXPECT_EQ(error_of({"-client"}), "option --client needs a value");
  EXPECT_EQ(error_of({"--json=yes"}), "option --json takes no value");
  EXPECT_EQ(error_of({"pong"}), "unexpected argument 'pong' (commands: access, throughput, ping, ping-all)");
  EXPECT_EQ(error_of({"ping", "all"}), "unexpected argument 'all' (commands: access, throughput, ping, ping-all)");
}

TEST(LatencyBenchOptions, CombinationsThatCannotMeanAnything) {
  EXPECT_EQ(error_of({"--server", "--client", "h"}), "--server and --client cannot be combined");
  EXPECT_EQ(error_of({"--client", "h", "--compare"}),
            "--compare measures floors on this machine; it cannot be combined with --server or --client");
  EXPECT_EQ(error_of({"all", "--server"}),
            "'all' runs every transporter on this machine; it cannot be combined with --server or --client");
  EXPECT_EQ(error_of({"--server", "--stream"}),
            "--stream is chosen by the client; the server answers whatever it is sent");
  EXPECT_EQ(error_of({"ping", "--peer-host", "h"}), "--peer-host only applies to --server");
  EXPECT_EQ(error_of({"all", "--transporter", "tcp"}),
            "'all' runs every transporter; --transporter needs the ping command");
  EXPECT_EQ(error_of({"all", "--stream"}),
            "'all' already streams over every transporter; --stream needs the ping command");
  EXPECT_EQ(error_of({"ping", "--cpus", "1"}),
            "--cpus: give two CPUs, one for this process and one for its peer (e.g. --cpus 0,1)");
  EXPECT_EQ(error_of({"--client", "h", "--cpus", "0,1"}),
            "--cpus: --server and --client run one process here; give one CPU (e.g. --cpus 1)");
  EXPECT_EQ(error_of({"ping", "--config", "c.ini", "--link-param", "Checksum=1"}),
            "--link-param adds to the generated link section; with --config, edit the file instead");
}

// The option table: every descriptor's checks and help come from its fields.

// A value each option accepts, for the tests that need one.
std::string good_value(const OptionSpec& spec) {
  static const std::map<std::string_view, std::string> kCustom = {
      {"--transporter", "tcp"}, {"--duration", "1"},   {"--mix", "50/50"},   {"--rate", "10k"},
      {"--link-param", "A=B"},  {"--size", "64"},      {"--plot", "a.svg"},  {"--poll", "busy"},
      {"--cpus", "0,1"},        {"--config", "c.ini"}, {"--peer-host", "h"}, {"--client", "h"},
      {"--node-param", "A=B"},  {"--sweep", "A=1,2"},  {"--over", "2ms"}};
  if (!spec.what.empty()) return std::to_string(spec.min == 0 ? 1 : spec.min);
  const auto it = kCustom.find(spec.name);
  return it == kCustom.end() ? "x" : it->second;
}

TEST(LatencyBenchOptionTable, EveryRangeErrorNamesTheOptionAndTheRange) {
  int numbers = 0;
  for (const OptionSpec& spec : option_table()) {
    if (spec.what.empty()) continue;
    ++numbers;
    const std::string name(spec.name);
    const std::string range = "from " + std::to_string(spec.min) + " to " + std::to_string(spec.max);
    const std::string above = std::to_string(spec.max + 1);
    EXPECT_EQ(error_of({name, above}), name + ": '" + above + "' is not " + std::string(spec.what) + " " + range);
    if (spec.min > 0) {
      const std::string below = std::to_string(spec.min - 1);
      EXPECT_EQ(error_of({name + "=" + below}),
                name + ": '" + below + "' is not " + std::string(spec.what) + " " + range);
    }
    EXPECT_EQ(error_of({name, "many"}), name + ": 'many' is not " + std::string(spec.what) + " " + range);
  }
  EXPECT_GE(numbers, 14) << "every plain number option is in the table";
}

TEST(LatencyBenchOptionTable, EveryCheckedValueErrorNamesTheOptionAndWhatItAccepts) {
  for (const OptionSpec& spec : option_table()) {
    if (!spec.what.empty() || spec.accepts.empty()) continue;
    const std::string name(spec.name);
    EXPECT_EQ(error_of({name, "?!"}), name + ": '?!' is not " + accepts_text(spec)) << name;
    EXPECT_EQ(accepts_text(spec).find('{'), std::string::npos) << name << ": every placeholder is filled in";
  }
  EXPECT_EQ(error_of({"--rate", "200M"}),
            "--rate: '200M' is not a rate per second from 1 to 100000000 (examples: 50000, 200k, 1.5M, 200k/s)");
}

TEST(LatencyBenchOptionTable, UnknownOptionsAreNamed) {
  EXPECT_EQ(find_option("--rowz"), nullptr);
  EXPECT_EQ(error_of({"--rowz", "5"}), "unknown option '--rowz'");
  EXPECT_EQ(error_of({"access", "--rows=5", "--Rows=5"}), "unknown option '--Rows'");
  for (const OptionSpec& spec : option_table()) {
    EXPECT_EQ(find_option(spec.name), &spec);
    if (!spec.alias.empty()) {
      EXPECT_EQ(find_option(spec.alias), &spec);
    }
  }
}

TEST(LatencyBenchOptionTable, HelpListsEveryOptionWithItsRangeAndDefault) {
  const std::string help = help_text(kBuiltIn);
  for (const OptionSpec& spec : option_table()) {
    const std::string name(spec.name);
    const bool internal = name.starts_with("--x-peer-");
    const bool mode = name == "--server" || name == "--client";
    if (internal) {
      EXPECT_EQ(help.find(name), std::string::npos) << name << " is internal";
      continue;
    }
    EXPECT_NE(help.find(mode ? std::string(spec.alias) : name + " "), std::string::npos) << name;
    for (const OptionHelp& entry : spec.help) {
      if (entry.section == HelpSection::kNone) continue;
      EXPECT_NE(help.find(std::string(entry.text.substr(0, 20))), std::string::npos) << name;
    }
    if (!spec.what.empty()) {
      EXPECT_NE(help.find(std::to_string(spec.max)), std::string::npos) << name << "'s range";
    }
  }
  EXPECT_NE(help.find("--x-peer- are internal"), std::string::npos);
  EXPECT_NE(help.find("rows in the table: a number from 1 to 100000000; default 100000"), std::string::npos);
  EXPECT_NE(help.find("default 11860"), std::string::npos);
  EXPECT_NE(help.find("at most 32728"), std::string::npos);
  std::size_t widest = 0;
  for (std::size_t at = 0, end = 0; at < help.size(); at = end + 1) {
    end = help.find('\n', at);
    if (end == std::string::npos) end = help.size();
    if (help.compare(at, 16, "  latency_bench ") != 0) widest = std::max(widest, end - at);
  }
  EXPECT_LE(widest, 104u) << "option lines wrap";
}

TEST(LatencyBenchOptionTable, EveryScopedOptionIsRefusedByTheOtherCommands) {
  const std::pair<const char*, Command> kWords[] = {{"access", Command::kAccess},
                                                    {"throughput", Command::kThroughput},
                                                    {"ping", Command::kPing},
                                                    {"ping-all", Command::kPingAll}};
  int refused = 0;
  for (const OptionSpec& spec : option_table()) {
    if (spec.commands == kEveryCommand) continue;
    for (const auto& [word, command] : kWords) {
      if ((spec.commands & command_bit(command)) != 0) continue;
      ++refused;
      std::vector<std::string> args = {word, std::string(spec.name)};
      if (!spec.value_name.empty()) args.push_back(good_value(spec));
      EXPECT_EQ(error_of(args), std::string(spec.name) + " applies to " + scope_text(spec) + ", not to " + word);
    }
  }
  EXPECT_GE(refused, 30);
}

TEST(LatencyBenchOptionTable, HelpAfterACommandShowsThatCommandsOptions) {
  EXPECT_EQ(parse({"--help"})->help_for, Command::kHelp);
  EXPECT_EQ(parse({"throughput", "--help"})->help_for, Command::kThroughput);
  EXPECT_EQ(parse({"all", "-h"})->help_for, Command::kPingAll);
  const std::string throughput = help_text(kBuiltIn, Command::kThroughput);
  for (const char* shown : {"--duration", "--rows", "--transporter", "--poll", "options of every command"})
    EXPECT_NE(throughput.find(shown), std::string::npos) << shown;
  for (const char* hidden : {"options of ping", "\n  --stream", "\n  --link-param", "options of access:"})
    EXPECT_EQ(throughput.find(hidden), std::string::npos) << hidden;
  const std::string ping = help_text(kBuiltIn, Command::kPing);
  for (const char* shown : {"--stream", "--size", "--port", "--cpus"})
    EXPECT_NE(ping.find(shown), std::string::npos) << shown;
  for (const char* hidden : {"\n  --rows", "\n  --duration", "\n  --plot"})
    EXPECT_EQ(ping.find(hidden), std::string::npos) << hidden;
  for (const OptionSpec& spec : option_table()) {
    for (const OptionHelp& entry : spec.help) {
      if (entry.section == HelpSection::kNone) continue;
      const Command reader = entry.section == HelpSection::kThroughput ? Command::kThroughput
                             : entry.section == HelpSection::kPing     ? Command::kPing
                                                                       : Command::kAccess;
      const std::string head = spec.alias.size() == 2 ? std::string(spec.alias) + ", " : "";
      EXPECT_NE(help_text(kBuiltIn, reader).find("\n  " + head + std::string(spec.name)), std::string::npos)
          << spec.name << " in the help of a command that reads it";
    }
  }
}

}  // namespace
}  // namespace fjord::bench
