// The transporter contract: one link between two nodes, over any medium.
//
// This is the only interface the engine sees. TCP, shared memory, RDMA,
// DPDK Ethernet and the simulated transporter implement it;
// docs/transport.md maps each onto it.
// Set-up lives in registry.h (TransporterFactory, Listener).
//
// Data path, batched: one virtual call moves many signals, never one call per
// signal.
//
//   send (the link's sender thread):
//     auto space = t.reserve(n);          // writable bytes in the transporter's own memory
//     ... pack frames into space ...      // frame::pack_frame, in place
//     t.commit(bytes, frames);            // publish them (whole frames only)
//     t.flush();                          // hand committed bytes to the medium, wake the peer
//
//   receive (the link's receiver thread):
//     ReceiveBatch b = t.receive();       // whole, validated frames in transporter memory
//     for (frame::FrameCursor c(b.bytes); c.next(view);) ...
//     t.release(b.bytes.size());          // give the space back (may release a prefix)
//
// Guarantees
//   * Reliable, in-order delivery of committed frames until the link is down.
//     Frames received before the link went down are still returned by
//     receive(); after them receive() returns an empty batch and state() is
//     kDown with a reason. A down link is never silent.
//   * Back-pressure, never a drop: reserve() returns an empty span when the
//     send memory is full; send_pressure() says kSlowdown / kOverload before
//     that (LinkConfig::slowdown_bytes, overload_bytes).
//   * No unbounded queue: all send and receive memory is sized at set-up.
//   * A malformed frame from the peer takes this link down with a reason
//     naming the error; other links are not affected.
//   * Sleep without lost wake-ups: arm_wakeup() returns false if data is
//     already there; once it returned true, any frame the peer commits and
//     flushes afterwards makes wait_fd() readable.
//
// Threads: at most one thread uses the send side and one thread the receive
// side at a time (they may be the same thread). state(), down_reason(),
// stats() and close() may be called from any thread. The object is destroyed
// only when no thread uses it. Hot path: reserve/commit/flush/receive/release.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>

#include "fjord/base/cache.h"
#include "fjord/base/counter.h"
#include "fjord/base/status.h"
#include "fjord/transport/frame.h"
#include "fjord/transport/link_config.h"
#include "fjord/transport/types.h"

namespace fjord::transport {

enum class LinkState : uint8_t { kUp, kDown };

// NDB's send-buffer levels: kSlowdown asks producers to batch harder and
// stop starting new work; kOverload means new work must be refused.
enum class SendPressure : uint8_t { kNormal = 0, kSlowdown = 1, kOverload = 2 };
const char* send_pressure_name(SendPressure pressure) noexcept;

enum class FlushStatus : uint8_t {
  kFlushed,  // every committed byte is on its way (handed to the medium)
  kPending,  // some committed bytes wait for the medium (socket full, peer ring full); flush again later
  kDown,     // the link is down; see down_reason()
};

enum class WaitResult : uint8_t { kReady, kTimeout, kDown };

struct ReceiveBatch {
  std::span<const std::byte> bytes;  // whole, validated frames; empty if none
  uint32_t frames = 0;
  // After releasing all of `bytes`, receive() may hand out more that has
  // already arrived, at no more cost than a memory poll (no system call): a
  // medium that hands out one peer flush at a time (an SHM ring's batches)
  // says so, and a caller with budget left asks again.
  bool ask_again = false;
};

// A consistent-enough copy of a link's counters (each counter is exact; the
// set is not one atomic snapshot).
struct LinkStats {
  uint64_t bytes_sent = 0;  // committed bytes
  uint64_t frames_sent = 0;
  uint64_t sends = 0;  // flushes that moved bytes to the medium
  uint64_t bytes_received = 0;
  uint64_t frames_received = 0;
  uint64_t receives = 0;  // receive() calls that returned new bytes
  // Over the last full window of kStatsWindow sends (NDB: last 4096); until
  // one is full, over all sends so far (committed bytes / sends).
  uint64_t mean_send_bytes = 0;
  uint64_t mean_receive_bytes = 0;  // same, for receives
  uint64_t slowdown_count = 0;      // entries into kSlowdown or worse
  uint64_t overload_count = 0;      // entries into kOverload
  uint64_t connects = 0;
  uint64_t disconnects = 0;
};

class Transporter {
 public:
  static constexpr uint64_t kStatsWindow = 4096;

  Transporter(LinkConfig config, NodeId self);
  Transporter(const Transporter&) = delete;
  Transporter& operator=(const Transporter&) = delete;
  virtual ~Transporter();

  // ---- identity (any thread) ----------------------------------------------
  const LinkConfig& config() const { return config_; }
  const std::string& type() const { return config_.type; }
  NodeId local_node() const { return self_; }
  NodeId remote_node() const { return config_.peer_of(self_); }

  // ---- send side (the link's sender thread) -------------------------------

  // Returns at least min_bytes (1..frame::kMaxFrameBytes) of contiguous,
  // writable transporter memory, possibly more; or an empty span when that
  // much is not free now (back-pressure: flush() and retry) or the link is
  // down. The span stays valid until commit() or the next reserve().
  virtual std::span<std::byte> reserve(std::size_t min_bytes) = 0;

  // Publishes the first `bytes` of the last reservation, which hold `frames`
  // whole frames. The peer sees them no later than after the next flush().
  virtual void commit(std::size_t bytes, uint32_t frames) = 0;

  // Hands committed bytes to the medium and wakes a sleeping peer.
  virtual FlushStatus flush() = 0;

  // Committed bytes not yet consumed by the peer (or the kernel), and the
  // total send memory, fixed for the transporter's life (send_pressure()
  // scales the limits to it once). send_pressure() compares the first with
  // the limits.
  virtual std::size_t send_buffer_used() const = 0;
  virtual std::size_t send_buffer_capacity() const = 0;
  SendPressure send_pressure() const;

  // Packs one signal with reserve/pack/commit; flushes when asked. For tests,
  // tools and the slow path; the engine packs batches itself. Returns false
  // (nothing sent) when the send memory is full or the link is down.
  bool send_signal(const frame::SignalHeader& header, std::span<const uint32_t> data,
                   std::span<const std::span<const std::byte>> sections = {}, bool flush_now = true);

  // ---- receive side (the link's receiver thread) --------------------------

  // All whole frames received and not yet released, starting at the oldest.
  // Calling it again without release() returns the same bytes (possibly more).
  virtual ReceiveBatch receive() = 0;

  // Gives back the first `bytes` of the last batch; must end on a frame
  // boundary. The batch's memory may be reused afterwards.
  virtual void release(std::size_t bytes) = 0;

  // ---- waiting (the receiver thread) --------------------------------------

  // A descriptor that becomes readable when frames may have arrived or the
  // link went down, for epoll/poll over many links. Valid while up.
  virtual int wait_fd() const = 0;
  // Announces that the receiver is about to sleep on wait_fd(). Returns false
  // (do not sleep) if frames are already available or the link is down.
  virtual bool arm_wakeup() = 0;
  // Called after waking (or when not sleeping after all); drains wake-up
  // tokens so wait_fd() is not readable forever.
  virtual void disarm_wakeup() = 0;

  // Spin for up to spin_ns, then sleep until frames arrive, the link goes
  // down or timeout_ns passes. Transporters may override this with a better
  // single-link primitive (SHM sleeps on a futex).
  virtual WaitResult wait_for_receive(uint64_t timeout_ns, uint64_t spin_ns);

  // ---- link state (any thread) --------------------------------------------
  LinkState state() const { return state_.load(std::memory_order_acquire); }
  bool is_up() const { return state() == LinkState::kUp; }
  // Why the link is down (ok while it is up).
  Status down_reason() const;
  // Takes the link down locally; the peer sees it go down too.
  void close(const std::string& why);

  LinkStats stats() const;

 protected:
  // For implementations. note_* are called by the side that owns the counter.
  void note_commit(std::size_t bytes, uint32_t frames);   // sender thread
  void note_send(std::size_t bytes);                      // sender thread
  void note_receive(std::size_t bytes, uint32_t frames);  // receiver thread
  void note_connect();
  // Recomputes the pressure level after the send memory changed; counts the
  // entries into slowdown and overload. Sender thread.
  void note_send_buffer_level();

  // First caller wins: records the reason, sets kDown and calls on_down().
  // Returns whether this call took the link down. Any thread.
  bool declare_down(Status reason);
  // Release or shut the medium so the peer notices (shutdown(2), mark the
  // shared header). May run on any thread while the other side is busy, so
  // it must only do things that are safe concurrently. Called at most once.
  virtual void on_down() {}

 private:
  struct alignas(kCacheLineBytes) SendCounters {
    std::atomic<uint64_t> bytes{0}, frames{0}, sends{0}, slowdowns{0}, overloads{0};
    std::atomic<uint64_t> mean_bytes{0};
    uint64_t window_bytes = 0, window_count = 0;  // sender thread only
    SendPressure level = SendPressure::kNormal;   // sender thread only
  };
  struct alignas(kCacheLineBytes) ReceiveCounters {
    std::atomic<uint64_t> bytes{0}, frames{0}, receives{0};
    std::atomic<uint64_t> mean_bytes{0};
    uint64_t window_bytes = 0, window_count = 0;  // receiver thread only
  };

  // The slowdown/overload limits scaled to this medium's send memory,
  // computed on first use (the capacity comes from the derived class).
  void compute_thresholds() const;
  // Atomics because a stats reader may be the first caller; recomputing
  // gives the same values, so relaxed stores under a release flag suffice.
  mutable std::atomic<uint64_t> slowdown_threshold_{0};
  mutable std::atomic<uint64_t> overload_threshold_{0};
  mutable std::atomic<bool> thresholds_ready_{false};

  LinkConfig config_;
  NodeId self_;
  std::atomic<LinkState> state_{LinkState::kUp};
  std::atomic<uint64_t> connects_{0};
  mutable std::mutex down_mutex_;  // guards down_reason_ (slow path only)
  Status down_reason_;
  SendCounters send_;
  ReceiveCounters receive_;
};

}  // namespace fjord::transport
