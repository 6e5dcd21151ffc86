// The simulated transporter's own promises, beyond the contract suite (which
// runs it with faults off): with delays and short writes everything still
// arrives whole and in order; DelayPolls bounds the hold; an injected drop is
// seen on both ends with a reason naming the seed, after everything flushed
// before it; the same seed replays the same events; a peer that vanishes is
// seen as down. Every randomised test prints its seed on failure;
// FJORD_TEST_SEED=<n> reruns one seed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "fjord/base/clock.h"
#include "link_harness.h"

namespace fjord::test {
namespace {

using transport::FlushStatus;
using transport::LinkState;
using transport::Transporter;
using transport::WaitResult;

constexpr uint64_t kSecond = 1'000'000'000ULL;

const Medium& sim_medium() { return *find_medium("sim"); }

std::vector<uint64_t> test_seeds(uint64_t fixed) {
  if (const char* forced = std::getenv("FJORD_TEST_SEED")) return {std::strtoull(forced, nullptr, 10)};
  std::vector<uint64_t> seeds;
  for (uint64_t s = 1; s <= fixed; ++s) seeds.push_back(s);
  seeds.push_back(std::random_device{}() | 1ULL << 40);  // a fresh one each run
  return seeds;
}

std::string seed_note(uint64_t seed) {
  return "Seed=" + std::to_string(seed) + " (rerun with FJORD_TEST_SEED=" + std::to_string(seed) + ")";
}

LinkPair sim_pair(const std::string& extra) {
  auto p = make_pair(sim_medium(), extra);
  EXPECT_TRUE(p) << p.status().to_string();
  return p ? std::move(p).value() : LinkPair{};
}

// Reserves, packs and commits one sequenced frame without flushing.
bool commit_sequenced(Transporter& t, uint64_t seq, std::size_t payload) {
  const std::size_t bytes = sequenced_frame_bytes(payload, t.config().checksum);
  std::span<std::byte> space = t.reserve(bytes);
  if (space.empty()) return false;
  t.commit(pack_sequenced(space, seq, payload, t.config().checksum), 1);
  return true;
}

// Takes whatever whole frames are there, checks them, releases them.
// Returns "" or what is wrong; counts into *next.
std::string take_frames(Transporter& t, uint64_t* next) {
  transport::ReceiveBatch batch = t.receive();
  frame::FrameCursor cursor(batch.bytes);
  frame::SignalView view;
  uint32_t seen = 0;
  while (cursor.next(view)) {
    if (std::string e = check_sequenced(view, *next); !e.empty()) return e;
    ++*next;
    ++seen;
  }
  if (seen != batch.frames)
    return "batch said " + std::to_string(batch.frames) + " frames, found " + std::to_string(seen);
  t.release(batch.bytes.size());
  return "";
}

TEST(SimTransporterTest, DelaysAndShortWritesStillDeliverEverythingInOrder) {
  constexpr uint64_t kFrames = 3000;
  for (uint64_t seed : test_seeds(16)) {
    SCOPED_TRACE(seed_note(seed));
    LinkPair p = sim_pair(
        "Seed=" + std::to_string(seed) +
        "\nDelayPolls=4\nShortWriteChance=40\nSendBufferMemory=64K\nChecksum=" + std::to_string(seed % 2) + "\n");
    ASSERT_TRUE(p.client && p.server);
    std::mt19937_64 rng(seed);
    uint64_t sent = 0, received = 0, pending_flushes = 0;
    for (int step = 0; received < kFrames; ++step) {
      ASSERT_LT(step, 1'000'000) << "stalled at " << received;
      for (uint64_t burst = 1 + rng() % 8; burst > 0 && sent < kFrames; --burst) {
        if (!commit_sequenced(*p.client, sent, mixed_payload_bytes(sent))) break;
        ++sent;
      }
      const FlushStatus flushed = p.client->flush();
      ASSERT_NE(flushed, FlushStatus::kDown) << p.client->down_reason().to_string();
      pending_flushes += flushed == FlushStatus::kPending;
      ASSERT_EQ(take_frames(*p.server, &received), "") << "after " << received << " frames";
    }
    EXPECT_EQ(p.client->stats().frames_sent, kFrames);
    EXPECT_EQ(p.server->stats().frames_received, kFrames);
    EXPECT_EQ(p.client->stats().bytes_sent, p.server->stats().bytes_received);
    EXPECT_GT(pending_flushes, 0u) << "short writes should have happened";
  }
}

TEST(SimTransporterTest, FaultsWithASenderAndAReceiverThread) {
  constexpr uint64_t kFrames = 4000;
  for (uint64_t seed : test_seeds(6)) {
    SCOPED_TRACE(seed_note(seed));
    LinkPair p =
        sim_pair("Seed=" + std::to_string(seed) + "\nDelayPolls=8\nShortWriteChance=30\nSendBufferMemory=64K\n");
    ASSERT_TRUE(p.client && p.server);
    std::thread sender([&] {
      for (uint64_t seq = 0; seq < kFrames && p.client->is_up();) {
        if (commit_sequenced(*p.client, seq, mixed_payload_bytes(seq) % 3000))
          ++seq;
        else
          std::this_thread::yield();
        (void)p.client->flush();
      }
      while (p.client->flush() == FlushStatus::kPending) {
      }
    });
    uint64_t next = 0;
    const std::string error = receive_sequenced(*p.server, &next, kFrames, 60 * kSecond);
    sender.join();
    EXPECT_EQ(error, "");
  }
}

TEST(SimTransporterTest, DelayPollsBoundsHowLongABatchIsHeld) {
  constexpr uint32_t kDelayPolls = 3;
  for (uint64_t seed : test_seeds(4)) {
    SCOPED_TRACE(seed_note(seed));
    LinkPair p = sim_pair("Seed=" + std::to_string(seed) + "\nDelayPolls=" + std::to_string(kDelayPolls) + "\n");
    ASSERT_TRUE(p.client && p.server);
    uint64_t next = 0, held = 0;
    for (uint64_t seq = 0; seq < 500; ++seq) {
      ASSERT_TRUE(send_sequenced(*p.client, seq, 32));
      uint32_t polls = 0;
      while (next == seq) {
        ++polls;
        ASSERT_LE(polls, kDelayPolls) << "frame " << seq << " held beyond DelayPolls";
        ASSERT_EQ(take_frames(*p.server, &next), "");
      }
      held += polls > 1;
    }
    EXPECT_GT(held, 0u) << "some batches should have been held back";
    EXPECT_LT(held, 500u) << "some batches should have gone through at once";
  }
}

// Ping-pong until an injected drop; returns frames each side received, and
// both down reasons.
struct DropRun {
  uint64_t to_server = 0, to_client = 0;      // frames received
  uint64_t sent_server = 0, sent_client = 0;  // frames whose flush succeeded, per receiver
  std::string server_reason, client_reason, error;
};

DropRun run_until_drop(const std::string& extra) {
  DropRun r;
  LinkPair p = sim_pair(extra);
  if (!p.client || !p.server) {
    r.error = "no pair";
    return r;
  }
  for (uint64_t seq = 0; seq < 100'000 && p.client->is_up() && p.server->is_up(); ++seq) {
    if (send_sequenced(*p.client, seq, 40 + seq % 500)) {
      ++r.sent_server;
      if (r.error = take_frames(*p.server, &r.to_server); !r.error.empty()) return r;
    }
    if (p.server->is_up() && send_sequenced(*p.server, seq, 40 + seq % 300)) {
      ++r.sent_client;
      if (r.error = take_frames(*p.client, &r.to_client); !r.error.empty()) return r;
    }
  }
  // Drain what each side still has, then both must be down.
  for (int i = 0; i < 10 && (p.client->is_up() || p.server->is_up()); ++i) {
    if (r.error = take_frames(*p.server, &r.to_server); !r.error.empty()) return r;
    if (r.error = take_frames(*p.client, &r.to_client); !r.error.empty()) return r;
  }
  if (p.client->is_up() || p.server->is_up()) r.error = "one side is still up";
  r.server_reason = p.server->down_reason().message();
  r.client_reason = p.client->down_reason().message();
  return r;
}

TEST(SimTransporterTest, InjectedDropIsSeenOnBothSidesAndNamesTheSeed) {
  for (uint64_t seed : test_seeds(12)) {
    SCOPED_TRACE(seed_note(seed));
    const DropRun r = run_until_drop("Seed=" + std::to_string(seed) + "\nDisconnectChance=5000\n");
    ASSERT_EQ(r.error, "");
    const std::string named = "Seed=" + std::to_string(seed);
    EXPECT_NE(r.server_reason.find(named), std::string::npos) << r.server_reason;
    EXPECT_NE(r.client_reason.find(named), std::string::npos) << r.client_reason;
    EXPECT_NE(r.server_reason.find("fault injection dropped"), std::string::npos) << r.server_reason;
    // Every frame whose flush succeeded arrived, intact and in order
    // (take_frames checked each), and none after the drop.
    EXPECT_EQ(r.to_server, r.sent_server);
    EXPECT_EQ(r.to_client, r.sent_client);
    EXPECT_LT(r.sent_server, 100'000u) << "the link should have dropped";
  }
}

TEST(SimTransporterTest, FramesFlushedBeforeTheDropAllArrive) {
  for (uint64_t seed : test_seeds(8)) {
    SCOPED_TRACE(seed_note(seed));
    LinkPair p = sim_pair("Seed=" + std::to_string(seed) + "\nDisconnectChance=3000\nDelayPolls=6\n");
    ASSERT_TRUE(p.client && p.server);
    uint64_t flushed = 0;  // frames whose flush reported success
    while (send_sequenced(*p.client, flushed, 100)) ++flushed;
    ASSERT_EQ(p.client->state(), LinkState::kDown);
    // The receiver has not polled at all: the held and the delivered bytes
    // are all still to come, then the link is down.
    uint64_t received = 0;
    for (int i = 0; i < 1000 && (p.server->is_up() || !p.server->receive().bytes.empty()); ++i)
      ASSERT_EQ(take_frames(*p.server, &received), "");
    EXPECT_EQ(received, flushed);
    EXPECT_EQ(p.server->state(), LinkState::kDown);
    EXPECT_EQ(p.server->down_reason().message(), p.client->down_reason().message());
  }
}

// Everything observable in a single-threaded run, for replay comparisons.
std::vector<int> event_trace(const std::string& extra) {
  std::vector<int> trace;
  LinkPair p = sim_pair(extra);
  if (!p.client || !p.server) return {-1};
  uint64_t received = 0;
  for (uint64_t seq = 0; seq < 3000 && p.client->is_up(); ++seq) {
    if (commit_sequenced(*p.client, seq, mixed_payload_bytes(seq) % 2000)) trace.push_back(100);
    trace.push_back(static_cast<int>(p.client->flush()));
    const std::string e = take_frames(*p.server, &received);
    trace.push_back(e.empty() ? static_cast<int>(received) : -2);
  }
  trace.push_back(static_cast<int>(received));
  return trace;
}

TEST(SimTransporterTest, SameSeedReplaysTheSameEvents) {
  std::vector<std::size_t> lengths;
  for (uint64_t seed : test_seeds(8)) {
    SCOPED_TRACE(seed_note(seed));
    const std::string extra = "Seed=" + std::to_string(seed) +
                              "\nDisconnectChance=2000\nShortWriteChance=30\nDelayPolls=5\nSendBufferMemory=128K\n";
    const std::vector<int> first = event_trace(extra);
    const std::vector<int> second = event_trace(extra);
    ASSERT_EQ(first, second) << "the same seed must replay the same flushes, deliveries and drop";
    lengths.push_back(first.size());
  }
  // Different seeds lead to different histories.
  std::sort(lengths.begin(), lengths.end());
  EXPECT_NE(lengths.front(), lengths.back());
}

TEST(SimTransporterTest, RandomSeedIsReportedAndReplays) {
  const DropRun first = run_until_drop("Seed=0\nDisconnectChance=5000\n");
  ASSERT_EQ(first.error, "");
  const std::size_t at = first.client_reason.find("Seed=");
  ASSERT_NE(at, std::string::npos) << first.client_reason;
  const uint64_t seed = std::strtoull(first.client_reason.c_str() + at + 5, nullptr, 10);
  ASSERT_NE(seed, 0u);
  SCOPED_TRACE(seed_note(seed));
  const DropRun replay = run_until_drop("Seed=" + std::to_string(seed) + "\nDisconnectChance=5000\n");
  ASSERT_EQ(replay.error, "");
  EXPECT_EQ(replay.sent_server, first.sent_server);
  EXPECT_EQ(replay.to_server, first.to_server);
  EXPECT_EQ(replay.to_client, first.to_client);
  EXPECT_EQ(replay.client_reason, first.client_reason);
}

TEST(SimTransporterTest, PeerThatVanishesMidStreamIsSeenAsDown) {
  LinkPair p = sim_pair("");
  ASSERT_TRUE(p.client && p.server);
  constexpr uint64_t kFrames = 5000;
  std::thread peer([&] {
    for (uint64_t seq = 0; seq < kFrames;)
      if (send_sequenced(*p.client, seq, 200)) ++seq;
    p.client.reset();  // gone without a close()
  });
  uint64_t next = 0;
  for (;;) {
    ASSERT_EQ(take_frames(*p.server, &next), "");
    if (!p.server->is_up() && p.server->receive().bytes.empty()) break;
    if (p.server->wait_for_receive(20 * kSecond, 0) == WaitResult::kTimeout) FAIL() << "peer's end not noticed";
  }
  peer.join();
  EXPECT_EQ(next, kFrames) << "every frame sent before the peer vanished arrives";
  EXPECT_NE(p.server->down_reason().message().find("the transporter of node 2 was destroyed"), std::string::npos)
      << p.server->down_reason().message();
}

TEST(SimTransporterTest, SleepingEndsAHold) {
  // A huge DelayPolls must not strand a receiver that sleeps instead of polling.
  LinkPair p = sim_pair("Seed=7\nDelayPolls=1000000\n");
  ASSERT_TRUE(p.client && p.server);
  std::thread echo([&] {
    uint64_t next = 0;
    for (uint64_t i = 0; i < 300; ++i) {
      if (p.server->wait_for_receive(10 * kSecond, 0) != WaitResult::kReady) return;
      if (!take_frames(*p.server, &next).empty() || !send_sequenced(*p.server, i, 8)) return;
    }
  });
  uint64_t got = 0;
  for (uint64_t i = 0; i < 300; ++i) {
    ASSERT_TRUE(send_sequenced(*p.client, i, 8));
    ASSERT_EQ(p.client->wait_for_receive(10 * kSecond, 0), WaitResult::kReady) << "round " << i;
    ASSERT_EQ(take_frames(*p.client, &got), "");
  }
  echo.join();
  EXPECT_EQ(got, 300u);
}

TEST(SimTransporterTest, EndpointsRendezvousInsideTheProcess) {
  transport::TransporterFactory& sim = *test_registry().find("sim");
  auto table = load_links(sim_medium().section(1, 2, ""));
  ASSERT_TRUE(table);
  const transport::LinkConfig link = *table->find(1, 2);
  auto nobody = sim.connect(2, link, monotonic_ns() + kSecond);
  ASSERT_FALSE(nobody);
  EXPECT_EQ(nobody.status().code(), StatusCode::kUnavailable) << nobody.status().to_string();
  {
    auto first = sim.listen(1, *table);
    ASSERT_TRUE(first) << first.status().to_string();
    auto second = sim.listen(1, *table);
    ASSERT_FALSE(second);
    EXPECT_EQ(second.status().code(), StatusCode::kAlreadyExists) << second.status().to_string();
    auto idle = (*first)->accept(monotonic_ns() + 1'000'000);
    EXPECT_EQ(idle.status().code(), StatusCode::kTimeout);
  }
  auto again = sim.listen(1, *table);
  EXPECT_TRUE(again) << "a closed listener frees its endpoint: " << again.status().to_string();
}

}  // namespace
}  // namespace fjord::test
