// The cluster configuration file, in NDB's config.ini style:
//
//   # comment            ; comment
//   [tcp default]        <- defaults for every [tcp] section
//   SendBufferMemory=4M
//   [tcp]
//   NodeId1=1
//   NodeId2=2
//
// parse_text() only splits the text into sections and key=value entries,
// remembering line numbers; a UTF-8 byte-order mark at the start is skipped.
// apply_schema() checks one section against a Schema: the ParamSpecs Fjord
// implements (name, kind, accepted range, default) and the names of NDB's
// parameters for that section that Fjord does not implement. It returns the
// typed values. Keys are case-insensitive, as in NDB. Byte sizes take K, M
// and G suffixes (powers of 1024). Booleans are 1/0, true/false, yes/no, y/n.
//
// Every finding goes to a Diagnostics, so one run reports every error of a
// file: errors name the file, line, section, key and the accepted range (an
// unknown key, the closest known key of its section, if one is close);
// warnings name an NDB
// parameter that has no effect here. The input is bounded: a file larger
// than kMaxFileBytes, a file that is not a regular file, a line longer than
// kMaxLineBytes are errors, and a message quotes at most kQuoteMaxChars of a
// value.
//
// Slow path (start-up). Any thread; no shared state.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fjord/base/status.h"

namespace fjord::config {

// A cluster's config is a few hundred lines; these bounds keep a wrong path
// (a log file, /dev/zero, a binary) from being read whole or echoed back.
inline constexpr std::size_t kMaxFileBytes = 1 << 20;
inline constexpr std::size_t kMaxLineBytes = 8192;  // a 4096-character ThreadConfig fits
inline constexpr std::size_t kMaxKeyChars = 64;     // NDB's longest name is under 40
inline constexpr std::size_t kQuoteMaxChars = 40;   // of a bad value, in a message
inline constexpr std::size_t kMaxReportedErrors = 20;
// Sections past this are an error: a cluster of 255 nodes needs far fewer,
// and each section is checked against every "default" section.
inline constexpr std::size_t kMaxSections = 4096;

// What loading a config found. Errors make the load fail; warnings are for
// the caller to print or log once. A message recorded twice (a default
// section's key checked for every section it applies to) is kept once.
class Diagnostics {
 public:
  void error(std::string message, StatusCode code = StatusCode::kInvalidArgument);
  void warn(std::string message);

  bool has_errors() const { return !errors_.empty(); }
  std::size_t error_count() const { return errors_.size(); }
  const std::vector<std::string>& errors() const { return errors_; }
  const std::vector<std::string>& warnings() const { return warnings_; }
  // The first error's code, every error's message one per line (at most
  // kMaxReportedErrors, then how many more). Precondition: has_errors().
  Status status() const;

 private:
  std::vector<std::string> errors_;
  std::vector<std::string> warnings_;
  std::set<std::string, std::less<>> seen_;
  StatusCode first_code_ = StatusCode::kInvalidArgument;
};

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

// Sections and entries of `text`; a malformed line is recorded in
// `diagnostics` and skipped (after a malformed section header, up to the
// next header), so later lines are still checked.
File parse_text(std::string_view text, std::string path, Diagnostics& diagnostics);
// The same for a file: a regular file of at most kMaxFileBytes.
File read_file(const std::string& path, Diagnostics& diagnostics);
// As above; every error of the text in the status.
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

// What one kind of section accepts.
struct Schema {
  std::span<const ParamSpec> specs;  // what Fjord implements
  // NDB's parameter names of this kind of section (any of them may also be
  // in `specs`): the others are accepted with a warning that they have no
  // effect here.
  std::span<const std::string_view> ndb_names;
  // The section names of this kind, each also as "<name> default" (["api",
  // "mysqld"]); empty: the section's own name only.
  std::span<const std::string_view> aliases;
};

// Checks `section` (after the matching "<alias> default" sections of `file`,
// which apply first, in file order) against `schema`. Unknown keys,
// malformed values, values outside [min,max], a key given twice and missing
// required keys are errors naming file, line, key and the accepted range.
// Returns the values that were valid.
ParamSet apply_schema(const File& file, const Section& section, const Schema& schema, Diagnostics& diagnostics);
// Checks a "<name> default" section on its own (every key known and
// well-formed, none given twice), so its errors are found even where no
// section of that kind exists.
void check_default_section(const File& file, const Section& section, const Schema& schema, Diagnostics& diagnostics);
// True if `name` ends in " default".
bool is_default_section(std::string_view name);

// Parses one value of the given kind; the error text says what was expected.
Result<uint64_t> parse_uint(std::string_view text);
Result<uint64_t> parse_bytes(std::string_view text);
Result<bool> parse_bool(std::string_view text);
// "2M", "512K", "7" (the largest exact suffix), for messages and docs.
std::string format_bytes(uint64_t bytes);
std::string describe_range(const ParamSpec& spec);
std::string lower(std::string_view text);
// `text` quoted, cut to kQuoteMaxChars with "..." when longer.
std::string quote(std::string_view text);
// The name among `specs` and `names` closest to `key` (case-insensitive
// edit distance, the first of equals); empty if none is within half the
// longer name's length.
std::string_view closest_name(std::string_view key, std::span<const ParamSpec> specs,
                              std::span<const std::string_view> names);

}  // namespace fjord::config
