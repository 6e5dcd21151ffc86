// The engine: EAL start-up, ports, and the engine thread's loop. Every
// DPDK call of the transporter is in this file.
#include "dpdk_engine.h"

#include <pthread.h>
#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <future>
#include <sstream>

#include "fjord/base/clock.h"
#include "fjord/base/log.h"

namespace fjord::dpdk {
namespace {

// Buffers per port's pool: receive descriptors, transmit descriptors in
// flight and the packets an iteration builds, with room to spare.
constexpr unsigned kPoolBuffers = 4095;
constexpr unsigned kPoolCache = 128;
constexpr uint16_t kRingDescriptors = 1024;
// Each buffer holds a whole Ethernet frame of the largest MTU: a packet is
// one segment.
constexpr uint16_t kBufferDataRoom = RTE_PKTMBUF_HEADROOM + wire::kEthernetBytes + wire::kMaxMtu;
constexpr int kTransmitRetries = 8;

// The first CPU this thread may run on, for the EAL's -l.
int first_allowed_cpu() {
  cpu_set_t set;
  if (pthread_getaffinity_np(pthread_self(), sizeof set, &set) != 0) return 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) return cpu;
  return 0;
}

// Works on a machine without huge pages, NICs or a shared runtime
// directory: one core, memory from the heap, no PCI scan, a prefix of its
// own so that processes never share EAL files.
std::vector<std::string> eal_arguments(const std::string& eal_args) {
  std::vector<std::string> args = {"fjord"};
  if (!eal_args.empty()) {
    std::istringstream words(eal_args);
    for (std::string word; words >> word;) args.push_back(word);
    return args;
  }
  for (const char* a : {"--no-huge", "--no-pci", "--iova-mode=va", "--no-shconf", "--no-telemetry", "-m", "128",
                        "--log-level=*:warning"})
    args.emplace_back(a);
  args.push_back("-l");
  args.push_back(std::to_string(first_allowed_cpu()));
  args.push_back("--file-prefix=fjord-" + std::to_string(::getpid()));
  return args;
}

std::string joined(const std::vector<std::string>& args) {
  std::string out;
  for (std::size_t i = 1; i < args.size(); ++i) out += (i > 1 ? " " : "") + args[i];
  return out;
}

// rte_eal_init() on the calling thread (the engine thread, which becomes
// the main lcore). The EAL pins its main lcore; the engine thread goes back
// to the CPUs it had, so that on a small machine it is not tied to one.
Status init_eal(const std::string& eal_args) {
  std::vector<std::string> args = eal_arguments(eal_args);
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  cpu_set_t before;
  const bool have_affinity = pthread_getaffinity_np(pthread_self(), sizeof before, &before) == 0;
  if (rte_eal_init(static_cast<int>(args.size()), argv.data()) < 0)
    return Status(StatusCode::kUnavailable, "rte_eal_init(" + joined(args) + ") failed: " + rte_strerror(rte_errno));
  if (have_affinity) (void)pthread_setaffinity_np(pthread_self(), sizeof before, &before);
  // Nothing of this process's EAL is meant for other processes (no
  // secondary processes): leave no runtime directory behind.
  std::error_code ignored;
  if (eal_args.empty()) std::filesystem::remove_all(rte_eal_get_runtime_dir(), ignored);
  FJORD_LOG_INFO("dpdk: EAL started: %s", joined(args).c_str());
  return Status::ok();
}

void flush_port(Port& port) {
  std::size_t done = 0;
  for (int tries = 0; done < port.tx.size() && tries < kTransmitRetries;) {
    const uint16_t n = rte_eth_tx_burst(port.port_id, 0, port.tx.data() + done,
                                        static_cast<uint16_t>(std::min<std::size_t>(port.tx.size() - done, 512)));
    done += n;
    if (n == 0) ++tries;
  }
  for (std::size_t i = done; i < port.tx.size(); ++i) rte_pktmbuf_free(port.tx[i]);
  port.dropped_tx += port.tx.size() - done;
  port.tx.clear();
}

// One device opened with two sets of arguments (two links disagree).
Status reopened(const std::string& name, const std::string& open_as, const std::string& asked) {
  return Status(StatusCode::kInvalidArgument,
                "DPDK device " + name + " is open as '" + open_as + "', not as '" + asked + "'");
}

Status dpdk_error(const std::string& what, int rc) {
  return Status(StatusCode::kUnavailable, what + ": " + rte_strerror(rc < 0 ? -rc : rc));
}

}  // namespace

// ---- faults and sending ----------------------------------------------------

FaultInjector::Action FaultInjector::draw() {
  uint32_t r = static_cast<uint32_t>(random_() % 100);
  if (r < plan_.loss_percent) return Action::kDrop;
  r -= plan_.loss_percent;
  if (r < plan_.duplicate_percent) return Action::kDuplicate;
  r -= plan_.duplicate_percent;
  if (r < plan_.reorder_percent) return Action::kHold;
  return Action::kSend;
}

const wire::MacAddress& PortIo::mac() const { return port_.mac; }

rte_mbuf* PortIo::build(const wire::Addressing& addressing, const wire::Header& header,
                        std::span<const std::byte> payload) {
  rte_mbuf* m = rte_pktmbuf_alloc(port_.pool);
  if (m == nullptr) return nullptr;
  const std::size_t bytes = wire::kAllHeaderBytes + payload.size();
  const std::size_t frame = std::max(bytes, wire::kMinEthernetFrameBytes);
  FJORD_ASSERT(frame <= kBufferDataRoom - RTE_PKTMBUF_HEADROOM);
  auto* out = reinterpret_cast<std::byte*>(rte_pktmbuf_append(m, static_cast<uint16_t>(frame)));
  if (out == nullptr) {
    rte_pktmbuf_free(m);
    return nullptr;
  }
  (void)wire::encode_headers(out, addressing, header, payload.size());
  if (!payload.empty()) std::memcpy(out + wire::kAllHeaderBytes, payload.data(), payload.size());
  if (frame > bytes) std::memset(out + bytes, 0, frame - bytes);
  return m;
}

void PortIo::enqueue(rte_mbuf* packet) {
  port_.tx.push_back(packet);
  if (port_.tx.size() >= kBurstPackets) flush_port(port_);
}

bool PortIo::send(const wire::Addressing& addressing, const wire::Header& header, std::span<const std::byte> payload,
                  FaultInjector* faults) {
  FJORD_ASSERT(wire::kAllHeaderBytes + payload.size() <= wire::kEthernetBytes + wire::kMaxMtu);
  const FaultInjector::Action action =
      faults != nullptr && faults->active() ? faults->draw() : FaultInjector::Action::kSend;
  if (action == FaultInjector::Action::kDrop) return true;
  rte_mbuf* m = build(addressing, header, payload);
  if (m == nullptr) return false;
  if (action == FaultInjector::Action::kHold) {
    std::swap(m, faults->held());  // the earlier held packet, if any, goes now
    if (m != nullptr) enqueue(m);
    return true;
  }
  enqueue(m);
  if (action == FaultInjector::Action::kDuplicate)
    if (rte_mbuf* again = build(addressing, header, payload)) enqueue(again);
  if (faults != nullptr && faults->held() != nullptr) release_held(*faults);
  return true;
}

void PortIo::release_held(FaultInjector& faults) {
  if (faults.held() == nullptr) return;
  enqueue(faults.held());
  faults.held() = nullptr;
}

// ---- the engine ------------------------------------------------------------

Result<Engine*> Engine::start(const std::string& eal_args) {
  static std::mutex start_mutex;
  static Engine* engine = nullptr;
  static Status failure;
  static bool tried = false;
  std::lock_guard lock(start_mutex);
  if (tried) {
    if (engine != nullptr) return engine;
    return failure;
  }
  tried = true;
  // Never destroyed: the engine thread serves links until the process ends.
  auto* e = new Engine();
  std::promise<Status> started;
  std::future<Status> result = started.get_future();
  e->thread_ = std::thread([e, eal_args, &started] {
    Status s = init_eal(eal_args);
    const bool ok = s.is_ok();
    started.set_value(std::move(s));
    if (ok) e->run();
  });
  Status s = result.get();
  if (!s) {
    e->thread_.join();
    delete e;
    failure = s;
    return s;
  }
  e->thread_.detach();
  engine = e;
  return e;
}

Result<std::size_t> Engine::open_port(const std::string& device) {
  std::lock_guard lock(mutex_);
  const std::string name = device.substr(0, device.find(','));
  for (std::size_t i = 0; i < ports_.size(); ++i) {
    if (ports_[i]->device == device) return i;
    if (ports_[i]->device.substr(0, ports_[i]->device.find(',')) == name)
      return reopened(name, ports_[i]->device, device);
  }
  auto port = start_port(device);
  if (!port) return port.status();
  ports_.push_back(std::move(port).value());
  return ports_.size() - 1;
}

Result<std::unique_ptr<Port>> Engine::start_port(const std::string& device) {
  const std::string name = device.substr(0, device.find(','));
  uint16_t id = 0;
  if (rte_eth_dev_get_port_by_name(name.c_str(), &id) != 0) {
    if (int rc = rte_dev_probe(device.c_str()); rc < 0)
      return dpdk_error("cannot probe DPDK device '" + device + "'", rc);
    if (rte_eth_dev_get_port_by_name(name.c_str(), &id) != 0)
      return Status(StatusCode::kUnavailable, "DPDK device '" + device + "' has no Ethernet port named " + name);
  }
  auto port = std::make_unique<Port>();
  port->device = device;
  port->port_id = id;
  const std::string pool_name = "fjord_pool_" + std::to_string(id);
  port->pool = rte_pktmbuf_pool_create(pool_name.c_str(), kPoolBuffers, kPoolCache, 0, kBufferDataRoom,
                                       static_cast<int>(rte_socket_id()));
  if (port->pool == nullptr) return dpdk_error("rte_pktmbuf_pool_create for " + name, rte_errno);
  rte_eth_conf conf{};
  if (int rc = rte_eth_dev_configure(id, 1, 1, &conf); rc < 0) return dpdk_error("rte_eth_dev_configure " + name, rc);
  const int socket = rte_eth_dev_socket_id(id);
  const unsigned numa = socket < 0 ? 0 : static_cast<unsigned>(socket);
  if (int rc = rte_eth_rx_queue_setup(id, 0, kRingDescriptors, numa, nullptr, port->pool); rc < 0)
    return dpdk_error("rte_eth_rx_queue_setup " + name, rc);
  if (int rc = rte_eth_tx_queue_setup(id, 0, kRingDescriptors, numa, nullptr); rc < 0)
    return dpdk_error("rte_eth_tx_queue_setup " + name, rc);
  (void)rte_eth_promiscuous_enable(id);  // several links' MACs may share it; not every driver has the mode
  if (int rc = rte_eth_dev_start(id); rc < 0) return dpdk_error("rte_eth_dev_start " + name, rc);
  rte_ether_addr mac{};
  if (rte_eth_macaddr_get(id, &mac) == 0) std::memcpy(port->mac.data(), mac.addr_bytes, 6);
  port->tx.reserve(2 * kBurstPackets);
  FJORD_LOG_INFO("dpdk: port %u is %s (MAC %s)", id, device.c_str(), wire::format_mac(port->mac).c_str());
  return port;
}

wire::MacAddress Engine::mac_of(std::size_t port) {
  std::lock_guard lock(mutex_);
  return ports_[port]->mac;
}

Status Engine::bind(std::size_t port, uint16_t udp_port, std::shared_ptr<Endpoint> endpoint) {
  FJORD_ASSERT(endpoint != nullptr);
  std::lock_guard lock(mutex_);
  FJORD_ASSERT(port < ports_.size());
  auto [it, added] = ports_[port]->endpoints.emplace(udp_port, std::move(endpoint));
  if (!added)
    return Status(StatusCode::kAlreadyExists, "UDP port " + std::to_string(udp_port) + " of DPDK device " +
                                                  ports_[port]->device + " is already used by another link");
  return Status::ok();
}

void Engine::unbind(std::size_t port, uint16_t udp_port, const Endpoint* endpoint) {
  std::lock_guard lock(mutex_);
  auto& endpoints = ports_[port]->endpoints;
  auto it = endpoints.find(udp_port);
  if (it != endpoints.end() && it->second.get() == endpoint) endpoints.erase(it);
}

void Engine::rebind_locked(std::size_t port, uint16_t udp_port, std::shared_ptr<Endpoint> endpoint) {
  ports_[port]->endpoints[udp_port] = std::move(endpoint);
}

void Engine::notify() {
  // Relaxed: a wake-up that misses the engine's going to sleep costs at
  // most one sleep slice, never a lost packet.
  if (!sleeping_.load(std::memory_order_relaxed)) return;
  std::lock_guard lock(sleep_mutex_);
  wake_ = true;
  sleep_cv_.notify_one();
}

void Engine::run() {
  uint64_t idle_since = monotonic_ns();
  uint32_t idle_iterations = 0;
  for (;;) {
    const uint64_t now = monotonic_ns();
    bool worked;
    {
      std::lock_guard lock(mutex_);
      worked = iterate(now);
    }
    if (worked) {
      idle_iterations = 0;
      idle_since = now;
    } else if (++idle_iterations < kIdleSpinIterations) {
      cpu_relax();
    } else {
      idle(idle_since);
    }
  }
}

bool Engine::iterate(uint64_t now_ns) {
  bool worked = false;
  for (auto& port : ports_) worked |= receive(*port, now_ns);
  for (auto& port : ports_) {
    polling_.clear();
    for (auto& [udp, endpoint] : port->endpoints) polling_.push_back(endpoint);
    PortIo io(*port);
    for (auto& endpoint : polling_) worked |= endpoint->poll(io, now_ns);
    flush_port(*port);
  }
  polling_.clear();
  return worked;
}

bool Engine::receive(Port& port, uint64_t now_ns) {
  rte_mbuf* burst[kBurstPackets];
  const uint16_t n = rte_eth_rx_burst(port.port_id, 0, burst, kBurstPackets);
  PortIo io(port);
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = burst[i];
    wire::Packet packet;
    const std::span<const std::byte> bytes(rte_pktmbuf_mtod(m, const std::byte*), m->data_len);
    if (m->nb_segs == 1 && wire::decode_packet(bytes, packet) == wire::PacketError::kNone) {
      auto it = port.endpoints.find(packet.addressing.destination_port);
      if (it != port.endpoints.end()) {
        std::shared_ptr<Endpoint> endpoint = it->second;  // on_packet may rebind its port
        endpoint->on_packet(packet, io, now_ns);
      } else {
        ++port.dropped_rx;
      }
    } else {
      ++port.dropped_rx;
    }
    rte_pktmbuf_free(m);
  }
  return n != 0;
}

void Engine::flush_tx(Port& port) { flush_port(port); }

void Engine::idle(uint64_t idle_since_ns) {
  const uint64_t slice = monotonic_ns() - idle_since_ns > kLongIdleNs ? kLongIdleSleepNs : kIdleSleepNs;
  std::unique_lock lock(sleep_mutex_);
  sleeping_.store(true, std::memory_order_relaxed);
  sleep_cv_.wait_for(lock, std::chrono::nanoseconds(slice), [this] { return wake_; });
  wake_ = false;
  sleeping_.store(false, std::memory_order_relaxed);
}

}  // namespace fjord::dpdk
