// Environment variables of libfjord-sockets, and its one log line.
#include "settings.h"

#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "fjord/base/mirrored_map.h"

namespace fjord::sockets {
namespace {

// A malformed value keeps the default and says so once (stderr is the only
// channel a preloaded library has).
uint64_t number_from_env(const char* name, uint64_t fallback, uint64_t max) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (*end != '\0' || value > max) {
    std::fprintf(stderr, "libfjord-sockets: %s=%s is not a number from 0 to %llu; using %llu\n", name, text,
                 static_cast<unsigned long long>(max), static_cast<unsigned long long>(fallback));
    return fallback;
  }
  return value;
}

Settings read_settings() {
  Settings s;
  const char* on = std::getenv("FJORD_SOCKETS");
  s.enabled = on == nullptr || (std::strcmp(on, "off") != 0 && std::strcmp(on, "0") != 0);
  const char* log = std::getenv("FJORD_SOCKETS_LOG");
  s.log = log != nullptr && std::strcmp(log, "1") == 0;
  s.spin_ns = number_from_env("FJORD_SOCKETS_SPIN_US", s.spin_ns / 1000, 1'000'000) * 1000;
  s.connect_wait_ns =
      number_from_env("FJORD_SOCKETS_CONNECT_WAIT_MS", s.connect_wait_ns / 1'000'000, 60'000) * 1'000'000;
  s.accept_wait_ns = number_from_env("FJORD_SOCKETS_ACCEPT_WAIT_MS", s.accept_wait_ns / 1'000'000, 60'000) * 1'000'000;
  const uint64_t ring_kb = number_from_env("FJORD_SOCKETS_RING_KB", s.ring_bytes / 1024, 1024 * 1024);
  s.ring_bytes = round_up_to_pages(std::max<uint64_t>(ring_kb, 16) * 1024);
  return s;
}

}  // namespace

const Settings& settings() {
  static const Settings s = read_settings();
  return s;
}

void log_path(const char* format, ...) {
  if (!settings().log) return;
  char line[512];
  int used = std::snprintf(line, sizeof line, "libfjord-sockets[%d]: ", static_cast<int>(::getpid()));
  va_list args;
  va_start(args, format);
  std::vsnprintf(line + used, sizeof line - used, format, args);
  va_end(args);
  std::fprintf(stderr, "%s\n", line);
}

uint64_t now_ns() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(t.tv_nsec);
}

}  // namespace fjord::sockets
