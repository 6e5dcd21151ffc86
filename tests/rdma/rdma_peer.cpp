// rdma_peer: the far end of rdma_test's ConnectionsFromAnotherProcess. One
// connection attempt as node 2 (no retry: the test listens before it starts
// us, so a failure is real), then echoes `--frames` sequenced frames back,
// busy-polling or sleeping on the completion channel, then waits for the
// test to close the link (exiting earlier could lose the last echo, still
// queued on our side).
//
//   rdma_peer --config FILE --port P --mode busy|sleep --frames N
//
// Exit codes: 0 done, 1 the connection failed, 2 bad usage, 3 the link
// failed or stalled while in use; the reason goes to stderr.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "builtin_transporters.h"
#include "echo.h"

namespace {

constexpr uint64_t kSecond = 1'000'000'000ULL;

int fail(int code, const std::string& what) {
  std::fprintf(stderr, "rdma_peer: %s\n", what.c_str());
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace fjord;
  std::string config_path, mode;
  long port = 0;
  uint64_t frames = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--config"))
      config_path = argv[i + 1];
    else if (!std::strcmp(argv[i], "--port"))
      port = std::strtol(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--mode"))
      mode = argv[i + 1];
    else if (!std::strcmp(argv[i], "--frames"))
      frames = std::strtoull(argv[i + 1], nullptr, 10);
  }
  if (config_path.empty() || port <= 0 || port > 65535 || (mode != "busy" && mode != "sleep") || frames == 0)
    return fail(2, "usage: rdma_peer --config FILE --port P --mode busy|sleep --frames N");
  const bool sleep = mode == "sleep";
  auto file = config::read_file(config_path);
  if (!file) return fail(1, file.status().to_string());
  auto table = transport::load_link_table(*file, tools::builtin_registry());
  if (!table) return fail(1, table.status().to_string());
  transport::LinkConfig link = *table->find(1, 2);
  link.port = static_cast<uint16_t>(port);
  auto connected = tools::builtin_registry().find("rdma")->connect(2, link, monotonic_ns() + 30 * kSecond);
  if (!connected) return fail(1, "connecting: " + connected.status().to_string());
  transport::Transporter& t = **connected;
  for (uint64_t seq = 0; seq < frames; ++seq) {
    if (std::string e = test::receive_frame(t, seq, sleep, 30 * kSecond); !e.empty()) return fail(3, e);
    if (std::string e = test::send_frame(t, seq, 30 * kSecond); !e.empty()) return fail(3, "echo: " + e);
  }
  // The test closes its end once it has every echo: our signal to go.
  const uint64_t deadline = monotonic_ns() + 30 * kSecond;
  while (t.is_up()) {
    if (monotonic_ns() > deadline) return fail(3, "the test did not close the link within 30 s");
    (void)t.wait_for_receive(kSecond / 10, 0);
  }
  return 0;
}
