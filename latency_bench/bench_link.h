// The link a run measures: generated config text for nodes 1 (server) and 2
// (client), or a link from the user's config file, where the section name
// chooses the transporter; and the slow-path connect/accept around it.
//
// Generated sections name both hosts and the port, give the transporter's
// endpoint key (ShmKey, SimEndpoint) a value unique to this process for local
// runs (parallel runs never meet) or derived from the port for
// --server/--client (both sides agree), then add the user's --link-param
// lines (which replace generated keys of the same name).
//
// Slow path; one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "fjord/base/status.h"
#include "fjord/transport/registry.h"

namespace fjord::bench {

struct LinkChoice {
  transport::LinkTable table;
  transport::LinkConfig link;  // the link measured
  std::string config_text;     // generated text (empty when from a file)
  std::string config_path;     // the user's file (empty when generated)
};

struct LinkHosts {
  std::string server_host;  // node 1, listens; empty: the medium's local_host()
  std::string client_host;  // node 2, connects; empty: the same
  uint16_t port = 0;        // 0: any free port (local runs)
};

std::string generate_link_config(const transport::TransporterFactory& factory, const LinkHosts& hosts,
                                 std::span<const std::string> link_params);

Result<LinkChoice> generated_link(const transport::TransporterRegistry& registry, const std::string& type,
                                  const LinkHosts& hosts, std::span<const std::string> link_params);
// The first link in `path` whose type is `type` (any type when empty).
Result<LinkChoice> link_from_file(const transport::TransporterRegistry& registry, const std::string& path,
                                  const std::string& type);
Result<LinkChoice> link_from_text(const transport::TransporterRegistry& registry, const std::string& text,
                                  const std::string& type);

// Accepts one connection. Between short waits it calls `still_worth_waiting`
// (e.g. "is the peer process alive?") and gives up with its status.
Result<std::unique_ptr<transport::Transporter>> accept_link(transport::Listener& listener, uint64_t deadline_ns,
                                                            const std::function<Status()>& still_worth_waiting);
// Connects as `self`, retrying while the server is not there yet; a
// rejection by the server ends the attempts at once.
Result<std::unique_ptr<transport::Transporter>> connect_link(transport::TransporterFactory& factory, NodeId self,
                                                             const transport::LinkConfig& link, uint64_t deadline_ns);

}  // namespace fjord::bench
