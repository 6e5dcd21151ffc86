// TLS credentials of a cluster: the file names a TCP link with TLS looks up
// in its TlsSearchPath, and a writer that makes a new cluster CA and a
// certificate and key per node with them (docs/transport.md, "TLS").
//
// A node certificate names its node in its common name ("fjord-node-<id>")
// and is signed by the cluster CA; both ends of a link verify the other's.
// Slow path; any thread.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "fjord/base/status.h"
#include "fjord/transport/types.h"

namespace fjord::tcp {

inline constexpr std::string_view kTlsCaCertificateFile = "cluster-ca.crt";
inline constexpr std::string_view kTlsCaKeyFile = "cluster-ca.key";
inline constexpr std::string_view kTlsNodeNamePrefix = "fjord-node-";

std::string tls_node_certificate_file(NodeId node);  // "node-<id>.crt"
std::string tls_node_key_file(NodeId node);          // "node-<id>.key"

// Writes into the existing directory `dir` a new cluster CA (certificate and
// key) and, for each of `nodes`, a certificate signed by it and its key
// (P-256 keys, valid for `valid_days`). Keys are written mode 0600. Replaces
// files of the same names.
Status write_tls_credentials(const std::string& dir, std::span<const NodeId> nodes, int valid_days = 3650);

}  // namespace fjord::tcp
