#include "fjord/transport/config_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

namespace fjord::config {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string where(const File& file, int line) { return file.path + ":" + std::to_string(line); }

Status invalid(std::string message) { return Status(StatusCode::kInvalidArgument, std::move(message)); }

// At most kQuoteMaxChars of `text`, "..." marking a cut.
std::string excerpt(std::string_view text) {
  if (text.size() <= kQuoteMaxChars) return std::string(text);
  return std::string(text.substr(0, kQuoteMaxChars)) + "...";
}

// "tcp   DEFAULT" -> "tcp default"
std::string normalize_section_name(std::string_view raw) {
  std::string out;
  bool space = false;
  for (char c : trim(raw)) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = true;
      continue;
    }
    if (space && !out.empty()) out.push_back(' ');
    space = false;
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

bool valid_key(std::string_view key) {
  if (key.empty()) return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

const ParamSpec* find_spec(std::span<const ParamSpec> specs, std::string_view key) {
  const std::string wanted = lower(key);
  for (const ParamSpec& spec : specs)
    if (lower(spec.name) == wanted) return &spec;
  return nullptr;
}

// Parses `text` for `spec`, range-checks it and stores it in `out`.
Status store_value(const ParamSpec& spec, std::string_view text, const std::string& origin, const std::string& context,
                   ParamSet& out) {
  uint64_t number = 0;
  std::string error;
  switch (spec.kind) {
    case Kind::kUint:
    case Kind::kBytes: {
      auto parsed = spec.kind == Kind::kUint ? parse_uint(text) : parse_bytes(text);
      if (!parsed) return invalid(context + ": " + parsed.status().message() + "; accepted " + describe_range(spec));
      number = *parsed;
      if (number < spec.min || number > spec.max)
        return invalid(context + ": value " + excerpt(text) + " out of range; accepted " + describe_range(spec));
      break;
    }
    case Kind::kBool: {
      auto parsed = parse_bool(text);
      if (!parsed) return invalid(context + ": " + parsed.status().message());
      number = *parsed ? 1 : 0;
      break;
    }
    case Kind::kString:
      if (text.size() > spec.max) return invalid(context + ": longer than " + std::to_string(spec.max) + " characters");
      break;
  }
  out.set(spec.name, spec.kind, number, std::string(text), origin);
  return Status::ok();
}

constexpr std::string_view kByteOrderMark = "\xEF\xBB\xBF";
constexpr std::string_view kDefaultSuffix = " default";

// Splits lines into sections and entries. After a malformed section header
// the entries up to the next header belong to no section and are skipped:
// the header's error already names the problem.
class LineParser {
 public:
  LineParser(File& file, Diagnostics& diagnostics) : file_(file), diagnostics_(diagnostics) {}

  void parse_line(std::string_view line, int line_no) {
    if (const std::size_t hash = line.find_first_of("#;"); hash != std::string_view::npos) line = line.substr(0, hash);
    line = trim(line);
    if (line.empty()) return;
    if (line.front() == '[')
      parse_header(line, line_no);
    else
      parse_entry(line, line_no);
  }

 private:
  void fail(int line_no, const std::string& message) { diagnostics_.error(where(file_, line_no) + ": " + message); }

  void parse_header(std::string_view line, int line_no) {
    skipping_ = true;
    if (line.back() != ']') return fail(line_no, "section header must end with ']': " + excerpt(line));
    const std::string name = normalize_section_name(line.substr(1, line.size() - 2));
    if (name.empty()) return fail(line_no, "empty section name");
    if (name.size() > kMaxKeyChars) return fail(line_no, "section name longer than " + std::to_string(kMaxKeyChars));
    if (file_.sections.size() == kMaxSections)
      return fail(line_no, "more than " + std::to_string(kMaxSections) + " sections");
    file_.sections.push_back(Section{name, line_no, {}});
    skipping_ = false;
  }

  void parse_entry(std::string_view line, int line_no) {
    const std::size_t eq = line.find_first_of("=:");
    if (eq == std::string_view::npos) return fail(line_no, "expected key=value, got " + quote(line));
    const std::string_view key = trim(line.substr(0, eq));
    const std::string_view value = trim(line.substr(eq + 1));
    if (key.size() > kMaxKeyChars)
      return fail(line_no, "key longer than " + std::to_string(kMaxKeyChars) + " characters: " + quote(key));
    if (!valid_key(key)) return fail(line_no, "malformed key " + quote(key));
    if (file_.sections.empty()) return fail(line_no, quote(key) + " appears before any [section]");
    if (skipping_) return;
    file_.sections.back().entries.push_back(Entry{std::string(key), std::string(value), line_no});
  }

  File& file_;
  Diagnostics& diagnostics_;
  bool skipping_ = false;
};

// Reads a regular file of at most kMaxFileBytes into `out`.
Status read_bounded(int fd, const std::string& path, std::string& out) {
  struct stat info {};
  if (::fstat(fd, &info) != 0) return Status(StatusCode::kIoError, path + ": " + std::strerror(errno));
  if (!S_ISREG(info.st_mode)) return invalid(path + ": not a regular file");
  const std::string too_large = path + ": larger than " + format_bytes(kMaxFileBytes) + " bytes; not a config file";
  if (static_cast<uint64_t>(info.st_size) > kMaxFileBytes) return invalid(too_large);
  out.resize(kMaxFileBytes + 1);  // one byte more tells a file that grew past the limit
  std::size_t filled = 0;
  while (filled < out.size()) {
    const ssize_t n = ::read(fd, out.data() + filled, out.size() - filled);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status(StatusCode::kIoError, "cannot read config file " + path + ": " + std::strerror(errno));
    if (n == 0) break;
    filled += static_cast<std::size_t>(n);
  }
  if (filled > kMaxFileBytes) return invalid(too_large);
  out.resize(filled);
  return Status::ok();
}

bool given_in(const Section& section, std::string_view name) {
  const std::string wanted = lower(name);
  return std::any_of(section.entries.begin(), section.entries.end(),
                     [&](const Entry& e) { return lower(e.key) == wanted; });
}

bool is_ndb_name(std::span<const std::string_view> names, std::string_view key) {
  const std::string wanted = lower(key);
  return std::any_of(names.begin(), names.end(), [&](std::string_view n) { return lower(n) == wanted; });
}

// Stores one entry's value in `out`, or records why it cannot be.
void apply_entry(const File& file, const Section& from, const Entry& entry, const Schema& schema, ParamSet& out,
                 Diagnostics& diagnostics) {
  const std::string context = where(file, entry.line) + ": [" + from.name + "] " + entry.key;
  if (const ParamSpec* spec = find_spec(schema.specs, entry.key)) {
    if (Status s = store_value(*spec, entry.value, where(file, entry.line), context, out); !s)
      diagnostics.error(s.message());
    return;
  }
  if (is_ndb_name(schema.ndb_names, entry.key))
    return diagnostics.warn(context + ": an NDB parameter Fjord does not implement; it has no effect here");
  // Past the reported errors the message is only counted: skip the search.
  const std::string_view closest = diagnostics.error_count() < kMaxReportedErrors
                                       ? closest_name(entry.key, schema.specs, schema.ndb_names)
                                       : std::string_view();
  diagnostics.error(context + ": unknown key" +
                    (closest.empty() ? " (neither Fjord's nor NDB's name for a parameter of this section)"
                                     : "; did you mean " + std::string(closest) + "?"));
}

// A key given twice in one section is almost always a mistake.
void check_duplicates(const File& file, const Section& section, Diagnostics& diagnostics) {
  std::map<std::string, int, std::less<>> first_line;
  for (const Entry& entry : section.entries) {
    const auto [it, fresh] = first_line.emplace(lower(entry.key), entry.line);
    if (!fresh)
      diagnostics.error(where(file, entry.line) + ": [" + section.name + "] " + entry.key +
                        ": given twice (first at line " + std::to_string(it->second) + ")");
  }
}

bool applies_to(const Section& candidate, const Section& section, const Schema& schema) {
  if (!is_default_section(candidate.name)) return false;
  const std::string_view base =
      std::string_view(candidate.name).substr(0, candidate.name.size() - kDefaultSuffix.size());
  if (schema.aliases.empty()) return base == section.name;
  return std::find(schema.aliases.begin(), schema.aliases.end(), base) != schema.aliases.end();
}

bool is_prefix_or_suffix(std::string_view key, std::string_view name) {
  if (key.size() < 2 || key.size() >= name.size()) return false;
  const std::string k = lower(key);
  const std::string n = lower(name);
  return n.compare(0, k.size(), k) == 0 || n.compare(n.size() - k.size(), k.size(), k) == 0;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      const bool same =
          std::tolower(static_cast<unsigned char>(a[i - 1])) == std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string quote(std::string_view text) { return "'" + excerpt(text) + "'"; }

bool is_default_section(std::string_view name) {
  return name.size() > kDefaultSuffix.size() && name.substr(name.size() - kDefaultSuffix.size()) == kDefaultSuffix;
}

std::string_view closest_name(std::string_view key, std::span<const ParamSpec> specs,
                              std::span<const std::string_view> names) {
  std::string_view best;
  std::size_t best_distance = SIZE_MAX;
  auto consider = [&](std::string_view candidate) {
    const std::size_t d = edit_distance(key, candidate);
    // Farther than half the longer name is no longer a misspelling, unless
    // the key is the name's start or end ("SendBuf", NDB's old "Id").
    if (2 * d > std::max(key.size(), candidate.size()) && !is_prefix_or_suffix(key, candidate)) return;
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  };
  for (const ParamSpec& spec : specs) consider(spec.name);
  for (std::string_view name : names) consider(name);
  return best;
}

void Diagnostics::error(std::string message, StatusCode code) {
  if (!seen_.insert(message).second) return;
  if (errors_.empty()) first_code_ = code;
  errors_.push_back(std::move(message));
}

void Diagnostics::warn(std::string message) {
  if (!seen_.insert(message).second) return;
  warnings_.push_back(std::move(message));
}

Status Diagnostics::status() const {
  FJORD_ASSERT_MSG(!errors_.empty(), "Diagnostics::status() without an error");
  std::string text;
  const std::size_t shown = std::min(errors_.size(), kMaxReportedErrors);
  for (std::size_t i = 0; i < shown; ++i) {
    if (i > 0) text += '\n';
    text += errors_[i];
  }
  if (errors_.size() > shown) text += "\n... and " + std::to_string(errors_.size() - shown) + " more errors";
  return Status(first_code_, std::move(text));
}

File parse_text(std::string_view text, std::string path, Diagnostics& diagnostics) {
  File file;
  file.path = std::move(path);
  if (text.substr(0, kByteOrderMark.size()) == kByteOrderMark) text.remove_prefix(kByteOrderMark.size());
  LineParser parser(file, diagnostics);
  int line_no = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.size() > kMaxLineBytes) {
      diagnostics.error(where(file, line_no) + ": line longer than " + std::to_string(kMaxLineBytes) + " bytes");
      continue;
    }
    parser.parse_line(line, line_no);
  }
  return file;
}

File read_file(const std::string& path, Diagnostics& diagnostics) {
  File none;
  none.path = path;
  // O_NONBLOCK: opening a FIFO must not wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    diagnostics.error("cannot open config file " + path + ": " + std::strerror(errno), StatusCode::kNotFound);
    return none;
  }
  std::string text;
  const Status read = read_bounded(fd, path, text);
  ::close(fd);
  if (!read) {
    diagnostics.error(read.message(), read.code());
    return none;
  }
  return parse_text(text, path, diagnostics);
}

Result<File> parse_text(std::string_view text, std::string path) {
  Diagnostics diagnostics;
  File file = parse_text(text, std::move(path), diagnostics);
  if (diagnostics.has_errors()) return diagnostics.status();
  return file;
}

Result<File> read_file(const std::string& path) {
  Diagnostics diagnostics;
  File file = read_file(path, diagnostics);
  if (diagnostics.has_errors()) return diagnostics.status();
  return file;
}

Result<uint64_t> parse_uint(std::string_view text) {
  text = trim(text);
  if (text.empty()) return invalid("empty value, expected an unsigned integer");
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return invalid(quote(text) + " is not an unsigned integer");
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) return invalid(quote(text) + " is too large");
    value = value * 10 + digit;
  }
  return value;
}

Result<uint64_t> parse_bytes(std::string_view text) {
  text = trim(text);
  const std::string_view given = text;  // named whole in errors, suffix included
  uint64_t multiplier = 1;
  if (!text.empty()) {
    switch (std::toupper(static_cast<unsigned char>(text.back()))) {
      case 'K': multiplier = 1ULL << 10; break;
      case 'M': multiplier = 1ULL << 20; break;
      case 'G': multiplier = 1ULL << 30; break;
      default: break;
    }
    if (multiplier != 1) text.remove_suffix(1);
  }
  auto number = parse_uint(text);
  if (!number) return invalid(quote(given) + " is not a size (an integer with optional K, M or G)");
  if (*number > UINT64_MAX / multiplier) return invalid(quote(given) + " is too large");
  return *number * multiplier;
}

Result<bool> parse_bool(std::string_view text) {
  const std::string v = lower(trim(text));
  if (v == "1" || v == "true" || v == "yes" || v == "y" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "n" || v == "off") return false;
  return invalid(quote(text) + " is not a boolean (1/0, true/false, yes/no)");
}

std::string format_bytes(uint64_t bytes) {
  if (bytes != 0 && bytes % (1ULL << 30) == 0) return std::to_string(bytes >> 30) + "G";
  if (bytes != 0 && bytes % (1ULL << 20) == 0) return std::to_string(bytes >> 20) + "M";
  if (bytes != 0 && bytes % (1ULL << 10) == 0) return std::to_string(bytes >> 10) + "K";
  return std::to_string(bytes);
}

std::string describe_range(const ParamSpec& spec) {
  switch (spec.kind) {
    case Kind::kUint: return std::to_string(spec.min) + ".." + std::to_string(spec.max);
    case Kind::kBytes: return format_bytes(spec.min) + ".." + format_bytes(spec.max) + " bytes";
    case Kind::kBool: return "a boolean";
    case Kind::kString: return "a string";
  }
  return "?";
}

bool ParamSet::has(std::string_view name) const { return values_.count(lower(name)) != 0; }

const ParamSet::Value& ParamSet::find(std::string_view name) const {
  auto it = values_.find(lower(name));
  FJORD_ASSERT_MSG(it != values_.end(), "parameter read without a spec or default");
  return it->second;
}

uint64_t ParamSet::get_uint(std::string_view name) const {
  const Value& v = find(name);
  FJORD_ASSERT(v.kind == Kind::kUint || v.kind == Kind::kBytes);
  return v.number;
}

bool ParamSet::get_bool(std::string_view name) const {
  const Value& v = find(name);
  FJORD_ASSERT(v.kind == Kind::kBool);
  return v.number != 0;
}

const std::string& ParamSet::get_string(std::string_view name) const { return find(name).text; }
const std::string& ParamSet::origin(std::string_view name) const { return find(name).origin; }

void ParamSet::set(std::string_view name, Kind kind, uint64_t number, std::string text, std::string origin) {
  values_[lower(name)] = Value{kind, number, std::move(text), std::move(origin)};
}

ParamSet apply_schema(const File& file, const Section& section, const Schema& schema, Diagnostics& diagnostics) {
  ParamSet out;
  for (const ParamSpec& spec : schema.specs) {
    // An empty default means "no default", except for strings, where it is "".
    if (spec.default_value.empty() && spec.kind != Kind::kString) continue;
    const Status s =
        store_value(spec, spec.default_value, "default", "built-in default of " + std::string(spec.name), out);
    FJORD_ASSERT_MSG(s.is_ok(), "a built-in default is outside its own range");
  }
  for (const Section& candidate : file.sections)
    if (applies_to(candidate, section, schema))
      for (const Entry& entry : candidate.entries) apply_entry(file, candidate, entry, schema, out, diagnostics);
  for (const Entry& entry : section.entries) apply_entry(file, section, entry, schema, out, diagnostics);
  check_duplicates(file, section, diagnostics);
  // A required key given with a bad value has its own error already.
  for (const ParamSpec& spec : schema.specs)
    if (spec.required && !out.has(spec.name) && !given_in(section, spec.name))
      diagnostics.error(where(file, section.line) + ": [" + section.name + "] missing required key " +
                        std::string(spec.name) + " (" + describe_range(spec) + ")");
  return out;
}

void check_default_section(const File& file, const Section& section, const Schema& schema, Diagnostics& diagnostics) {
  ParamSet scratch;
  for (const Entry& entry : section.entries) apply_entry(file, section, entry, schema, scratch, diagnostics);
  check_duplicates(file, section, diagnostics);
}

}  // namespace fjord::config
