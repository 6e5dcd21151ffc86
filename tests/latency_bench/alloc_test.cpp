// The measurement loops allocate nothing: a run of many round trips (or
// messages) makes exactly as many heap allocations, on any thread, as a run
// of a few. Own binary: it replaces the global operator new.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <thread>

#include "fjord/base/clock.h"
#include "link_harness.h"
#include "ping.h"
#include "stream.h"
#include "wire.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<uint64_t> g_allocations{0};
}  // namespace

#pragma GCC diagnostic ignored "-Wmismatched-new-delete"  // malloc/free are the point here
void* operator new(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace fjord::bench {
namespace {

// Allocations made by both sides while `drive` runs against a responder.
uint64_t allocations_during(const std::function<void(transport::Transporter&)>& drive) {
  auto pair = test::make_pair(*test::find_medium("tcp"));
  EXPECT_TRUE(pair) << pair.status().to_string();
  if (!pair) return UINT64_MAX;
  g_allocations = 0;
  g_counting = true;
  std::thread responder([&] { EXPECT_TRUE(serve_session(*pair->server, PollMode::kBusy)); });
  drive(*pair->client);
  g_counting = false;
  EXPECT_TRUE(send_control(*pair->client, kByeSignal, {}, monotonic_ns() + 5'000'000'000ULL));
  responder.join();
  return g_allocations.load();
}

uint64_t ping_allocations(uint64_t iterations) {
  return allocations_during([&](transport::Transporter& t) {
    Histogram rtt;  // allocated before the loop, as the program does
    Progress progress(false);
    EXPECT_TRUE(run_ping(t, PingParams{64, iterations, 10, PollMode::kBusy, 10'000'000'000ULL}, rtt, progress));
  });
}

uint64_t stream_allocations(uint64_t messages) {
  return allocations_during([&](transport::Transporter& t) {
    Progress progress(false);
    EXPECT_TRUE(run_stream(t, StreamParams{1024, messages, 0, 16, PollMode::kBusy, 10'000'000'000ULL}, progress));
  });
}

TEST(LatencyBenchAllocations, PingLoopAllocatesNothingPerRoundTrip) {
  const uint64_t few = ping_allocations(10);
  const uint64_t many = ping_allocations(5000);
  EXPECT_EQ(few, many) << "allocations grow with the number of round trips";
}

TEST(LatencyBenchAllocations, StreamLoopAllocatesNothingPerMessage) {
  const uint64_t few = stream_allocations(10);
  const uint64_t many = stream_allocations(20000);
  EXPECT_EQ(few, many) << "allocations grow with the number of messages";
}

}  // namespace
}  // namespace fjord::bench
