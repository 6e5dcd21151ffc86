// libFuzzer target: the config parser and link-table loader on arbitrary
// text, every error collected. Errors are fine; crashes, hangs and
// over-reads are not.
#include <cstdint>
#include <string>

#include "fjord/tcp/tcp.h"
#include "fjord/transport/config_file.h"
#include "fjord/transport/link_config.h"
#include "fjord/transport/registry.h"

using namespace fjord;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static transport::TransporterRegistry* registry = [] {
    auto* r = new transport::TransporterRegistry();
    (void)tcp::register_tcp_transporter(*r);
    return r;
  }();
  const std::string text(reinterpret_cast<const char*>(data), size);
  // Syntax errors do not stop the schema checks: both run on every input.
  config::Diagnostics diagnostics;
  const config::File file = config::parse_text(text, "fuzz.ini", diagnostics);
  (void)transport::load_link_table(file, *registry, {}, diagnostics);
  if (diagnostics.has_errors()) (void)diagnostics.status();
  return 0;
}
