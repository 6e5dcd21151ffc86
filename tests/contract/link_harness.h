// Test harness for the contract suite: builds link tables from config text,
// connects pairs of transporters over any medium, and sends/checks frames
// that carry a sequence number and a payload derived from it.
#pragma once

#include <memory>
#include <string>

#include "fjord/base/status.h"
#include "fjord/transport/frame.h"
#include "fjord/transport/registry.h"
#include "media.h"

namespace fjord::test {

// The built-in transporters plus "dummy", a factory that is registered but
// never connects (for type-mismatch tests).
transport::TransporterRegistry& test_registry();

Result<transport::LinkTable> load_links(const std::string& config_text);

struct LinkPair {
  std::unique_ptr<transport::Listener> listener;
  std::unique_ptr<transport::Transporter> server;  // node `server_node`'s end
  std::unique_ptr<transport::Transporter> client;
};

// The client link as the connecting side must see it (PortNumber patched
// to the listener's real port when the test asked for port 0).
transport::LinkConfig client_view(const transport::LinkConfig& link, const transport::Listener& listener);

// Listens as `server_node` using `server_table`, connects as `client_node`
// using `client_link`, and accepts. On a rejected connect, returns the
// client's status (the server's rejection is in *server_status if given).
Result<LinkPair> connect_pair(const transport::LinkTable& server_table, NodeId server_node,
                              const transport::LinkConfig& client_link, NodeId client_node,
                              Status* server_status = nullptr);

// One link 1 (server) - 2 (client) over `medium`, with extra config lines.
Result<LinkPair> make_pair(const Medium& medium, const std::string& extra_lines = "");

// Sequenced frames: data words {seq low, seq high, payload bytes}, one
// section of payload bytes derived from seq. Returns frame bytes written or 0.
std::size_t pack_sequenced(std::span<std::byte> dest, uint64_t seq, std::size_t payload_bytes, bool checksum);
std::size_t sequenced_frame_bytes(std::size_t payload_bytes, bool checksum);
// Sends one sequenced frame (reserve, pack, commit, flush). False when full.
bool send_sequenced(transport::Transporter& t, uint64_t seq, std::size_t payload_bytes);
// Empty string if `view` is frame `expected_seq`, else what is wrong.
std::string check_sequenced(const frame::SignalView& view, uint64_t expected_seq);

// Receives and checks frames until `count` have arrived in order starting at
// *next_seq, or the deadline passes. Returns "" or a failure description.
std::string receive_sequenced(transport::Transporter& t, uint64_t* next_seq, uint64_t count, uint64_t timeout_ns);

// Payload size used for the k-th frame of a mixed-size stream (24 B .. 32 KB).
std::size_t mixed_payload_bytes(uint64_t seq);

inline constexpr uint16_t kTestSignal = 77;

}  // namespace fjord::test
