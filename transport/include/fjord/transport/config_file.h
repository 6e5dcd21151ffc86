// The cluster configuration file, in NDB's config.ini style:
//
//   # comment            ; comment
//   [tcp default]        <- defaults for every [tcp] section
//   SendBufferMemory=4M
//   [tcp]
//   NodeId1=1
//   NodeId2=2
//
// parse_config_text() only splits the text into sections and key=value
// entries, remembering line numbers. apply_schema() checks one section
// against a list of ParamSpec (name, kind, accepted range, default) and
// returns typed values; its errors name the file, line, section, key and the
// accepted range. Keys are case-insensitive, as in NDB. Byte sizes take K, M
// and G suffixes (powers of 1024). Booleans are 1/0, true/false, yes/no, y/n.
//
// Slow path (start-up). Any thread; no shared state.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fjord/base/status.h"

namespace fjord::config {

struct Entry {
  std::string key;    // as written
  std::string value;  // trimmed
  int line = 0;
};

struct Section {
  std::string name;  // lower-case, single-spaced: "tcp", "tcp default", "ndbd"
  int line = 0;
  std::vector<Entry> entries;
};

struct File {
  std::string path;  // used in messages only; "<text>" for in-memory text
  std::vector<Section> sections;
};

Result<File> parse_text(std::string_view text, std::string path = "<text>");
Result<File> read_file(const std::string& path);

enum class Kind : uint8_t {
  kUint,   // decimal integer
  kBytes,  // integer with optional K/M/G suffix
  kBool,
  kString,
};

struct ParamSpec {
  std::string_view name;  // canonical spelling, e.g. "SendBufferMemory"
  Kind kind = Kind::kUint;
  uint64_t min = 0;  // for kUint/kBytes
  uint64_t max = UINT64_MAX;
  std::string_view default_value;  // empty: no default (see required); strings default to
  bool required = false;
  std::string_view help;  // one line for docs and --help
};

// Typed values of one section after apply_schema(). Every spec'd key with a
// default (or given value) is present.
class ParamSet {
 public:
  bool has(std::string_view name) const;
  uint64_t get_uint(std::string_view name) const;  // kUint, kBytes
  bool get_bool(std::string_view name) const;
  const std::string& get_string(std::string_view name) const;
  // Where the value came from: "cluster.ini:12" or "default".
  const std::string& origin(std::string_view name) const;

  void set(std::string_view name, Kind kind, uint64_t number, std::string text, std::string origin);

 private:
  struct Value {
    Kind kind;
    uint64_t number;
    std::string text;
    std::string origin;
  };
  const Value& find(std::string_view name) const;
  std::map<std::string, Value, std::less<>> values_;  // key: lower-case name
};

// Checks `section` (and the matching "<name> default" sections of `file`,
// which apply first) against `specs`. Unknown keys, malformed values, values
// outside [min,max], and missing required keys are errors naming file, line,
// key and the accepted range.
Result<ParamSet> apply_schema(const File& file, const Section& section, std::span<const ParamSpec> specs);

// Parses one value of the given kind; the error text says what was expected.
Result<uint64_t> parse_uint(std::string_view text);
Result<uint64_t> parse_bytes(std::string_view text);
Result<bool> parse_bool(std::string_view text);
// "2M", "512K", "7" (the largest exact suffix), for messages and docs.
std::string format_bytes(uint64_t bytes);
std::string describe_range(const ParamSpec& spec);
std::string lower(std::string_view text);

}  // namespace fjord::config
