#include "fjord/engine/runtime/job_buffer.h"

#include <bit>
#include <utility>

#include "fjord/engine/runtime/numa.h"

namespace fjord::engine {

Result<JobBuffer> JobBuffer::create(std::size_t capacity_bytes, int numa_node) {
  // A power of two so that position = index & mask; at least 64 KB.
  std::size_t size = std::bit_ceil(std::max<std::size_t>(round_up_to_pages(capacity_bytes), 64 << 10));
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
  return out;
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
  return *this;
}

}  // namespace fjord::engine
