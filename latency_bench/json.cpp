#include "json.h"

#include <cmath>
#include <cstdio>

#include "fjord/base/assert.h"

namespace fjord::bench {

std::string json_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  return out;
}

void JsonWriter::before_value() {
  if (stack_.empty()) {
    FJORD_ASSERT_MSG(out_.empty(), "one top-level value only");
    return;
  }
  Level& level = stack_.back();
  if (level.is_object) {
    FJORD_ASSERT_MSG(level.key_pending, "a value inside an object needs a key");
    level.key_pending = false;
  } else {
    if (level.has_items) out_ += ',';
    level.has_items = true;
  }
}

void JsonWriter::key(std::string_view name) {
  FJORD_ASSERT(!stack_.empty());
  FJORD_ASSERT(stack_.back().is_object);
  FJORD_ASSERT(!stack_.back().key_pending);
  Level& level = stack_.back();
  if (level.has_items) out_ += ',';
  level.has_items = true;
  level.key_pending = true;
  out_ += '"';
  out_ += json_escape(name);
  out_ += "\":";
}

void JsonWriter::begin_object() {
  before_value();
  out_ += '{';
  stack_.push_back({true, false, false});
}

void JsonWriter::end_object() {
  FJORD_ASSERT(!stack_.empty());
  FJORD_ASSERT(stack_.back().is_object);
  FJORD_ASSERT(!stack_.back().key_pending);
  stack_.pop_back();
  out_ += '}';
}

void JsonWriter::begin_array() {
  before_value();
  out_ += '[';
  stack_.push_back({false, false, false});
}

void JsonWriter::end_array() {
  FJORD_ASSERT(!stack_.empty());
  FJORD_ASSERT(!stack_.back().is_object);
  stack_.pop_back();
  out_ += ']';
}

void JsonWriter::value(std::string_view text) {
  before_value();
  out_ += '"';
  out_ += json_escape(text);
  out_ += '"';
}

void JsonWriter::value(uint64_t number) {
  before_value();
  out_ += std::to_string(number);
}

void JsonWriter::value(int number) {
  before_value();
  out_ += std::to_string(number);
}

void JsonWriter::value(double number) {
  before_value();
  if (!std::isfinite(number)) {
    out_ += "null";
    return;
  }
  char text[64];
  // Three decimals are plenty for ns, GB/s and ratios; huge values in exponent form.
  std::snprintf(text, sizeof text, std::fabs(number) < 1e15 ? "%.3f" : "%.6e", number);
  out_ += text;
}

void JsonWriter::value(bool flag) {
  before_value();
  out_ += flag ? "true" : "false";
}

void JsonWriter::null() {
  before_value();
  out_ += "null";
}

}  // namespace fjord::bench
