// rdma_pingpong: round-trip time of 64-byte frames over one transporter link,
// through the Transporter contract only (reserve/pack/commit/flush, receive/
// release), for comparison with perftest's ib_write_lat / ib_send_lat on the
// same device. Until latency_bench exists this is how docs/rdma.md measures.
//
//   rdma_pingpong [--transporter rdma] [--iters 20000] [--warmup 2000]
//                 [--size 64] [--host 10.11.12.1] [--sleep]
//                 [--server PORT_FILE | --client PORT] [--set Key=value]...
//
// By default both ends live in this process (two threads). With --server
// the echo end runs alone: it listens on a free port, writes the port to
// PORT_FILE and echoes; --client PORT is the measuring end in another
// process (as perftest runs its two ends). The client stamps, sends,
// busy-polls for the echo, and records the round trip in a fjord::Histogram.
// --sleep makes both ends wait with wait_for_receive() (spin 0) instead.
// --set adds a line to the link's config section (SendBufferMemory=64K).
// Prints RTT (not one-way) percentiles. Exit code 77 (skip) without a device.
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>

#include "fjord/base/clock.h"
#include "fjord/base/cycle_clock.h"
#include "fjord/base/histogram.h"
#include "fjord/base/log.h"
#include "fjord/rdma/rdma.h"
#include "link_harness.h"

namespace {

using namespace fjord;

// Round trips are stamped with the CPU's cycle counter, as perftest stamps
// its own (get_cycles()). In the soft-RoCE guest the clocksource is the HPET
// (the guest's kernel finds its TSCs unsynchronized), so clock_gettime is a
// system call and an emulated HPET read, microseconds that would sit inside
// every measured round trip. The counter's rate is calibrated against
// CLOCK_MONOTONIC once. Like perftest, the thread is not pinned (pinning it
// would make the echo thread and rxe's kernel work share its CPU); QEMU derives
// every vCPU's counter from one clock, and a round trip whose end stamp is
// below its start (counters that really differ) is not recorded but counted.
// The clock is fjord::CycleClock (base/cycle_clock.h).

struct Options {
  std::string transporter = "rdma";
  uint64_t iters = 20000;
  uint64_t warmup = 2000;
  std::size_t size = 64;
  std::string host;
  bool sleep = false;
  std::string port_file;  // --server
  uint16_t port = 0;      // --client
  std::string extra;      // --set lines
};

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (arg == "--sleep") {
      o.sleep = true;
      continue;
    }
    if (!value) return false;
    if (arg == "--transporter")
      o.transporter = value;
    else if (arg == "--iters")
      o.iters = std::stoull(value);
    else if (arg == "--warmup")
      o.warmup = std::stoull(value);
    else if (arg == "--size")
      o.size = std::stoull(value);
    else if (arg == "--host")
      o.host = value;
    else if (arg == "--server")
      o.port_file = value;
    else if (arg == "--client")
      o.port = static_cast<uint16_t>(std::stoul(value));
    else if (arg == "--set")
      o.extra += std::string(value) + "\n";
    else
      return false;
    ++i;
  }
  return o.size >= 24 && o.size % 8 == 0 && o.size <= frame::kMaxFrameBytes;
}

// One frame of exactly `size` bytes: header plus data words, then a section.
std::size_t pack_ping(std::span<std::byte> dest, std::size_t size, uint64_t seq) {
  const std::size_t words = std::min<std::size_t>((size - frame::kHeaderBytes) / 4, frame::kMaxDataWords);
  uint32_t data[frame::kMaxDataWords] = {static_cast<uint32_t>(seq)};
  const std::size_t rest = size - frame::kHeaderBytes - 4 * words;
  static std::byte filler[frame::kMaxFrameBytes];
  std::size_t section_bytes[1] = {rest >= 8 ? rest - 4 : 0};
  const std::span<const std::byte> sections[] = {{filler, section_bytes[0]}};
  const std::size_t count = rest >= 8 ? 1 : 0;
  return frame::pack_frame(dest, {test::kTestSignal, {1, 0}, {2, 0}, static_cast<uint32_t>(seq)}, {data, words},
                           {sections, count}, false);
}

bool send_one(transport::Transporter& t, std::size_t size, uint64_t seq) {
  for (;;) {
    auto space = t.reserve(size);
    if (!space.empty()) {
      const std::size_t n = pack_ping(space, size, seq);
      if (n == 0) return false;
      t.commit(n, 1);
      while (t.flush() == transport::FlushStatus::kPending) cpu_relax();
      return t.is_up();
    }
    if (!t.is_up()) return false;
    cpu_relax();
  }
}

// Busy-polls (or sleeps) until one frame is there; returns its trace word.
bool receive_one(transport::Transporter& t, bool sleep, uint32_t* trace) {
  for (;;) {
    transport::ReceiveBatch b = t.receive();
    if (b.frames > 0) {
      frame::FrameCursor cursor(b.bytes);
      frame::SignalView view;
      cursor.next(view);
      *trace = view.header.trace;
      const std::size_t first = b.bytes.size() - cursor.remaining_bytes();
      t.release(first);
      return true;
    }
    if (!t.is_up()) return false;
    if (sleep) (void)t.wait_for_receive(1'000'000'000, 0);
  }
}

// The echo end alone: listen, publish the port, accept one link, echo.
template <typename Echo>
int serve(transport::TransporterFactory& factory, const transport::LinkTable& table, const std::string& port_file,
          DeadlineNs deadline, const Echo& echo) {
  auto listener = factory.listen(1, table);
  if (!listener) {
    std::fprintf(stderr, "rdma_pingpong: %s\n", listener.status().to_string().c_str());
    return 1;
  }
  const std::string tmp = port_file + ".tmp";
  if (FILE* f = std::fopen(tmp.c_str(), "w")) {
    std::fprintf(f, "%u\n", (*listener)->port());
    std::fclose(f);
    std::rename(tmp.c_str(), port_file.c_str());  // the client never reads half a number
  }
  auto server = (*listener)->accept(deadline);
  if (!server) {
    std::fprintf(stderr, "rdma_pingpong: %s\n", server.status().to_string().c_str());
    return 1;
  }
  echo(**server);
  // Stay until the client has its last echo and hangs up: exiting now could
  // destroy the queue pair under a WRITE still on its way.
  while ((*server)->is_up() && monotonic_ns() < deadline) (void)(*server)->wait_for_receive(100'000'000, 0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: rdma_pingpong [--transporter T] [--iters N] [--warmup N] [--size BYTES (8k, >= 24)] "
                 "[--host IP] [--sleep] [--server PORT_FILE | --client PORT] [--set Key=value]...\n");
    return 2;
  }
  log_set_level(LogLevel::kWarn);
  if (!o.host.empty()) ::setenv("RXE_IP", o.host.c_str(), 1);
  transport::TransporterFactory* factory = test::test_registry().find(o.transporter);
  const test::Medium* medium = test::find_medium(o.transporter);
  if (!factory || !medium) {
    std::fprintf(stderr, "rdma_pingpong: no transporter '%s'\n", o.transporter.c_str());
    return 2;
  }
  if (Status s = factory->probe(); !s) {
    std::printf("rdma_pingpong: SKIP: %s unavailable: %s\n", o.transporter.c_str(), s.message().c_str());
    return 77;
  }
  const uint64_t total = o.warmup + o.iters;
  const auto echo = [&o, total](transport::Transporter& server) {
    uint32_t trace = 0;
    for (uint64_t i = 0; i < total; ++i)
      if (!receive_one(server, o.sleep, &trace) || !send_one(server, o.size, trace)) return;
  };
  auto table = test::load_links(medium->section(1, 2, o.extra));
  if (!table) {
    std::fprintf(stderr, "rdma_pingpong: %s\n", table.status().to_string().c_str());
    return 1;
  }
  const DeadlineNs deadline = monotonic_ns() + 30'000'000'000ULL;
  if (!o.port_file.empty()) return serve(*factory, *table, o.port_file, deadline, echo);
  test::LinkPair pair;
  std::thread echo_thread;
  if (o.port != 0) {
    transport::LinkConfig link = *table->find(1, 2);
    link.port = o.port;
    auto connected = factory->connect(2, link, deadline);
    if (!connected) {
      std::fprintf(stderr, "rdma_pingpong: %s\n", connected.status().to_string().c_str());
      return 1;
    }
    pair.client = std::move(connected).value();
  } else {
    auto made = test::connect_pair(*table, 1, *table->find(1, 2), 2);
    if (!made) {
      std::fprintf(stderr, "rdma_pingpong: %s\n", made.status().to_string().c_str());
      return 1;
    }
    pair = std::move(made).value();
    echo_thread = std::thread(echo, std::ref(*pair.server));
  }
  transport::Transporter& client = *pair.client;
  Histogram rtt;
  bool ok = true;
  const CycleClock clock;
  uint64_t backwards = 0;  // round trips whose end stamp came before the start
  for (uint64_t i = 0; i < total && ok; ++i) {
    const uint64_t start = CycleClock::now();
    uint32_t trace = 0;
    ok = send_one(client, o.size, i) && receive_one(client, o.sleep, &trace) && trace == static_cast<uint32_t>(i);
    const uint64_t end = CycleClock::now();
    if (i < o.warmup) continue;
    if (end < start)
      ++backwards;
    else
      rtt.record(clock.to_ns(end - start));
  }
  if (echo_thread.joinable()) echo_thread.join();
  if (!ok) {
    std::fprintf(stderr, "rdma_pingpong: link failed: %s\n", client.down_reason().to_string().c_str());
    return 1;
  }
  std::string where = o.transporter;
  if (auto info = rdma::link_info(client))
    where = info->where + ", max inline " + std::to_string(info->max_inline_bytes);
  std::printf("rdma_pingpong: %s, %zu-byte frames, %s, %s, %lu round trips after %lu warm-up, stamped with the %s\n",
              where.c_str(), o.size, o.sleep ? "sleeping receivers" : "busy-poll",
              o.port ? "two processes" : "two threads", static_cast<unsigned long>(o.iters),
              static_cast<unsigned long>(o.warmup), clock.name());
  if (backwards > 0)
    std::printf("rdma_pingpong: %lu round trips not recorded: the cycle counter went backwards\n",
                static_cast<unsigned long>(backwards));
  std::printf("RTT_US p50 %.2f p99 %.2f p99.9 %.2f max %.2f mean %.2f\n", rtt.percentile(0.50) / 1e3,
              rtt.percentile(0.99) / 1e3, rtt.percentile(0.999) / 1e3, static_cast<double>(rtt.max()) / 1e3,
              rtt.mean() / 1e3);
  return 0;
}
