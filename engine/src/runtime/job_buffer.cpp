#include "fjord/engine/runtime/job_buffer.h"

#include <bit>
#include <string>
#include <utility>

#include "fjord/engine/runtime/numa.h"

namespace fjord::engine {

Result<JobBuffer> JobBuffer::create(std::size_t capacity_bytes, int numa_node) {
  // A power of two so that position = index & mask.
  std::size_t size = std::bit_ceil(std::max(round_up_to_pages(capacity_bytes), tuning::kJobBufferMinBytes));
  // An entry's length (a gap's too) is a 32-bit field of its envelope.
  if (size > (std::size_t{1} << 31))
    return Status(StatusCode::kInvalidArgument, "job buffer of " + std::to_string(capacity_bytes) +
                                                    " bytes: at most 2 GB (entry lengths are 32-bit)");
  auto memory = MirroredMap::anonymous(size, "fjord-job-buffer");
  if (!memory) return memory.status();
  // Both halves map the same pages: binding the first places them all.
  if (numa_node >= 0)
    if (Status s = bind_to_numa_node(memory->data(), size, numa_node); !s) return s;
  JobBuffer out;
  out.memory_ = std::move(memory).value();
  out.base_ = out.memory_.data();
  out.capacity_ = size;
  out.mask_ = size - 1;
  out.write_limit_ = size;  // nothing written, nothing read
  out.hot_ = HotWindow(size, kHotWindowBytes);
  return out;
}

uint64_t JobBuffer::maybe_rewind(uint64_t w) noexcept {
  const uint64_t offset = w & mask_;
  const bool back = hot_.go_back_now(w, offset, [this, w] {
    write_limit_ = read_.load(std::memory_order_acquire) + capacity_;  // P2
    return w + capacity_ - write_limit_;
  });
  if (!back) return w;
  const uint64_t lap_end = HotWindow::lap_end(w, offset, capacity_);
  // The consumer keeps up: everything unread lies past this lap's first
  // bytes, so the envelope zeroed at the lap's end (the ring's start again)
  // is free.
  FJORD_ASSERT(lap_end + sizeof(Envelope) <= write_limit_);
  const Envelope gap{static_cast<uint32_t>(lap_end - w), kNoNode, SenderKind::kOwnNode, kGapEntry};
  word_at(lap_end).store(0, std::memory_order_relaxed);
  word_at(w).store(std::bit_cast<uint64_t>(gap), std::memory_order_release);  // P1
  gap_bytes_.store(lap_end - w, std::memory_order_relaxed);
  gap_end_.store(lap_end, std::memory_order_relaxed);
  write_.store(lap_end, std::memory_order_relaxed);
  hot_.went_back(lap_end);
  return lap_end;
}

JobBuffer::JobBuffer(JobBuffer&& other) noexcept { *this = std::move(other); }

JobBuffer& JobBuffer::operator=(JobBuffer&& other) noexcept {
  // Moves happen at start-up only, before any thread uses either buffer.
  memory_ = std::move(other.memory_);
  base_ = std::exchange(other.base_, nullptr);
  capacity_ = std::exchange(other.capacity_, 0);
  mask_ = std::exchange(other.mask_, 0);
  write_.store(other.write_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  read_.store(other.read_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  write_limit_ = other.write_limit_;
  hot_ = other.hot_;
  gap_end_.store(other.gap_end_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  gap_bytes_.store(other.gap_bytes_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  return *this;
}

}  // namespace fjord::engine
