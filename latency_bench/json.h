// A small JSON writer: objects, arrays, strings (escaped), numbers, booleans.
// Enough for latency_bench's one-object reports; it checks nesting with
// assertions, never produces invalid JSON from valid calls.
//
// Slow path; one thread per writer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fjord::bench {

class JsonWriter {
 public:
  void begin_object();
  void end_object();
  void begin_array();
  void end_array();
  // Inside an object: the next value's key.
  void key(std::string_view name);

  void value(std::string_view text);
  void value(const char* text) { value(std::string_view(text)); }
  void value(uint64_t number);
  void value(int number);
  void value(double number);  // non-finite numbers become null
  void value(bool flag);
  void null();
  // key(name), then value(v): one member of an object.
  void field(std::string_view name, std::string_view text) {
    key(name);
    value(text);
  }
  void field(std::string_view name, uint64_t number) {
    key(name);
    value(number);
  }
  void field(std::string_view name, double number) {
    key(name);
    value(number);
  }

  // The document so far; complete once every object/array is closed.
  const std::string& text() const { return out_; }
  bool complete() const { return stack_.empty() && !out_.empty(); }

 private:
  void before_value();

  std::string out_;
  struct Level {
    bool is_object;
    bool has_items;
    bool key_pending;
  };
  std::vector<Level> stack_;
};

std::string json_escape(std::string_view text);

}  // namespace fjord::bench
