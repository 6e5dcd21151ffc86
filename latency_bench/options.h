// latency_bench's command line: the options, their parsing (with error texts
// that name the option and the accepted values) and the --help text.
//
// Slow path (start-up); one thread; pure functions of their arguments, so the
// tests in tests/latency_bench/ pin every message.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fjord/base/status.h"
#include "fjord/transport/types.h"

namespace fjord::bench {

enum class Command : uint8_t {
  kAll,     // every transporter built in, both poll modes, floors: one table
  kPing,    // one transporter, ping-pong (or --stream), peer process started here
  kServer,  // the echoing side for a run from another machine
  kClient,  // the measuring side against a --server on HOST
  kPeer,    // internal: the peer process that kPing starts (hidden options)
  kHelp,
};

enum class PollMode : uint8_t { kBusy, kSleep };
const char* poll_mode_name(PollMode mode) noexcept;

inline constexpr uint16_t kDefaultPort = 11860;
inline constexpr uint64_t kMaxIterations = 1'000'000'000;
inline constexpr uint32_t kMaxBatch = 1024;

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
  Command command = Command::kAll;
  std::string transporter;   // empty: from --config, else "tcp"
  uint64_t size_bytes = 64;  // payload per message
  bool size_given = false;
  uint64_t iterations = 0;       // 0: the mode's default (default_iterations())
  uint64_t warmup = UINT64_MAX;  // UINT64_MAX: a tenth of the iterations, at least 100
  PollMode poll = PollMode::kBusy;
  bool poll_given = false;  // "all" runs both modes unless --poll was given
  std::vector<int> cpus;    // empty: the first two CPUs this process may use
  bool json = false;
  bool compare = false;
  bool stream = false;
  bool verbose = false;
  uint32_t batch = 32;  // --stream: frames packed per flush
  std::string config_path;
  std::vector<std::string> link_params;  // KEY=VALUE lines added to the generated link section
  std::string host;                      // --client HOST
  uint16_t port = kDefaultPort;          // --server/--client
  std::string peer_host = "localhost";   // --server: where the client connects from
  uint64_t timeout_s = 10;               // waiting for a peer to connect or answer
  PeerArgs peer;
};

// Parses the arguments after the program name. `transporters` are the names
// built into this program (for --transporter's check and messages). Errors
// have code kInvalidArgument and a one-line message (main adds the hint to
// run --help and exits 2).
Result<Options> parse_options(std::span<const std::string> args, std::span<const std::string> transporters);

// Iterations and warm-up once defaults are applied.
uint64_t effective_iterations(const Options& options);
uint64_t effective_warmup(const Options& options);

// The --help text (every user option, the commands, examples, exit codes).
std::string help_text(std::span<const std::string> transporters);

}  // namespace fjord::bench
