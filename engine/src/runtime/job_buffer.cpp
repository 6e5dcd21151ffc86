#include "fjord/engine/runtime/job_buffer.h"

#include <bit>
#include <string>
#include <utility>

#include "fjord/engine/runtime/numa.h"

namespace fjord::engine {

Result<JobBuffer> JobBuffer::create(std::size_t capacity_bytes, int numa_node) {
  // A power of two so that position = index & mask; at least 64 KB.
  std::size_t size = std::bit_ceil(std::max<std::size_t>(round_up_to_pages(capacity_bytes), 64 << 10));
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
  out.hot_bytes_ = size >= 4 * kHotWindowBytes ? kHotWindowBytes : size;
  out.rewind_check_at_ = out.hot_bytes_;
  return out;
}

uint64_t JobBuffer::maybe_rewind(uint64_t w) noexcept {
  const uint64_t offset = w & mask_;
  const uint64_t lap_start = w - offset;
  if (offset < hot_bytes_) {  // a new lap began the usual way: look again a window into it
    rewind_check_at_ = lap_start + hot_bytes_;
    return w;
  }
  cached_read_ = read_.load(std::memory_order_acquire);  // P2
  // Go back only while the consumer keeps up: a quarter of the window unread
  // at most. Then everything unread lies past this lap's first bytes, so the
  // envelope zeroed at the lap's end (the ring's start again) is free.
  if (w - cached_read_ > hot_bytes_ / 4) {
    rewind_check_at_ = w + hot_bytes_ / 4;
    return w;
  }
  const uint64_t lap_end = lap_start + capacity_;
  const Envelope gap{static_cast<uint32_t>(lap_end - w), kNoNode, kGapEntry};
  word_at(lap_end).store(0, std::memory_order_relaxed);
  word_at(w).store(std::bit_cast<uint64_t>(gap), std::memory_order_release);  // P1
  gap_bytes_.store(lap_end - w, std::memory_order_relaxed);
  gap_end_.store(lap_end, std::memory_order_relaxed);
  write_.store(lap_end, std::memory_order_relaxed);
  rewind_check_at_ = lap_end + hot_bytes_;
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
  cached_read_ = other.cached_read_;
  hot_bytes_ = other.hot_bytes_;
  rewind_check_at_ = other.rewind_check_at_;
  gap_end_.store(other.gap_end_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  gap_bytes_.store(other.gap_bytes_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  return *this;
}

}  // namespace fjord::engine
