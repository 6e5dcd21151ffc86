// latency_bench's options as one table of descriptors: each option's
// spelling, the commands it applies to, the values it accepts, its defaults
// and its help. Parsing, range checks, "applies to" errors and --help
// (options.cpp) all read the table, so each option is described once.
//
// Slow path (start-up); one thread; the table is constant.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fjord/base/status.h"
#include "options.h"

namespace fjord::bench {

// A set of commands, one bit per Command.
using CommandSet = uint16_t;
constexpr CommandSet command_bit(Command command) noexcept {
  return static_cast<CommandSet>(1u << static_cast<unsigned>(command));
}
constexpr CommandSet command_set(std::initializer_list<Command> commands) noexcept {
  CommandSet set = 0;
  for (Command c : commands) set = static_cast<CommandSet>(set | command_bit(c));
  return set;
}
inline constexpr CommandSet kEveryCommand = 0xffff;

// What parsing gathers besides the options: the mode flags and the names
// given, which the checks after parsing (options.cpp's settle) need.
struct ParseState {
  Options options;
  std::span<const std::string> transporters;  // built into this program
  bool server = false;
  bool client = false;
  bool peer = false;  // a hidden --x-peer-node: this is the ping peer process
  bool no_compare = false;
  std::string command_word;
  std::vector<std::string_view> given;  // each option named, canonical spelling, in order
};

// The sections of --help, in the order they are printed.
enum class HelpSection : uint8_t { kNone, kDatabase, kAccess, kThroughput, kPing, kEvery };

// An option's entry in one section of --help. `text` may contain
// "{built_in}" (the transporters built in) and "{max_payload}" (the largest
// --size); what the option accepts and `default_text` are appended.
struct OptionHelp {
  HelpSection section = HelpSection::kNone;
  std::string_view text;
  std::string_view default_text;  // empty: no default is printed
};

// A value as parsed: the text, and the number when the option takes a plain one.
struct OptionValue {
  std::string_view text;
  uint64_t number = 0;
};

struct OptionSpec;
// Applies one option to `state`; a flag gets an empty value. Errors name the
// option and what it accepts.
using ApplyOption = Status (*)(const OptionSpec& spec, const OptionValue& value, ParseState& state);

struct OptionSpec {
  std::string_view name;                // canonical spelling: "--rows"
  std::string_view alias;               // another spelling ("-h", "-server"), or empty
  std::string_view value_name;          // "N", "FILE" in --help; empty: a flag, which takes no value
  CommandSet commands = kEveryCommand;  // where it applies; any other command refuses it
  bool needs_config = false;            // names a node of --config's file, so only with --config
  std::string_view scope_note;          // appended to the "applies to" error
  // A plain number (`what` not empty): accepted from min to max, and named
  // as `what` ("a port") in errors and --help. Otherwise `accepts` says
  // what `apply` takes ("one of: busy, sleep"), or is empty for free text.
  std::string_view what;
  uint64_t min = 0;
  uint64_t max = 0;
  std::string_view accepts;
  ApplyOption apply = nullptr;
  OptionHelp help[2] = {};  // at most two sections; none: an internal option
};

// Every option, in --help order within each section.
std::span<const OptionSpec> option_table() noexcept;
// The option spelled `spelling` (its name or alias), or nullptr.
const OptionSpec* find_option(std::string_view spelling) noexcept;
// "access and throughput (with --config)": where `spec` applies.
std::string scope_text(const OptionSpec& spec);
// What the option accepts, as errors and --help say it: "a number from 1 to
// 1024"; empty for flags and free text.
std::string accepts_text(const OptionSpec& spec);

}  // namespace fjord::bench
