// parse_thread_config: NDB's ThreadConfig grammar, in two passes. The first
// (Parser) reads the text into groups of key=value items, each remembering
// where it stood; the second (build_layout) checks the values, the counts and
// the CPU claims across groups, and expands groups into threads. Every error
// names a position and the text found there, and says what was expected.
//
// Grammar and checks follow mysql-server storage/ndb/src/common/util/
// ParseThreadConfiguration.cpp (tokens, whitespace, case-insensitive names,
// "a ',' then a digit continues a CPU list", a key at most once per group)
// and storage/ndb/src/kernel/vm/mt_thr_config.cpp (one binding key per group,
// realtime=1 excludes thread_prio, cpubind needs a CPU per thread, distinct
// cpusets must not overlap, a cpubind CPU must not lie in a cpuset).
#include <algorithm>
#include <array>
#include <bitset>
#include <cctype>
#include <charconv>
#include <optional>
#include <string>
#include <vector>

#include "fjord/engine/thread_config.h"
#include "thread_types.h"

namespace fjord::engine {
namespace {

using detail::ThreadTypeTraits;
using detail::traits_of;

enum Key : uint8_t {
  kCount,
  kCpubind,
  kCpubindExclusive,
  kCpuset,
  kCpusetExclusive,
  kRealtime,
  kSpintime,
  kThreadPrio,
  kNosend,
  kKeyCount,
};

constexpr std::array<const char*, kKeyCount> kKeyNames = {"count",    "cpubind",          "cpubind_exclusive",
                                                          "cpuset",   "cpuset_exclusive", "realtime",
                                                          "spintime", "thread_prio",      "nosend"};
constexpr const char* kKeyList =
    "one of count, cpubind, cpubind_exclusive, cpuset, cpuset_exclusive, realtime, spintime, thread_prio, nosend";
constexpr const char* kCpuListExpected = "a CPU list such as 0-3,8";
constexpr size_t kExcerptMax = 40;  // longest quoted text in an error

bool is_cpu_key(Key key) { return key >= kCpubind && key <= kCpusetExclusive; }
bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::optional<Key> key_from_name(std::string_view name) {
  for (size_t i = 0; i < kKeyNames.size(); ++i) {
    const std::string_view candidate = kKeyNames[i];
    if (candidate.size() != name.size()) continue;
    bool same = true;
    for (size_t j = 0; j < name.size() && same; ++j) {
      same = std::tolower(static_cast<unsigned char>(name[j])) == candidate[j];
    }
    if (same) return static_cast<Key>(i);
  }
  return std::nullopt;
}

struct Span {
  size_t begin = 0;
  size_t end = 0;  // one past the last character
};

struct Value {
  bool given = false;
  Span span;  // the whole key=value item
  uint32_t number = 0;
  std::vector<int> cpus;  // ascending, unique
};

struct Group {
  ThreadType type = ThreadType::kLdm;
  Span span;            // type through the closing '}'
  bool braced = false;  // has "={...}"
  std::array<Value, kKeyCount> values;
};

// "ThreadConfig: at position P ('TEXT'): PROBLEM; expected WHAT"
Status error_at(std::string_view text, Span span, const std::string& problem, const std::string& expected) {
  std::string where = "ThreadConfig: at position " + std::to_string(span.begin);
  if (span.begin >= text.size()) {
    where += " (end of text)";
  } else {
    const size_t length = std::max<size_t>(1, std::min(span.end, text.size()) - std::min(span.begin, span.end));
    std::string excerpt(text.substr(span.begin, std::min(length, kExcerptMax)));
    if (length > kExcerptMax) excerpt += "...";
    where += " ('" + excerpt + "')";
  }
  return Status(StatusCode::kInvalidArgument, where + ": " + problem + "; expected " + expected);
}

std::string quoted(std::string_view text, Span span) {
  return "'" + std::string(text.substr(span.begin, span.end - span.begin)) + "'";
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}
  Result<std::vector<Group>> parse_groups();

 private:
  Status parse_group(Group& group);
  Status parse_braces(Group& group);
  Status parse_item(Group& group, size_t open_brace);
  Status parse_number(Key key, size_t item_begin, Value& value);
  Status parse_cpu_list(Key key, size_t item_begin, Value& value);
  Status parse_cpu_range(Key key, size_t item_begin, std::bitset<kCpuIdMax + 1>& cpus);
  Result<int> parse_cpu(Key key, size_t item_begin);
  Status unclosed(size_t open_brace) const {
    return error_at(text_, {open_brace, text_.size()}, "'{' is never closed", "'}' after the last key=value");
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }
  void skip_space() {
    while (!at_end() && std::isspace(static_cast<unsigned char>(text_[pos_])) != 0) ++pos_;
  }
  std::string_view take_word() {
    const size_t begin = pos_;
    while (!at_end() && is_word_char(text_[pos_])) ++pos_;
    return text_.substr(begin, pos_ - begin);
  }
  // End of the excerpt for unexpected text at `from`: up to the next ',' or
  // '}' (or, with stop_at_brace false, the next ',' only).
  size_t excerpt_end(size_t from, bool stop_at_brace) const {
    const size_t end = text_.find_first_of(stop_at_brace ? ",}" : ",", from + 1);
    return end == std::string_view::npos ? text_.size() : end;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

Result<std::vector<Group>> Parser::parse_groups() {
  std::vector<Group> groups;
  skip_space();
  if (at_end()) return error_at(text_, {pos_, pos_}, "empty ThreadConfig", "a thread type such as ldm={count=4}");
  while (true) {
    Group group;
    if (Status status = parse_group(group); !status) return status;
    groups.push_back(std::move(group));
    skip_space();
    if (at_end()) return groups;
    if (peek() != ',') {
      const Group& last = groups.back();
      return error_at(
          text_, {pos_, excerpt_end(pos_, false)}, "unexpected text after " + quoted(text_, last.span),
          std::string(last.braced ? "" : "'={...}', ") + "',' and another thread type, or the end of the text");
    }
    ++pos_;
    skip_space();
  }
}

Status Parser::parse_group(Group& group) {
  group.span.begin = pos_;
  const std::string_view word = take_word();
  if (word.empty()) {
    const std::string problem = at_end() ? "missing thread type after ','" : "missing thread type";
    return error_at(text_, {pos_, excerpt_end(pos_, false)}, problem,
                    std::string("one of ") + detail::thread_type_list());
  }
  const std::optional<ThreadType> type = detail::thread_type_from_name(word);
  if (!type) {
    return error_at(text_, {group.span.begin, pos_}, "unknown thread type '" + std::string(word) + "'",
                    std::string("one of ") + detail::thread_type_list());
  }
  group.type = *type;
  group.span.end = pos_;
  skip_space();
  if (peek() != '=') {
    pos_ = group.span.end;  // a bare type: what follows is for parse_groups
    return Status::ok();
  }
  ++pos_;
  skip_space();
  group.braced = true;
  if (Status status = parse_braces(group); !status) return status;
  group.span.end = pos_;
  return Status::ok();
}

Status Parser::parse_braces(Group& group) {
  if (peek() != '{') {
    return error_at(text_, {pos_, excerpt_end(pos_, false)},
                    "missing '{' after '" + std::string(traits_of(group.type).name) + "='", "'{' and key=value items");
  }
  const size_t open_brace = pos_++;
  skip_space();
  if (peek() == '}') {
    ++pos_;
    return Status::ok();
  }
  while (true) {
    if (Status status = parse_item(group, open_brace); !status) return status;
    skip_space();
    if (at_end()) return unclosed(open_brace);
    if (peek() == '}') {
      ++pos_;
      return Status::ok();
    }
    if (peek() != ',') {
      return error_at(text_, {pos_, excerpt_end(pos_, true)}, "unexpected text after a key=value item",
                      "',' and another key, or '}'");
    }
    ++pos_;
    skip_space();
    if (peek() == '}' || peek() == ',') {
      return error_at(text_, {pos_, pos_ + 1}, "missing key after ','", kKeyList);
    }
  }
}

Status Parser::parse_item(Group& group, size_t open_brace) {
  if (at_end()) return unclosed(open_brace);
  const size_t item_begin = pos_;
  const std::string_view word = take_word();
  const Span item{item_begin, excerpt_end(item_begin, true)};
  if (word.empty()) return error_at(text_, item, "missing key", kKeyList);
  const std::optional<Key> key = key_from_name(word);
  if (!key) {
    if (detail::thread_type_from_name(word)) {
      return error_at(
          text_, item,
          "thread type '" + std::string(word) + "' inside the '{' opened at position " + std::to_string(open_brace),
          "'}' to close that group first");
    }
    return error_at(text_, item, "unknown key '" + std::string(word) + "'", kKeyList);
  }
  Value& value = group.values[*key];
  if (value.given) {
    return error_at(text_, item, "key '" + std::string(kKeyNames[*key]) + "' given twice in one group",
                    "each key at most once per group");
  }
  skip_space();
  if (peek() != '=') {
    return error_at(text_, item, "missing '=' after key '" + std::string(kKeyNames[*key]) + "'",
                    std::string(kKeyNames[*key]) + "=<value>");
  }
  ++pos_;
  skip_space();
  Status status = is_cpu_key(*key) ? parse_cpu_list(*key, item_begin, value) : parse_number(*key, item_begin, value);
  if (!status) return status;
  value.given = true;
  value.span = {item_begin, pos_};
  return Status::ok();
}

Status Parser::parse_number(Key key, size_t item_begin, Value& value) {
  const size_t begin = pos_;
  while (!at_end() && std::isspace(static_cast<unsigned char>(peek())) == 0 && peek() != ',' && peek() != '}') ++pos_;
  const std::string_view token = text_.substr(begin, pos_ - begin);
  const std::string name = kKeyNames[key];
  const Span item{item_begin, pos_};
  if (token.empty()) return error_at(text_, item, "empty value for " + name, "a decimal number");
  for (char c : token) {
    if (!is_digit(c))
      return error_at(text_, item, "bad number '" + std::string(token) + "' for " + name, "a decimal number");
  }
  uint64_t number = 0;
  const auto [end, error] = std::from_chars(token.data(), token.data() + token.size(), number);
  if (error != std::errc() || end != token.data() + token.size() || number > UINT32_MAX) {
    return error_at(text_, item, "number " + std::string(token) + " for " + name + " is out of range",
                    "at most " + std::to_string(UINT32_MAX));
  }
  value.number = static_cast<uint32_t>(number);
  return Status::ok();
}

Status Parser::parse_cpu_list(Key key, size_t item_begin, Value& value) {
  if (at_end() || peek() == ',' || peek() == '}') {
    return error_at(text_, {item_begin, pos_}, "empty value for " + std::string(kKeyNames[key]), kCpuListExpected);
  }
  std::bitset<kCpuIdMax + 1> cpus;  // bounded whatever the text repeats
  while (true) {
    if (Status status = parse_cpu_range(key, item_begin, cpus); !status) return status;
    const size_t after_range = pos_;
    skip_space();
    if (peek() == ',') {
      ++pos_;
      skip_space();
      if (is_digit(peek())) continue;
    }
    pos_ = after_range;  // that ',' separates the next key=value item
    break;
  }
  for (int cpu = 0; cpu <= kCpuIdMax; ++cpu) {
    if (cpus.test(static_cast<size_t>(cpu))) value.cpus.push_back(cpu);
  }
  return Status::ok();
}

Status Parser::parse_cpu_range(Key key, size_t item_begin, std::bitset<kCpuIdMax + 1>& cpus) {
  const size_t range_begin = pos_;
  Result<int> low = parse_cpu(key, item_begin);
  if (!low) return low.status();
  int high = *low;
  const size_t after_low = pos_;
  skip_space();
  if (peek() == '-') {
    ++pos_;
    skip_space();
    Result<int> parsed = parse_cpu(key, item_begin);
    if (!parsed) return parsed.status();
    high = *parsed;
    if (high < *low) {
      return error_at(text_, {item_begin, pos_},
                      "CPU range " + std::string(text_.substr(range_begin, pos_ - range_begin)) + " in " +
                          kKeyNames[key] + " is reversed",
                      "low-high, such as 3-5");
    }
  } else {
    pos_ = after_low;
  }
  for (int cpu = *low; cpu <= high; ++cpu) cpus.set(static_cast<size_t>(cpu));
  return Status::ok();
}

Result<int> Parser::parse_cpu(Key key, size_t item_begin) {
  const size_t begin = pos_;
  while (is_digit(peek())) ++pos_;
  if (pos_ == begin) {
    return error_at(text_, {item_begin, excerpt_end(item_begin, true)},
                    "bad CPU list for " + std::string(kKeyNames[key]), kCpuListExpected);
  }
  const std::string_view digits = text_.substr(begin, pos_ - begin);
  uint64_t cpu = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), cpu);
  if (error != std::errc() || end != digits.data() + digits.size() || cpu > static_cast<uint64_t>(kCpuIdMax)) {
    return error_at(text_, {item_begin, pos_},
                    "CPU " + std::string(digits) + " in " + kKeyNames[key] + " is out of range",
                    "CPU numbers 0.." + std::to_string(kCpuIdMax));
  }
  return static_cast<int>(cpu);
}

// ---- second pass: values, counts, CPU claims, expansion into threads ----

std::string threads_text(uint64_t count, ThreadType type) {
  return std::to_string(count) + " " + traits_of(type).name + (count == 1 ? " thread" : " threads");
}

// The later of two items, for errors about a pair: the reader has seen the
// first one by the time the second one makes the pair wrong.
const Value& later(const Value& a, const Value& b) { return a.span.begin > b.span.begin ? a : b; }
const Value& earlier(const Value& a, const Value& b) { return a.span.begin > b.span.begin ? b : a; }
Key key_of(const Group& group, const Value& value) { return static_cast<Key>(&value - group.values.data()); }

Status check_ranges(std::string_view text, const Group& group) {
  const auto& values = group.values;
  for (Key key : {kRealtime, kNosend}) {
    if (values[key].given && values[key].number > 1) {
      return error_at(text, values[key].span,
                      std::string(kKeyNames[key]) + " " + std::to_string(values[key].number) + " is out of range",
                      "0 or 1");
    }
  }
  if (values[kSpintime].given && values[kSpintime].number > kSpintimeMaxUs) {
    return error_at(text, values[kSpintime].span,
                    "spintime " + std::to_string(values[kSpintime].number) + " is too long",
                    "at most " + std::to_string(kSpintimeMaxUs) + " (microseconds)");
  }
  if (values[kThreadPrio].given && values[kThreadPrio].number > kThreadPrioMax) {
    return error_at(
        text, values[kThreadPrio].span,
        "thread_prio " + std::to_string(values[kThreadPrio].number) + " is out of range",
        "0.." + std::to_string(kThreadPrioMax) + " (" + std::to_string(kThreadPrioMax) + " is the highest)");
  }
  return Status::ok();
}

// The binding key of a group, or nullopt. Call after check_combinations.
std::optional<Key> binding_key_of(const Group& group) {
  for (Key key : {kCpubind, kCpubindExclusive, kCpuset, kCpusetExclusive}) {
    if (group.values[key].given) return key;
  }
  return std::nullopt;
}

Status check_combinations(std::string_view text, const Group& group) {
  const auto& values = group.values;
  const Value* binding = nullptr;
  for (Key key : {kCpubind, kCpubindExclusive, kCpuset, kCpusetExclusive}) {
    if (!values[key].given) continue;
    if (binding != nullptr) {
      const Value& second = later(*binding, values[key]);
      const Value& first = earlier(*binding, values[key]);
      return error_at(
          text, second.span,
          std::string(kKeyNames[key_of(group, second)]) + " given together with " + kKeyNames[key_of(group, first)],
          "at most one of cpubind, cpubind_exclusive, cpuset, cpuset_exclusive per group");
    }
    binding = &values[key];
  }
  if (values[kRealtime].given && values[kRealtime].number == 1 && values[kThreadPrio].given) {
    const Value& second = later(values[kRealtime], values[kThreadPrio]);
    return error_at(text, second.span, "realtime=1 given together with thread_prio",
                    "only one of them (both set the OS scheduling priority)");
  }
  const ThreadTypeTraits& traits = traits_of(group.type);
  if (values[kSpintime].given && !traits.may_spin) {
    return error_at(text, values[kSpintime].span, std::string("spintime on ") + traits.name + " threads",
                    "spintime only on ldm, tc, recv, send, main and rep threads (io and wd do not spin)");
  }
  if (values[kNosend].given && !traits.may_nosend) {
    return error_at(text, values[kNosend].span, std::string("nosend on ") + traits.name + " threads",
                    "nosend only on ldm, tc, main and rep threads");
  }
  return Status::ok();
}

// Threads the group adds, after checking the running total of its type.
Result<uint32_t> check_count(std::string_view text, const Group& group,
                             std::array<uint32_t, kThreadTypeCount>& totals) {
  const ThreadTypeTraits& traits = traits_of(group.type);
  uint32_t& total = totals[static_cast<size_t>(group.type)];
  if (traits.count_ignored) {
    if (total > 0) {
      return error_at(text, group.span, std::string(traits.name) + " given in two groups",
                      "io and wd at most once each (their count is ignored)");
    }
    total = 1;
    return 1u;
  }
  const Value& count = group.values[kCount];
  const uint32_t threads = count.given ? count.number : 1;
  if (threads == 0 && traits.min_total > 0) {
    return error_at(text, count.span, std::string("count 0 for ") + traits.name,
                    traits.max_total == 1 ? detail::allowed_total_text(group.type)
                                          : "at least 1 (only tc and send may have 0 threads)");
  }
  const uint64_t new_total = static_cast<uint64_t>(total) + threads;
  if (new_total > traits.max_total) {
    return error_at(text, group.span, threads_text(new_total, group.type) + " in total",
                    detail::allowed_total_text(group.type));
  }
  total = static_cast<uint32_t>(new_total);
  return threads;
}

// CPUs one group places its threads on, remembered to check later groups.
struct Claim {
  Key key = kCpubind;
  bool is_set = false;
  bool exclusive = false;
  std::vector<int> cpus;  // for cpubind: only the CPUs its threads take
  Span span;
};

int first_common_cpu(const std::vector<int>& a, const std::vector<int>& b) {
  auto left = a.begin();
  auto right = b.begin();
  while (left != a.end() && right != b.end()) {
    if (*left == *right) return *left;
    if (*left < *right) {
      ++left;
    } else {
      ++right;
    }
  }
  return -1;
}

Status check_claim_pair(std::string_view text, const Claim& other, const Claim& claim) {
  const int common = first_common_cpu(other.cpus, claim.cpus);
  const std::string name = kKeyNames[claim.key];
  const std::string other_text = std::string(kKeyNames[other.key]) + " " + format_cpu_list(other.cpus) +
                                 " at position " + std::to_string(other.span.begin);
  const std::string cpu = std::to_string(common);
  if (claim.is_set && other.is_set) {
    if (claim.cpus == other.cpus) {
      if (claim.exclusive == other.exclusive) return Status::ok();  // one set shared by several groups
      return error_at(text, claim.span, name + " " + format_cpu_list(claim.cpus) + " is also given as " + other_text,
                      "the same key in every group that shares a set");
    }
    if (common < 0) return Status::ok();
    return error_at(text, claim.span, name + " " + format_cpu_list(claim.cpus) + " overlaps " + other_text,
                    "each CPU in at most one cpuset");
  }
  if (common < 0) return Status::ok();
  if (claim.is_set != other.is_set) {
    const std::string problem =
        claim.is_set ? name + " " + format_cpu_list(claim.cpus) + " contains CPU " + cpu + " of " + other_text
                     : name + " CPU " + cpu + " lies in " + other_text;
    return error_at(text, claim.span, problem, "bound CPUs outside every cpuset");
  }
  if (!claim.exclusive && !other.exclusive) return Status::ok();  // NDB lets threads share a bound CPU
  return error_at(text, claim.span, name + " CPU " + cpu + " is also bound by " + other_text,
                  "an exclusively bound CPU used by one thread only");
}

Status claim_cpus(std::string_view text, const Group& group, uint32_t count, std::vector<Claim>& claims) {
  const std::optional<Key> key = binding_key_of(group);
  if (!key || count == 0) return Status::ok();
  const Value& value = group.values[*key];
  Claim claim;
  claim.key = *key;
  claim.is_set = *key == kCpuset || *key == kCpusetExclusive;
  claim.exclusive = *key == kCpubindExclusive || *key == kCpusetExclusive;
  claim.span = value.span;
  if (claim.is_set) {
    claim.cpus = value.cpus;
  } else {
    if (value.cpus.size() < count) {
      const size_t given = value.cpus.size();
      return error_at(text, value.span,
                      std::string(kKeyNames[*key]) + " gives " + std::to_string(given) +
                          (given == 1 ? " CPU (" : " CPUs (") + format_cpu_list(value.cpus) + ") for " +
                          threads_text(count, group.type),
                      "at least one CPU per thread");
    }
    claim.cpus.assign(value.cpus.begin(), value.cpus.begin() + count);
  }
  for (const Claim& other : claims) {
    if (Status status = check_claim_pair(text, other, claim); !status) return status;
  }
  claims.push_back(std::move(claim));
  return Status::ok();
}

void expand_group(const Group& group, uint32_t count, ThreadLayout& layout) {
  const auto& values = group.values;
  const std::optional<Key> key = binding_key_of(group);
  const uint32_t first = layout.count(group.type);
  for (uint32_t i = 0; i < count; ++i) {
    ThreadSpec spec;
    spec.type = group.type;
    spec.instance = first + i;
    spec.realtime = values[kRealtime].given && values[kRealtime].number == 1;
    spec.spintime_us = values[kSpintime].given ? values[kSpintime].number : 0;
    spec.thread_prio = values[kThreadPrio].given ? static_cast<int>(values[kThreadPrio].number) : -1;
    spec.nosend = values[kNosend].given && values[kNosend].number == 1;
    if (key) {
      const bool bind = *key == kCpubind || *key == kCpubindExclusive;
      spec.binding = bind ? ThreadSpec::Binding::kBind : ThreadSpec::Binding::kSet;
      spec.exclusive = *key == kCpubindExclusive || *key == kCpusetExclusive;
      spec.cpus = bind ? std::vector<int>{values[*key].cpus[i]} : values[*key].cpus;
    }
    layout.threads.push_back(std::move(spec));
  }
}

Result<ThreadLayout> build_layout(std::string_view text, const std::vector<Group>& groups) {
  ThreadLayout layout;
  layout.source = "ThreadConfig";
  std::array<uint32_t, kThreadTypeCount> totals{};
  std::array<const Group*, kThreadTypeCount> last_group{};
  std::vector<Claim> claims;
  for (const Group& group : groups) {
    if (Status status = check_ranges(text, group); !status) return status;
    if (Status status = check_combinations(text, group); !status) return status;
    Result<uint32_t> count = check_count(text, group, totals);
    if (!count) return count.status();
    if (Status status = claim_cpus(text, group, *count, claims); !status) return status;
    expand_group(group, *count, layout);
    last_group[static_cast<size_t>(group.type)] = &group;
  }
  const Group* last_ldm = last_group[static_cast<size_t>(ThreadType::kLdm)];
  const uint32_t ldm_total = totals[static_cast<size_t>(ThreadType::kLdm)];
  if (last_ldm != nullptr && !detail::is_allowed_ldm_count(ldm_total)) {
    return error_at(text, last_ldm->span, threads_text(ldm_total, ThreadType::kLdm) + " in total",
                    detail::allowed_total_text(ThreadType::kLdm));
  }
  for (size_t i = 0; i < kThreadTypeCount; ++i) {
    const auto type = static_cast<ThreadType>(i);
    if (last_group[i] == nullptr) detail::append_plain_threads(layout, type, traits_of(type).default_count);
  }
  detail::sort_threads(layout);
  return layout;
}

}  // namespace

Result<ThreadLayout> parse_thread_config(std::string_view text) {
  Parser parser(text);
  Result<std::vector<Group>> groups = parser.parse_groups();
  if (!groups) return groups.status();
  return build_layout(text, *groups);
}

}  // namespace fjord::engine
