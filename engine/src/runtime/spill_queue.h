// SpillQueue: a thread's overflow for signals whose destination (a job
// buffer or a link) had no room. Entries keep their order; while the queue
// is not empty every new signal of the thread goes behind them, so order per
// (sender, receiver) pair holds. Single-threaded; memory sized at start-up.
// Hot path only under congestion.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>

#include "fjord/base/assert.h"
#include "fjord/base/mirrored_map.h"
#include "fjord/base/status.h"

namespace fjord::engine {

class SpillQueue {
 public:
  struct Header {
    uint32_t destination;  // bit 31: to a link; low bits: thread index or node id
    uint32_t bytes;        // entry bytes that follow (envelope + frame), multiple of 8
  };
  static_assert(sizeof(Header) == 8);

  Status init(std::size_t capacity_bytes) {
    auto memory = MirroredMap::anonymous(round_up_to_pages(capacity_bytes), "fjord-spill");
    if (!memory) return memory.status();
    memory_ = std::move(memory).value();
    return Status::ok();
  }

  bool empty() const { return head_ == tail_; }
  std::size_t used_bytes() const { return static_cast<std::size_t>(tail_ - head_); }
  std::size_t capacity() const { return memory_.size(); }

  // Space for an entry of `bytes`; asserts that it fits (the runtime stops
  // executing long before the spill can fill, see WorkerThread::send).
  std::span<std::byte> append(uint32_t destination, std::size_t bytes) {
    FJORD_ASSERT_MSG(used_bytes() + sizeof(Header) + bytes <= capacity(),
                     "spill queue overflow: one batch produced more output than the spill can hold");
    std::byte* p = memory_.data() + tail_ % memory_.size();
    const Header h{destination, static_cast<uint32_t>(bytes)};
    std::memcpy(p, &h, sizeof h);
    tail_ += sizeof(Header) + bytes;
    return {p + sizeof(Header), bytes};
  }

  // The oldest entry; valid until pop().
  bool front(Header& header, std::span<const std::byte>& entry) const {
    if (empty()) return false;
    const std::byte* p = memory_.data() + head_ % memory_.size();
    std::memcpy(&header, p, sizeof header);
    entry = {p + sizeof(Header), header.bytes};
    return true;
  }
  void pop() {
    Header h;
    std::memcpy(&h, memory_.data() + head_ % memory_.size(), sizeof h);
    head_ += sizeof(Header) + h.bytes;
  }

 private:
  MirroredMap memory_;
  uint64_t head_ = 0;
  uint64_t tail_ = 0;
};

}  // namespace fjord::engine
