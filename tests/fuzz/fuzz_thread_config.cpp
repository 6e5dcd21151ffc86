// libFuzzer target: the ThreadConfig parser on arbitrary text. A string that
// parses must format back to canonical text that parses to the same threads,
// and formatting that again gives the same text.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "fjord/engine/thread_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto layout = fjord::engine::parse_thread_config(text);
  if (!layout) {
    if (layout.status().message().rfind("ThreadConfig: ", 0) != 0) std::abort();  // errors say where they come from
    return 0;
  }
  const std::string canonical = fjord::engine::format_thread_config(*layout);
  auto again = fjord::engine::parse_thread_config(canonical);
  if (!again || again->threads != layout->threads) std::abort();
  if (fjord::engine::format_thread_config(*again) != canonical) std::abort();
  return 0;
}
