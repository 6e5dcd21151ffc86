// The cluster key: a shared secret every node of an authenticated cluster
// holds in a file (the node parameter ClusterKeyFile), and the proofs its
// links exchange at set-up to show each end holds it without sending it.
//
// A proof is HMAC-SHA256 keyed with the cluster key over a role label
// ("fjord-client" / "fjord-server"), the accepting side's nonce, the
// connecting side's nonce, both node ids and the transporter type, so that a
// proof is good for one connection attempt only and cannot be replayed as
// the other role or on another link (docs/transport.md, "Authentication").
//
// The key file must be a regular file owned by the process's user with no
// group or other permission bits, of kClusterKeyMinBytes..kClusterKeyMaxBytes
// (line ends at its end do not count); load() refuses anything else with the
// path and what is wrong.
//
// Slow path (set-up only); any thread. Nothing here runs per signal.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fjord/base/status.h"
#include "fjord/transport/types.h"

namespace fjord::transport {

inline constexpr std::size_t kClusterKeyMinBytes = 32;    // 256 bits when the bytes are random
inline constexpr std::size_t kClusterKeyMaxBytes = 4096;  // bounds the read of a mistaken path
inline constexpr std::size_t kAuthNonceBytes = 32;
inline constexpr std::size_t kAuthMacBytes = 32;  // HMAC-SHA256

using AuthNonce = std::array<std::byte, kAuthNonceBytes>;
using AuthMac = std::array<std::byte, kAuthMacBytes>;

// Which end of a connection a proof speaks for.
enum class AuthRole : uint8_t { kClient, kServer };

// What a proof binds besides the key: one connection attempt of one link.
struct AuthContext {
  AuthNonce server_nonce{};
  AuthNonce client_nonce{};
  NodeId client_node = kNoNode;
  NodeId server_node = kNoNode;
  std::string_view type;  // transporter name
};

class ClusterKey {
 public:
  // Reads and checks the key file at `path` (see the header comment).
  static Result<ClusterKey> load(const std::string& path);

  ClusterKey(ClusterKey&& other) noexcept = default;
  ClusterKey& operator=(ClusterKey&& other) noexcept = default;
  ClusterKey(const ClusterKey&) = delete;
  ClusterKey& operator=(const ClusterKey&) = delete;
  ~ClusterKey();  // wipes the secret

  const std::string& path() const { return path_; }
  AuthMac proof(AuthRole role, const AuthContext& context) const;

 private:
  ClusterKey(std::string path, std::vector<std::byte> secret) : path_(std::move(path)), secret_(std::move(secret)) {}
  std::string path_;
  std::vector<std::byte> secret_;
};

// A fresh random nonce from the kernel's generator.
AuthNonce random_nonce();
// Compares in time that does not depend on where the two differ.
bool proofs_equal(const AuthMac& a, const AuthMac& b);

}  // namespace fjord::transport
