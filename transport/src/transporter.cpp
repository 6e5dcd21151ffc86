#include "fjord/transport/transporter.h"

#include <poll.h>

#include <algorithm>

#include "fjord/base/clock.h"
#include "fjord/base/log.h"

namespace fjord::transport {

const char* send_pressure_name(SendPressure pressure) noexcept {
  switch (pressure) {
    case SendPressure::kNormal: return "normal";
    case SendPressure::kSlowdown: return "slowdown";
    case SendPressure::kOverload: return "overload";
  }
  return "?";
}

Transporter::Transporter(LinkConfig config, NodeId self) : config_(std::move(config)), self_(self) {
  FJORD_ASSERT(config_.involves(self_));
}

Transporter::~Transporter() = default;

void Transporter::compute_thresholds() const {
  const std::size_t capacity = send_buffer_capacity();
  // The configured limits are fractions of SendBufferMemory; a medium whose
  // own memory differs (an SHM ring of ShmSize) is judged proportionally.
  const auto scale = [&](uint64_t limit) {
    return config_.send_buffer_bytes == 0
               ? limit
               : static_cast<uint64_t>(static_cast<long double>(limit) * capacity / config_.send_buffer_bytes);
  };
  slowdown_threshold_.store(scale(config_.slowdown_bytes), std::memory_order_relaxed);
  overload_threshold_.store(scale(config_.overload_bytes), std::memory_order_relaxed);
  // Release pairs with the acquire in send_pressure(): a thread that sees the
  // flag sees both thresholds.
  thresholds_ready_.store(true, std::memory_order_release);
}

SendPressure Transporter::send_pressure() const {
  if (!thresholds_ready_.load(std::memory_order_acquire)) compute_thresholds();
  const std::size_t used = send_buffer_used();
  if (used >= overload_threshold_.load(std::memory_order_relaxed)) return SendPressure::kOverload;
  if (used >= slowdown_threshold_.load(std::memory_order_relaxed)) return SendPressure::kSlowdown;
  return SendPressure::kNormal;
}

bool Transporter::send_signal(const frame::SignalHeader& header, std::span<const uint32_t> data,
                              std::span<const std::span<const std::byte>> sections, bool flush_now) {
  if (sections.size() > frame::kMaxSections) return false;
  const std::size_t bytes = frame::frame_bytes_for(data.size(), sections, config_.checksum);
  FJORD_ASSERT_MSG(bytes != 0, "signal too large for one frame");
  std::span<std::byte> space = reserve(bytes);
  if (space.empty()) return false;
  commit(frame::pack_frame_sized(space.data(), bytes, header, data, sections, config_.checksum), 1);
  if (flush_now) return flush() != FlushStatus::kDown;
  return true;
}

WaitResult Transporter::wait_for_receive(uint64_t timeout_ns, uint64_t spin_ns) {
  const uint64_t start = monotonic_ns();
  const uint64_t deadline = timeout_ns == UINT64_MAX ? UINT64_MAX : start + timeout_ns;
  const uint64_t spin_until = std::min(deadline, start + spin_ns);
  for (;;) {
    if (receive().frames != 0) return WaitResult::kReady;
    if (!is_up()) return WaitResult::kDown;
    if (monotonic_ns() >= spin_until) break;
    cpu_relax();
  }
  for (;;) {
    if (arm_wakeup()) {
      const uint64_t now = monotonic_ns();
      if (now >= deadline) {
        disarm_wakeup();
        return WaitResult::kTimeout;
      }
      const uint64_t left_ms =
          deadline == UINT64_MAX ? 1000 : std::min<uint64_t>((deadline - now + 999'999) / 1'000'000, 1000);
      pollfd p{wait_fd(), POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(left_ms));
    }
    disarm_wakeup();
    if (receive().frames != 0) return WaitResult::kReady;
    if (!is_up()) return WaitResult::kDown;
    if (monotonic_ns() >= deadline) return WaitResult::kTimeout;
  }
}

Status Transporter::down_reason() const {
  std::lock_guard lock(down_mutex_);
  return down_reason_;
}

void Transporter::close(const std::string& why) {
  declare_down(Status(StatusCode::kLinkDown, "closed locally: " + why));
}

bool Transporter::declare_down(Status reason) {
  {
    std::lock_guard lock(down_mutex_);
    if (state_.load(std::memory_order_relaxed) == LinkState::kDown) return false;
    down_reason_ = reason.is_ok() ? Status(StatusCode::kLinkDown, "link down") : std::move(reason);
    // Release pairs with the acquire in state(): whoever sees kDown also sees the reason.
    state_.store(LinkState::kDown, std::memory_order_release);
  }
  FJORD_LOG_INFO("%s: node %u -> %u down: %s", config_.describe().c_str(), self_, remote_node(),
                 down_reason_.message().c_str());
  on_down();
  return true;
}

void Transporter::note_commit(std::size_t bytes, uint32_t frames) {
  bump(send_.bytes, bytes);
  bump(send_.frames, frames);
}

void Transporter::note_send(std::size_t bytes) {
  bump(send_.sends, 1);
  send_.window_bytes += bytes;
  if (++send_.window_count == kStatsWindow) {
    send_.mean_bytes.store(send_.window_bytes / kStatsWindow, std::memory_order_relaxed);
    send_.window_bytes = send_.window_count = 0;
  }
}

void Transporter::note_receive(std::size_t bytes, uint32_t frames) {
  bump(receive_.bytes, bytes);
  bump(receive_.frames, frames);
  bump(receive_.receives, 1);
  receive_.window_bytes += bytes;
  if (++receive_.window_count == kStatsWindow) {
    receive_.mean_bytes.store(receive_.window_bytes / kStatsWindow, std::memory_order_relaxed);
    receive_.window_bytes = receive_.window_count = 0;
  }
}

void Transporter::note_connect() { connects_.fetch_add(1, std::memory_order_relaxed); }

void Transporter::note_send_buffer_level() {
  const SendPressure now = send_pressure();
  if (now > send_.level) {
    if (send_.level == SendPressure::kNormal) bump(send_.slowdowns, 1);
    if (now == SendPressure::kOverload) bump(send_.overloads, 1);
  }
  send_.level = now;
}

// The window's mean once one is full; before that (a link's first 4096
// sends or receives) the mean so far, not 0, which read as empty sends. A
// full window's mean is never 0: only sends and receives that moved bytes
// are counted.
static uint64_t mean_of(uint64_t window_mean, uint64_t bytes, uint64_t count) {
  return window_mean != 0 || count == 0 ? window_mean : bytes / count;
}

LinkStats Transporter::stats() const {
  LinkStats s;
  s.bytes_sent = send_.bytes.load(std::memory_order_relaxed);
  s.frames_sent = send_.frames.load(std::memory_order_relaxed);
  s.sends = send_.sends.load(std::memory_order_relaxed);
  s.mean_send_bytes = mean_of(send_.mean_bytes.load(std::memory_order_relaxed), s.bytes_sent, s.sends);
  s.slowdown_count = send_.slowdowns.load(std::memory_order_relaxed);
  s.overload_count = send_.overloads.load(std::memory_order_relaxed);
  s.bytes_received = receive_.bytes.load(std::memory_order_relaxed);
  s.frames_received = receive_.frames.load(std::memory_order_relaxed);
  s.receives = receive_.receives.load(std::memory_order_relaxed);
  s.mean_receive_bytes = mean_of(receive_.mean_bytes.load(std::memory_order_relaxed), s.bytes_received, s.receives);
  s.connects = connects_.load(std::memory_order_relaxed);
  s.disconnects = state() == LinkState::kDown ? 1 : 0;
  return s;
}

}  // namespace fjord::transport
