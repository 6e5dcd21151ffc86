#include "fjord/transport/config_file.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace fjord::config {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string where(const File& file, int line) { return file.path + ":" + std::to_string(line); }

Status invalid(std::string message) { return Status(StatusCode::kInvalidArgument, std::move(message)); }

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

std::string known_keys(std::span<const ParamSpec> specs) {
  std::string out;
  for (const ParamSpec& spec : specs) {
    if (!out.empty()) out += ", ";
    out += spec.name;
  }
  return out;
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
        return invalid(context + ": value " + std::string(text) + " out of range; accepted " + describe_range(spec));
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

}  // namespace

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Result<File> parse_text(std::string_view text, std::string path) {
  File file;
  file.path = std::move(path);
  int line_no = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (const std::size_t hash = line.find_first_of("#;"); hash != std::string_view::npos) line = line.substr(0, hash);
    line = trim(line);
    if (line.empty()) {
      if (end == text.size()) break;
      continue;
    }
    if (line.front() == '[') {
      if (line.back() != ']')
        return invalid(where(file, line_no) + ": section header must end with ']': " + std::string(line));
      const std::string name = normalize_section_name(line.substr(1, line.size() - 2));
      if (name.empty()) return invalid(where(file, line_no) + ": empty section name");
      file.sections.push_back(Section{name, line_no, {}});
    } else {
      const std::size_t eq = line.find_first_of("=:");
      if (eq == std::string_view::npos)
        return invalid(where(file, line_no) + ": expected key=value, got '" + std::string(line) + "'");
      const std::string_view key = trim(line.substr(0, eq));
      const std::string_view value = trim(line.substr(eq + 1));
      if (!valid_key(key)) return invalid(where(file, line_no) + ": malformed key '" + std::string(key) + "'");
      if (file.sections.empty())
        return invalid(where(file, line_no) + ": '" + std::string(key) + "' appears before any [section]");
      file.sections.back().entries.push_back(Entry{std::string(key), std::string(value), line_no});
    }
    if (end == text.size()) break;
  }
  return file;
}

Result<File> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(StatusCode::kNotFound, "cannot open config file " + path + ": " + std::strerror(errno));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parse_text(buffer.str(), path);
}

Result<uint64_t> parse_uint(std::string_view text) {
  text = trim(text);
  if (text.empty()) return invalid("empty value, expected an unsigned integer");
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return invalid("'" + std::string(text) + "' is not an unsigned integer");
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) return invalid("'" + std::string(text) + "' is too large");
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
  if (!number) return invalid("'" + std::string(given) + "' is not a size (an integer with optional K, M or G)");
  if (*number > UINT64_MAX / multiplier) return invalid("'" + std::string(given) + "' is too large");
  return *number * multiplier;
}

Result<bool> parse_bool(std::string_view text) {
  const std::string v = lower(trim(text));
  if (v == "1" || v == "true" || v == "yes" || v == "y" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "n" || v == "off") return false;
  return invalid("'" + std::string(text) + "' is not a boolean (1/0, true/false, yes/no)");
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

Result<ParamSet> apply_schema(const File& file, const Section& section, std::span<const ParamSpec> specs) {
  ParamSet out;
  for (const ParamSpec& spec : specs) {
    // An empty default means "no default", except for strings, where it is "".
    if (spec.default_value.empty() && spec.kind != Kind::kString) continue;
    const Status s =
        store_value(spec, spec.default_value, "default", "built-in default of " + std::string(spec.name), out);
    FJORD_ASSERT_MSG(s.is_ok(), "a built-in default is outside its own range");
  }
  const std::string default_name = section.name + " default";
  auto apply = [&](const Section& from) -> Status {
    for (const Entry& entry : from.entries) {
      const std::string context = where(file, entry.line) + ": [" + from.name + "] " + entry.key;
      const ParamSpec* spec = find_spec(specs, entry.key);
      if (!spec) return invalid(context + ": unknown key; known keys: " + known_keys(specs));
      if (Status s = store_value(*spec, entry.value, where(file, entry.line), context, out); !s) return s;
    }
    return Status::ok();
  };
  for (const Section& candidate : file.sections)
    if (candidate.name == default_name)
      if (Status s = apply(candidate); !s) return s;
  if (Status s = apply(section); !s) return s;
  // A key given twice in the same section is almost always a mistake.
  for (std::size_t i = 0; i < section.entries.size(); ++i)
    for (std::size_t j = i + 1; j < section.entries.size(); ++j)
      if (lower(section.entries[i].key) == lower(section.entries[j].key))
        return invalid(where(file, section.entries[j].line) + ": [" + section.name + "] " + section.entries[j].key +
                       ": given twice (first at line " + std::to_string(section.entries[i].line) + ")");
  for (const ParamSpec& spec : specs)
    if (spec.required && !out.has(spec.name))
      return invalid(where(file, section.line) + ": [" + section.name + "] missing required key " +
                     std::string(spec.name) + " (" + describe_range(spec) + ")");
  return out;
}

}  // namespace fjord::config
