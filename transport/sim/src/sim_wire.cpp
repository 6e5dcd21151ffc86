// The simulated medium: pipes with held-back batches, and the link's fate.
#include "sim_wire.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

namespace fjord::sim {

SimPipe::SimPipe(MirroredMap ring, UniqueFd receiver_event)
    : ring_(std::move(ring)), receiver_event_(std::move(receiver_event)) {
  FJORD_ASSERT(ring_.size() > 0);
  FJORD_ASSERT(receiver_event_.valid());
}

void SimPipe::publish(uint64_t end, uint32_t hold_polls) {
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    FJORD_ASSERT(end > published_);
    FJORD_ASSERT(end - released_ <= ring_.size());
    if (hold_polls == 0 && held_count_ == 0) {
      delivered_ = end;
    } else if (held_count_ == kMaxHeldBatches) {
      Held& last = held_[(held_head_ + held_count_ - 1) % kMaxHeldBatches];
      last.end = end;
      last.polls_left = std::max(last.polls_left, hold_polls);
    } else {
      held_[(held_head_ + held_count_) % kMaxHeldBatches] = {end, hold_polls};
      ++held_count_;
    }
    published_ = end;
    wake = std::exchange(receiver_armed_, false);
  }
  if (wake) wake_receiver();
}

uint64_t SimPipe::released() const {
  std::lock_guard lock(mutex_);
  return released_;
}

void SimPipe::deliver_all_locked() {
  delivered_ = published_;
  held_count_ = 0;
}

uint64_t SimPipe::poll(bool deliver_all) {
  std::lock_guard lock(mutex_);
  if (deliver_all) {
    deliver_all_locked();
    return delivered_;
  }
  for (std::size_t i = 0; i < held_count_; ++i) {
    Held& h = held_[(held_head_ + i) % kMaxHeldBatches];
    if (h.polls_left > 0) --h.polls_left;
  }
  // In order: stop at the first batch still held.
  while (held_count_ > 0 && held_[held_head_].polls_left == 0) {
    delivered_ = held_[held_head_].end;
    held_head_ = (held_head_ + 1) % kMaxHeldBatches;
    --held_count_;
  }
  return delivered_;
}

void SimPipe::release(uint64_t released_end) {
  std::lock_guard lock(mutex_);
  FJORD_ASSERT(released_end >= released_);
  FJORD_ASSERT(released_end <= delivered_);
  released_ = released_end;
}

bool SimPipe::arm(uint64_t seen) {
  std::lock_guard lock(mutex_);
  deliver_all_locked();
  if (delivered_ != seen) return false;
  receiver_armed_ = true;
  return true;
}

void SimPipe::disarm() {
  {
    std::lock_guard lock(mutex_);
    receiver_armed_ = false;
  }
  uint64_t tokens = 0;
  (void)!::read(receiver_event_.get(), &tokens, sizeof tokens);  // non-blocking: drains a token if there is one
}

void SimPipe::wake_receiver() const {
  const uint64_t one = 1;
  (void)!::write(receiver_event_.get(), &one, sizeof one);
}

SimWire::SimWire(SimFaults faults, MirroredMap client_to_server_ring, UniqueFd server_event,
                 MirroredMap server_to_client_ring, UniqueFd client_event)
    : faults_(faults),
      pipes_{SimPipe(std::move(client_to_server_ring), std::move(server_event)),
             SimPipe(std::move(server_to_client_ring), std::move(client_event))} {}

void SimWire::break_link(const Status& reason) {
  {
    std::lock_guard lock(mutex_);
    if (broken_.load(std::memory_order_relaxed)) return;
    reason_ = reason;
    broken_.store(true, std::memory_order_release);
  }
  pipes_[0].wake_receiver();
  pipes_[1].wake_receiver();
}

Status SimWire::reason() const {
  std::lock_guard lock(mutex_);
  return reason_;
}

}  // namespace fjord::sim
