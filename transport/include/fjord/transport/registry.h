// Transporter set-up: factories registered by name, and listeners.
//
// Each concrete transporter (tcp, shm, rdma, sim, ...) provides one
// TransporterFactory and registers it; the config file names the factory for
// each link ([tcp], [shm] sections), and the engine asks the registry. Adding
// a transporter adds files and one registration call, never a change here.
//
// Everything here is slow path: virtual, may block until a deadline, may
// allocate. Thread safety: the registry is filled at start-up (before other
// threads use it) and read-only afterwards; factories are stateless and may
// be used from any thread; a Listener is used by one thread at a time.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fjord/base/status.h"
#include "fjord/transport/config_file.h"
#include "fjord/transport/link_config.h"
#include "fjord/transport/transporter.h"
#include "fjord/transport/types.h"

namespace fjord::transport {

// Accepts connection attempts for every link on which this node is the
// server, for one transporter type.
class Listener {
 public:
  virtual ~Listener() = default;

  // Readable when a connection attempt is waiting (for poll/epoll).
  virtual int fd() const = 0;
  // Human-readable address: "127.0.0.1:11860", "@fjord-shm-7".
  virtual std::string endpoint() const = 0;
  // The TCP-style port actually bound (useful with PortNumber=0), else 0.
  virtual uint16_t port() const { return 0; }

  // Takes one waiting attempt and runs the handshake. `deadline` bounds the
  // wait for an attempt; once one is taken its set-up runs to
  // setup_deadline() (handshake.h), so a short slice never abandons a peer
  // half-way. Listeners that shake hands over a stream (TCP, SHM) keep an
  // accepted connection until its whole request is in and meanwhile go on
  // with others (pending_handshakes.h): a silent peer holds up no other, and
  // is closed at its set-up deadline. Returns the connected transporter, or
  // a Status: kTimeout only if no attempt was ready, kRejected with the
  // reason when the peer's node id, type or address does not match the
  // configuration (the peer is told the reason and the rejection is
  // logged), or another error for a failed set-up.
  virtual Result<std::unique_ptr<Transporter>> accept(DeadlineNs deadline) = 0;
};

class TransporterFactory {
 public:
  virtual ~TransporterFactory() = default;

  virtual std::string_view name() const = 0;         // the config section name, e.g. "tcp"
  virtual std::string_view description() const = 0;  // one line for --help and docs
  // Parameters this transporter accepts beyond kCommonLinkParams.
  virtual std::span<const config::ParamSpec> parameters() const = 0;
  // Checks a loaded link beyond per-key ranges (e.g. ShmSize vs frame size).
  virtual Status validate(const LinkConfig& link) const;
  // Whether this transporter can run on this machine now, and if not why
  // ("no RDMA device: ibv_get_device_list: Function not implemented").
  virtual Status probe() const;
  // An address of this machine that this medium can use for a link between
  // two processes here: loopback by default; RDMA needs an address on an
  // RDMA device. For tools and tests that start both ends themselves.
  virtual std::string local_host() const;

  // Starts accepting the links of this type on which `self` is the server.
  // `links` is the whole table, so a peer that asks for the wrong type gets
  // a precise rejection. kNotFound if there is no such link.
  virtual Result<std::unique_ptr<Listener>> listen(NodeId self, const LinkTable& links) = 0;

  // Connects `self` (the client side of `link`) to the server and runs the
  // handshake, bounded by deadline.
  virtual Result<std::unique_ptr<Transporter>> connect(NodeId self, const LinkConfig& link, DeadlineNs deadline) = 0;
};

class TransporterRegistry {
 public:
  // The process-wide registry that programs fill at start-up.
  static TransporterRegistry& global();

  // kAlreadyExists if the name is taken.
  Status add(std::unique_ptr<TransporterFactory> factory);
  TransporterFactory* find(std::string_view name) const;
  std::vector<TransporterFactory*> all() const;
  // "tcp, shm, sim"
  std::string names() const;

 private:
  std::vector<std::unique_ptr<TransporterFactory>> factories_;
};

}  // namespace fjord::transport
