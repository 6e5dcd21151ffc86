// contract_peer: the far end of PeerKilledMidStreamIsSeenAsDown. Connects as
// node 2 over the given transporter and streams sequenced frames until it is
// killed. Exit code 2 on bad usage, 1 when the connection fails.
#include <cstdio>
#include <cstring>
#include <string>

#include "builtin_transporters.h"
#include "fjord/base/clock.h"
#include "link_harness.h"

int main(int argc, char** argv) {
  std::string type, config_path, port;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--type"))
      type = argv[i + 1];
    else if (!std::strcmp(argv[i], "--config"))
      config_path = argv[i + 1];
    else if (!std::strcmp(argv[i], "--port"))
      port = argv[i + 1];
  }
  if (type.empty() || config_path.empty()) {
    std::fprintf(stderr, "usage: contract_peer --type T --config FILE [--port P]\n");
    return 2;
  }
  using namespace fjord;
  auto file = config::read_file(config_path);
  if (!file) {
    std::fprintf(stderr, "contract_peer: %s\n", file.status().to_string().c_str());
    return 1;
  }
  auto table = transport::load_link_table(*file, tools::builtin_registry());
  if (!table) {
    std::fprintf(stderr, "contract_peer: %s\n", table.status().to_string().c_str());
    return 1;
  }
  transport::LinkConfig link = *table->find(1, 2);
  if (!port.empty() && link.port == 0) link.port = static_cast<uint16_t>(std::stoi(port));
  auto t = tools::builtin_registry().find(type)->connect(2, link, monotonic_ns() + 20'000'000'000ULL);
  if (!t) {
    std::fprintf(stderr, "contract_peer: %s\n", t.status().to_string().c_str());
    return 1;
  }
  for (uint64_t seq = 0; (*t)->is_up();) {
    if (test::send_sequenced(**t, seq, test::mixed_payload_bytes(seq) % 4000)) ++seq;
    (void)(*t)->receive();  // notice a closed link
  }
  return 1;
}
