// A minimal JSON reader for the latency_bench tests: parses one document
// strictly (objects, arrays, strings with escapes, numbers, true/false/null)
// so the tests can check that what the program prints is valid JSON with the
// promised fields. Test-only; not fast, not for production input.
#pragma once

#include <cctype>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fjord::bench::test {

struct JsonValue {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject } type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string text;
  std::vector<JsonValue> items;
  std::map<std::string, JsonValue> fields;

  bool has(const std::string& key) const { return type == Type::kObject && fields.count(key) != 0; }
  const JsonValue& operator[](const std::string& key) const { return fields.at(key); }
  const JsonValue& operator[](std::size_t i) const { return items.at(i); }
};

class JsonReader {
 public:
  // nullopt unless `text` is exactly one valid JSON value (surrounding space allowed).
  static std::optional<JsonValue> parse(std::string_view text) {
    JsonReader r(text);
    JsonValue v;
    if (!r.value(v)) return std::nullopt;
    r.space();
    if (r.at_ != r.text_.size()) return std::nullopt;
    return v;
  }

 private:
  explicit JsonReader(std::string_view text) : text_(text) {}

  void space() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
  }
  bool literal(std::string_view word) {
    if (text_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
  }
  bool value(JsonValue& v) {
    space();
    if (at_ >= text_.size()) return false;
    const char c = text_[at_];
    if (c == '{') return object(v);
    if (c == '[') return array(v);
    if (c == '"') {
      v.type = JsonValue::Type::kString;
      return string(v.text);
    }
    if (literal("true")) {
      v.type = JsonValue::Type::kBool;
      v.boolean = true;
      return true;
    }
    if (literal("false")) {
      v.type = JsonValue::Type::kBool;
      return true;
    }
    if (literal("null")) return true;
    return number(v);
  }
  bool number(JsonValue& v) {
    const std::size_t start = at_;
    if (at_ < text_.size() && text_[at_] == '-') ++at_;
    while (at_ < text_.size() && (std::isdigit(static_cast<unsigned char>(text_[at_])) || text_[at_] == '.' ||
                                  text_[at_] == 'e' || text_[at_] == 'E' || text_[at_] == '+' || text_[at_] == '-'))
      ++at_;
    if (at_ == start) return false;
    const std::string digits(text_.substr(start, at_ - start));
    char* end = nullptr;
    v.type = JsonValue::Type::kNumber;
    v.number = std::strtod(digits.c_str(), &end);
    return end == digits.c_str() + digits.size();
  }
  bool string(std::string& out) {
    ++at_;  // opening quote
    while (at_ < text_.size() && text_[at_] != '"') {
      char c = text_[at_++];
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c == '\\') {
        if (at_ >= text_.size()) return false;
        const char e = text_[at_++];
        if (e == 'u') {
          if (at_ + 4 > text_.size()) return false;
          c = static_cast<char>(std::strtol(std::string(text_.substr(at_, 4)).c_str(), nullptr, 16));
          at_ += 4;
        } else {
          const std::string_view from = "\"\\/bfnrt", to = "\"\\/\b\f\n\r\t";
          const std::size_t k = from.find(e);
          if (k == std::string_view::npos) return false;
          c = to[k];
        }
      }
      out += c;
    }
    if (at_ >= text_.size()) return false;
    ++at_;  // closing quote
    return true;
  }
  bool array(JsonValue& v) {
    v.type = JsonValue::Type::kArray;
    ++at_;
    space();
    if (at_ < text_.size() && text_[at_] == ']') return ++at_, true;
    for (;;) {
      JsonValue item;
      if (!value(item)) return false;
      v.items.push_back(std::move(item));
      space();
      if (at_ >= text_.size()) return false;
      if (text_[at_] == ']') return ++at_, true;
      if (text_[at_++] != ',') return false;
    }
  }
  bool object(JsonValue& v) {
    v.type = JsonValue::Type::kObject;
    ++at_;
    space();
    if (at_ < text_.size() && text_[at_] == '}') return ++at_, true;
    for (;;) {
      space();
      std::string key;
      if (at_ >= text_.size() || text_[at_] != '"' || !string(key)) return false;
      space();
      if (at_ >= text_.size() || text_[at_++] != ':') return false;
      JsonValue item;
      if (!value(item) || v.fields.count(key) != 0) return false;  // duplicate keys are a bug for us
      v.fields.emplace(std::move(key), std::move(item));
      space();
      if (at_ >= text_.size()) return false;
      if (text_[at_] == '}') return ++at_, true;
      if (text_[at_++] != ',') return false;
    }
  }

  std::string_view text_;
  std::size_t at_ = 0;
};

}  // namespace fjord::bench::test
