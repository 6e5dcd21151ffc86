// The process's DPDK engine: the EAL, started once and serving every DPDK
// link of the process, the ports (one per device), and the engine thread
// that does all packet I/O (internal header).
//
// All DPDK calls happen on the engine thread, or on another thread holding
// the engine's mutex (which the engine thread holds for each iteration):
// rx/tx queues and mempool caches are not thread-safe, and one thread per
// process polling every port keeps the transporters' own threads free of
// DPDK. Each iteration: receive a burst on every port and hand each packet
// to the endpoint bound to its UDP destination port, then poll every
// endpoint (links send data, acks and retransmissions; handshakes retry),
// then flush the ports' transmit batches. An idle engine spins briefly,
// then sleeps in short slices (kIdleSleepNs, longer after kLongIdleNs);
// a transporter's flush() wakes it at once.
//
// Slow path (set-up): start, open_port, bind, unbind, any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "dpdk_params.h"
#include "dpdk_wire.h"
#include "fjord/base/status.h"

struct rte_mbuf;
struct rte_mempool;

namespace fjord::dpdk {

// Idle engine: iterations spun before sleeping, and the sleep slices.
inline constexpr uint32_t kIdleSpinIterations = 256;
inline constexpr uint64_t kIdleSleepNs = 50'000;
inline constexpr uint64_t kLongIdleNs = 100'000'000;
inline constexpr uint64_t kLongIdleSleepNs = 1'000'000;
// Packets taken from a port per receive call, and sent per transmit call.
inline constexpr uint16_t kBurstPackets = 32;

// Drops, duplicates and reorders sent packets from a seed (test builds set
// the plan with Inject* link parameters; a zero plan never draws).
class FaultInjector {
 public:
  explicit FaultInjector(const FaultPlan& plan) : plan_(plan), random_(plan.seed) {}
  bool active() const { return plan_.active(); }
  enum class Action : uint8_t { kSend, kDrop, kDuplicate, kHold };
  Action draw();
  rte_mbuf*& held() { return held_; }

 private:
  FaultPlan plan_;
  std::mt19937_64 random_;
  rte_mbuf* held_ = nullptr;  // a packet sent after the next one
};

struct Port;

// Sending through one port, for endpoints on the engine thread.
class PortIo {
 public:
  explicit PortIo(Port& port) : port_(port) {}
  // Builds one packet and queues it for transmission. False when the pool
  // has no buffer (the packet counts as lost: the protocol resends).
  bool send(const wire::Addressing& addressing, const wire::Header& header, std::span<const std::byte> payload,
            FaultInjector* faults = nullptr);
  // Sends a packet the injector held back (end of an endpoint's poll).
  void release_held(FaultInjector& faults);
  const wire::MacAddress& mac() const;

 private:
  rte_mbuf* build(const wire::Addressing& addressing, const wire::Header& header, std::span<const std::byte> payload);
  void enqueue(rte_mbuf* packet);
  Port& port_;
};

// Anything bound to a UDP port of a port: a link, a listener, a connecting
// handshake. Engine thread only (or a thread holding the engine's mutex).
class Endpoint {
 public:
  virtual ~Endpoint() = default;
  // A valid packet whose destination is this endpoint's UDP port.
  virtual void on_packet(const wire::Packet& packet, PortIo& io, uint64_t now_ns) = 0;
  // Sends what is due. Returns whether it did anything.
  virtual bool poll(PortIo& io, uint64_t now_ns) = 0;
};

struct Port {
  std::string device;  // the devargs it was opened with
  uint16_t port_id = 0;
  rte_mempool* pool = nullptr;
  wire::MacAddress mac{};
  std::map<uint16_t, std::shared_ptr<Endpoint>> endpoints;  // by UDP port
  std::vector<rte_mbuf*> tx;                                // queued for transmission
  uint64_t dropped_rx = 0;                                  // not ours, malformed, or no endpoint
  uint64_t dropped_tx = 0;                                  // the device did not take them
};

class Engine {
 public:
  // The process's engine, starting the EAL and the engine thread on first
  // call with `eal_args` (empty: the defaults). Later calls return it (or
  // the first call's error) whatever their arguments.
  static Result<Engine*> start(const std::string& eal_args);

  // The port of `device` (DPDK devargs), probed, configured and started on
  // first use. Returns its index for bind().
  Result<std::size_t> open_port(const std::string& device);
  wire::MacAddress mac_of(std::size_t port);

  // Binds `endpoint` to `udp_port` of the port; kAlreadyExists if taken.
  Status bind(std::size_t port, uint16_t udp_port, std::shared_ptr<Endpoint> endpoint);
  // Removes the binding if it still is `endpoint`. After it returns the
  // engine thread no longer uses `endpoint`.
  void unbind(std::size_t port, uint16_t udp_port, const Endpoint* endpoint);
  // A set-up thread retiring `endpoint`: runs `last_words(io)` (its last
  // packets), then binds `successor` (or nothing) in its place if the
  // binding is still `endpoint`.
  template <class F>
  void retire(std::size_t port, uint16_t udp_port, const Endpoint* endpoint, std::shared_ptr<Endpoint> successor,
              F&& last_words) {
    std::lock_guard lock(mutex_);
    Port& p = *ports_[port];
    PortIo io(p);
    last_words(io);
    flush_tx(p);
    auto it = p.endpoints.find(udp_port);
    if (it == p.endpoints.end() || it->second.get() != endpoint) return;
    if (successor)
      it->second = std::move(successor);
    else
      p.endpoints.erase(it);
  }
  // The same from inside on_packet()/poll() (the engine's mutex held):
  // replaces the endpoint bound to `udp_port`.
  void rebind_locked(std::size_t port, uint16_t udp_port, std::shared_ptr<Endpoint> endpoint);

  // Wakes a sleeping engine thread (a transporter published bytes or freed
  // receive space). Any thread; cheap when the engine is awake.
  void notify();

 private:
  Engine() = default;
  void run();
  bool iterate(uint64_t now_ns);
  bool receive(Port& port, uint64_t now_ns);
  void flush_tx(Port& port);
  void idle(uint64_t idle_since_ns);
  Result<std::unique_ptr<Port>> start_port(const std::string& device);

  std::mutex mutex_;  // held by the engine thread for each iteration; guards ports_ and their endpoints
  std::vector<std::unique_ptr<Port>> ports_;
  std::vector<std::shared_ptr<Endpoint>> polling_;  // engine thread: the endpoints of one iteration
  std::mutex sleep_mutex_;
  std::condition_variable sleep_cv_;
  std::atomic<bool> sleeping_{false};
  bool wake_ = false;  // under sleep_mutex_
  std::thread thread_;
};

}  // namespace fjord::dpdk
