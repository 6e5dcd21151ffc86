// The DPDK transporter's steady state allocates nothing: neither the
// link's own threads (reserve, commit, flush, receive, release) nor the
// engine thread that moves the packets (counted too: the counting operator
// new sees every thread). A binary of its own, for the counting new.
#include <gtest/gtest.h>

#include <array>

#include "counting_new.h"
#include "fjord/base/clock.h"
#include "link_harness.h"

namespace fjord::test {
namespace {

TEST(DpdkTransporterAllocations, SteadyStateAllocatesNothing) {
  const Medium* medium = find_medium("dpdk");
  ASSERT_NE(medium, nullptr);
  if (Status s = test_registry().find("dpdk")->probe(); !s)
    GTEST_SKIP() << "the EAL cannot start here: " << s.message();
  auto made = make_pair(*medium, "SendBufferMemory=256K\nReceiveBufferMemory=128K\n");
  ASSERT_TRUE(made) << made.status().to_string();
  transport::Transporter& c = *made->client;
  transport::Transporter& s = *made->server;
  const uint32_t data[] = {1, 2, 3, 4};
  std::byte payload[300] = {};
  const std::span<const std::byte> sections[] = {payload};
  const frame::SignalHeader header{kTestSignal, {2, 0}, {1, 0}, 0};
  const std::size_t bytes = frame::frame_bytes_for(4, std::array<std::size_t, 1>{sizeof payload}, false);
  uint64_t received = 0;
  auto round = [&](int frames) {
    for (int i = 0; i < frames; ++i) {
      std::span<std::byte> space = c.reserve(bytes);
      if (space.empty()) break;
      c.commit(frame::pack_frame(space, header, data, sections, false), 1);
    }
    (void)c.flush();
    transport::ReceiveBatch b = s.receive();
    received += b.frames;
    s.release(b.bytes.size());
  };
  // Warm up: both rings lap, the engine's lists reach their sizes.
  for (const uint64_t deadline = monotonic_ns() + 20'000'000'000ULL; received < 5000 && monotonic_ns() < deadline;)
    round(8);
  ASSERT_GE(received, 5000u) << "the warm-up moved too few frames";
  const uint64_t warm = received;
  g_allocations = 0;
  g_count_allocations = true;
  for (const uint64_t deadline = monotonic_ns() + 20'000'000'000ULL;
       received - warm < 50000 && monotonic_ns() < deadline;)
    round(1 + static_cast<int>(received % 16));
  g_count_allocations = false;
  EXPECT_EQ(g_allocations.load(), 0u) << "allocations on the hot path\n" << first_allocation();
  EXPECT_GE(received - warm, 50000u) << "the loop must really move frames";
  EXPECT_TRUE(c.is_up());
  EXPECT_TRUE(s.is_up());
}

}  // namespace
}  // namespace fjord::test
