// The library's environment variables, read once at load (internal header
// of libfjord-sockets). docs/sockets.md lists them. Any thread may read
// settings() after the library's constructor ran.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fjord::sockets {

struct Settings {
  bool enabled = true;                     // FJORD_SOCKETS=off disables acceleration
  bool log = false;                        // FJORD_SOCKETS_LOG=1: one line per connection
  uint64_t spin_ns = 0;                    // FJORD_SOCKETS_SPIN_US: spin before sleeping
  uint64_t connect_wait_ns = 200'000'000;  // FJORD_SOCKETS_CONNECT_WAIT_MS: wait for the answer
  uint64_t accept_wait_ns = 20'000'000;    // FJORD_SOCKETS_ACCEPT_WAIT_MS: wait for a hello
  std::size_t ring_bytes = 256 * 1024;     // FJORD_SOCKETS_RING_KB: each direction's ring
};

const Settings& settings();

// Writes "libfjord-sockets: <message>" to stderr when FJORD_SOCKETS_LOG=1.
void log_path(const char* format, ...) __attribute__((format(printf, 1, 2)));

// CLOCK_MONOTONIC in nanoseconds.
uint64_t now_ns();

}  // namespace fjord::sockets
