// The simulated medium between two SimTransporters (internal header).
//
// A SimWire holds one SimPipe per direction and the link's fate (up, or
// broken with a reason). A pipe is a mirrored byte ring (zero copy: the
// sender packs into it, the receiver reads from it) plus the bookkeeping of
// the simulated network: bytes published by the sender's flushes, bytes
// delivered to the receiver, and batches still held back for a number of
// receive() polls. Order is always kept: a batch is never delivered before
// an earlier one.
//
// Fault injection happens at the sender's flush (SimTransporter::flush),
// driven by a SimRandom seeded from the link's Seed and the direction, so
// each direction replays the same decisions for the same sequence of
// flushes, whatever the thread timing.
//
// Threads: a pipe is used by the sending and the receiving transporter's
// threads; a mutex guards its bookkeeping (this is a test double: clarity
// over speed). The ring bytes themselves are touched without the lock: the
// sender only writes beyond what it published, the receiver only reads what
// was delivered, and the mutex orders the hand-over. Not meant for the
// production hot path, but allocates nothing after set-up.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "fjord/base/fd.h"
#include "fjord/base/mirrored_map.h"
#include "fjord/base/status.h"

namespace fjord::sim {

// splitmix64: tiny, fast, and the same sequence on every platform.
class SimRandom {
 public:
  explicit SimRandom(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform enough in [0, bound) for fault injection; bound > 0.
  uint64_t below(uint64_t bound) { return next() % bound; }

 private:
  uint64_t state_;
};

struct SimFaults {
  uint64_t seed = 0;                    // the effective seed (never 0 here)
  uint32_t delay_polls = 0;             // DelayPolls
  uint32_t short_write_percent = 0;     // ShortWriteChance
  uint32_t disconnect_per_million = 0;  // DisconnectChance
  bool any() const { return delay_polls != 0 || short_write_percent != 0 || disconnect_per_million != 0; }
};

class SimPipe {
 public:
  // Held-back batches per direction; beyond it a new batch joins the last
  // one (keeping the longer hold), so nothing is ever refused or unbounded.
  static constexpr std::size_t kMaxHeldBatches = 64;

  SimPipe(MirroredMap ring, UniqueFd receiver_event);

  std::byte* ring_data() const { return ring_.data(); }
  std::size_t capacity() const { return ring_.size(); }
  int receiver_event() const { return receiver_event_.get(); }

  // Sender: bytes [.., end) are on the wire, visible after `hold_polls`
  // receive polls. Wakes an armed receiver.
  void publish(uint64_t end, uint32_t hold_polls);
  uint64_t released() const;

  // Receiver: one poll (counts down held batches; all are delivered at once
  // when deliver_all). Returns the end of the delivered bytes.
  uint64_t poll(bool deliver_all);
  void release(uint64_t released_end);
  // Arms the wake-up unless bytes beyond `seen` are available; sleeping
  // ends every hold (a held batch must not wait for polls that never come).
  bool arm(uint64_t seen);
  void disarm();

  // Any thread: makes the receiver's eventfd readable.
  void wake_receiver() const;

 private:
  struct Held {
    uint64_t end = 0;
    uint32_t polls_left = 0;
  };

  void deliver_all_locked();

  MirroredMap ring_;
  UniqueFd receiver_event_;
  mutable std::mutex mutex_;
  uint64_t published_ = 0;  // sender's flushes so far
  uint64_t delivered_ = 0;  // visible to the receiver
  uint64_t released_ = 0;   // given back by the receiver
  std::array<Held, kMaxHeldBatches> held_{};
  std::size_t held_head_ = 0;
  std::size_t held_count_ = 0;
  bool receiver_armed_ = false;
};

// Direction 0 carries client -> server, direction 1 server -> client.
class SimWire {
 public:
  // Each pipe: its ring and the eventfd of its receiver.
  SimWire(SimFaults faults, MirroredMap client_to_server_ring, UniqueFd server_event, MirroredMap server_to_client_ring,
          UniqueFd client_event);

  SimPipe& pipe(int direction) { return pipes_[direction]; }
  const SimFaults& faults() const { return faults_; }

  // First caller wins: records why the link broke and wakes both receivers.
  void break_link(const Status& reason);
  bool broken() const { return broken_.load(std::memory_order_acquire); }
  Status reason() const;

 private:
  SimFaults faults_;
  SimPipe pipes_[2];
  mutable std::mutex mutex_;  // guards reason_
  Status reason_;
  // Release/acquire: whoever sees true also sees reason_ (set before it).
  std::atomic<bool> broken_{false};
};

}  // namespace fjord::sim
