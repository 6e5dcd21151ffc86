// latency_bench's command line: the options, their parsing (with error texts
// that name the option and the accepted values) and the --help text, all
// derived from the option table (option_table.h), plus the checks that
// concern several options at once.
//
// Slow path (start-up); one thread; pure functions of their arguments, so the
// tests in tests/latency_bench/ pin every message.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fjord/base/status.h"
#include "fjord/transport/link_config.h"
#include "fjord/transport/types.h"

namespace fjord::bench {

// TCP with TLS on both ends (RequireTls, credentials made for the run in its
// directory): a column of access and throughput of its own beside plain tcp.
inline constexpr std::string_view kTcpTls = "tcp-tls";

enum class Command : uint8_t {
  kAccess,      // the access-method table (serial/batched pk, uk, scans) against a data node; the default
  kThroughput,  // flexAsynch-style: definer and executor threads, many transactions in flight
  kPingAll,     // every transporter built in, both poll modes, floors: one ping table ("ping-all", "all")
  kPing,        // one transporter, ping-pong (or --stream), peer process started here
  kServer,      // the echoing side for a run from another machine
  kClient,      // the measuring side against a --server on HOST
  kPeer,        // internal: the peer process that kPing starts (hidden options)
  kHelp,
};

enum class PollMode : uint8_t { kBusy, kSleep };
const char* poll_mode_name(PollMode mode) noexcept;

inline constexpr uint16_t kDefaultPort = transport::kDefaultLinkPort;  // a link without PortNumber meets there too
inline constexpr uint64_t kMaxIterations = 1'000'000'000;
inline constexpr uint32_t kMaxBatch = 1024;
// access and throughput
inline constexpr uint64_t kDefaultRows = 100'000;
inline constexpr uint64_t kMaxRows = 100'000'000;
inline constexpr uint32_t kDefaultRowBytes = 100;  // NDB's "key lookups of around 100 bytes"
inline constexpr uint32_t kKeyColumnBytes = 24;    // id, unique key and ordered key: 8 bytes each
inline constexpr uint32_t kMinRowBytes = kKeyColumnBytes + 8;
inline constexpr uint32_t kMaxRowBytes = kKeyColumnBytes + 8000;  // the filler is one column (kMaxColumnBytes)
inline constexpr uint32_t kDefaultAccessBatch = 20;               // NDB's access table used batches of 20 records
inline constexpr uint32_t kDefaultThroughputBatch = 1;
inline constexpr uint32_t kDefaultStreamBatch = 32;
inline constexpr uint64_t kDefaultTimeoutS = 10;
inline constexpr uint64_t kDefaultDurationMs = 5000;
inline constexpr uint32_t kDefaultInFlight = 64;
inline constexpr uint32_t kMaxExecutors = 8;  // API node ids the embedded node's config provides per transporter
inline constexpr uint32_t kMaxDefiners = 16;
inline constexpr uint32_t kMaxInFlight = 1024;  // ConnectOptions.max_transactions
inline constexpr uint64_t kMaxRatePerS = 100'000'000;
inline constexpr std::size_t kMaxSweepValues = 32;
inline constexpr uint64_t kMaxOverNs = 60'000'000'000ULL;

// What the peer process needs to connect back (set by the hidden --x-peer-*
// options; the user never types them).
struct PeerArgs {
  NodeId node = kNoNode;    // the node this peer is in the link
  std::string config_text;  // generated config, or
  std::string config_path;  // the user's --config file
  uint16_t port = 0;        // the server's real port when the config says 0
  std::string link_type;    // which link of the file to use
};

struct Options {
  Command command = Command::kAccess;
  Command help_for = Command::kHelp;  // --help after a command word: that command's help only
  std::string transporter;            // empty: from --config, else "tcp" (access: every transporter available)
  uint64_t size_bytes = 64;           // payload per message
  bool size_given = false;
  uint64_t iterations = 0;       // 0: the mode's default (default_iterations())
  uint64_t warmup = UINT64_MAX;  // UINT64_MAX: a tenth of the iterations, at least 100
  PollMode poll = PollMode::kBusy;
  bool poll_given = false;  // "ping-all" runs both modes unless --poll was given
  std::vector<int> cpus;    // empty: the first two CPUs this process may use
  bool json = false;
  bool compare = false;  // access and throughput: true unless --no-compare
  bool stream = false;
  bool verbose = false;
  // Per command once parsed: access rows per execute (20), throughput
  // operations per transaction (1), --stream frames per flush (32).
  uint32_t batch = kDefaultStreamBatch;
  bool batch_given = false;
  std::string config_path;
  std::vector<std::string> link_params;   // KEY=VALUE lines added to the generated link section
  std::string host;                       // --client HOST
  uint16_t port = kDefaultPort;           // --server/--client
  std::string peer_host = "localhost";    // --server: where the client connects from
  std::string own_host;                   // --host: this side's address (empty: any)
  uint64_t timeout_s = kDefaultTimeoutS;  // waiting for a peer to connect or answer
  PeerArgs peer;
  // access and throughput
  uint64_t rows = kDefaultRows;
  bool rows_given = false;
  uint32_t row_bytes = kDefaultRowBytes;
  NodeId api_node = kNoNode;   // --api-node: with --config (0: the file's first [api] section)
  NodeId data_node = kNoNode;  // --data-node: with --config (0: the file's first [ndbd] section)
  bool start_node = false;     // --start-node: start fjord-datanode for --config's data node here
  std::string plot_path;       // --plot FILE (.png or .svg), access only
  // access without --config: KEY=VALUE lines for the generated [ndbd] section
  std::vector<std::string> node_params;
  // --sweep PARAM=V1,V2,...: the node restarted for each value (access
  // without --config); empty param: no sweep.
  std::string sweep_param;
  std::vector<std::string> sweep_values;
  uint64_t over_ns = 2'000'000;  // --over: a sweep's share of samples above this
  // throughput
  uint64_t duration_ms = kDefaultDurationMs;
  uint32_t definers = 1;
  uint32_t executors = 1;
  // --threads-per-api-node N: N executors on N API nodes, then N on one
  // API node (one ClusterConnection, a Session each); 0: the first only.
  uint32_t threads_per_api_node = 0;
  // --rounds N: with --threads-per-api-node, N pairs of runs in alternating
  // order; the target is judged on the median of their ratios.
  uint32_t rounds = 1;
  uint32_t in_flight = kDefaultInFlight;  // transactions in flight per executor
  uint32_t read_percent = 100;            // --mix READ/UPDATE
  uint64_t rate_per_s = 0;                // --rate: 0 = closed loop
};

// Parses the arguments after the program name. `transporters` are the names
// built into this program (for --transporter's check and messages). Errors
// have code kInvalidArgument and a one-line message (main adds the hint to
// run --help and exits 2).
Result<Options> parse_options(std::span<const std::string> args, std::span<const std::string> transporters);

// Iterations and warm-up once defaults are applied (access: samples per
// access method).
uint64_t effective_iterations(const Options& options);
uint64_t effective_warmup(const Options& options);
// The name a command is typed as: "access", "throughput", "ping", "ping-all".
const char* command_name(Command command) noexcept;

// The --help text (the commands, the options, examples, exit codes). With
// a command (`latency_bench ping --help`), only the options sections that
// command reads; kHelp: every section.
std::string help_text(std::span<const std::string> transporters, Command command = Command::kHelp);

}  // namespace fjord::bench
