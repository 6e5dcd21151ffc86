#include "fjord/transport/cluster_key.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "fjord/base/assert.h"
#include "fjord/base/byte_io.h"
#include "fjord/base/fd.h"

namespace fjord::transport {
namespace {

Status refuse(const std::string& path, const std::string& what) {
  return Status(StatusCode::kInvalidArgument, "ClusterKeyFile " + path + ": " + what);
}

std::string octal_mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// The checks on the open file: type, owner, permission bits, size.
Status check_file(const std::string& path, const struct stat& st) {
  if (!S_ISREG(st.st_mode)) return refuse(path, "is not a regular file");
  if (st.st_uid != ::geteuid())
    return refuse(path, "is owned by uid " + std::to_string(st.st_uid) + " but this process runs as uid " +
                            std::to_string(::geteuid()) + " (a key file belongs to the node's own user)");
  if ((st.st_mode & 077) != 0)
    return refuse(path, "has mode " + octal_mode(st.st_mode) +
                            ", which lets group or others use it (chmod 600 it: the key is the cluster's secret)");
  if (st.st_size > static_cast<off_t>(kClusterKeyMaxBytes))
    return refuse(path, "is " + std::to_string(st.st_size) + " bytes; a cluster key is at most " +
                            std::to_string(kClusterKeyMaxBytes));
  return Status::ok();
}

}  // namespace

Result<ClusterKey> ClusterKey::load(const std::string& path) {
  // O_NONBLOCK: a FIFO named by mistake must not block the open; the type
  // check refuses it.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!fd.valid()) return refuse(path, std::string("cannot be opened: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return refuse(path, std::string("fstat: ") + std::strerror(errno));
  if (Status s = check_file(path, st); !s) return s;
  std::vector<std::byte> secret(kClusterKeyMaxBytes + 1);
  std::size_t got = 0;
  while (got < secret.size()) {
    const ssize_t n = ::read(fd.get(), secret.data() + got, secret.size() - got);
    if (n == 0) break;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return refuse(path, std::string("read: ") + std::strerror(errno));
    got += static_cast<std::size_t>(n);
  }
  // Line ends at the end are how editors and `openssl rand -hex` leave a
  // file, not part of the key.
  while (got > 0 && (secret[got - 1] == std::byte{'\n'} || secret[got - 1] == std::byte{'\r'})) --got;
  ClusterKey key(path, std::move(secret));  // wipes what was read on every return below
  if (got > kClusterKeyMaxBytes)
    return refuse(path, "grew past " + std::to_string(kClusterKeyMaxBytes) + " bytes while it was read");
  if (got < kClusterKeyMinBytes)
    return refuse(path, "holds " + std::to_string(got) + " bytes; a cluster key needs at least " +
                            std::to_string(kClusterKeyMinBytes) + " (for example `openssl rand -hex 32 > " + path +
                            "`)");
  OPENSSL_cleanse(key.secret_.data() + got, key.secret_.size() - got);
  key.secret_.resize(got);
  return key;
}

ClusterKey::~ClusterKey() {
  if (!secret_.empty()) OPENSSL_cleanse(secret_.data(), secret_.size());
}

AuthMac ClusterKey::proof(AuthRole role, const AuthContext& context) const {
  FJORD_ASSERT(secret_.size() >= kClusterKeyMinBytes);
  FJORD_ASSERT(context.type.size() <= 255);
  ByteWriter w;
  const std::string_view label = role == AuthRole::kClient ? "fjord-client" : "fjord-server";
  w.raw(label.data(), label.size());
  w.u8(0);
  w.raw(context.server_nonce.data(), context.server_nonce.size());
  w.raw(context.client_nonce.data(), context.client_nonce.size());
  w.u16(context.client_node);
  w.u16(context.server_node);
  w.u8(static_cast<uint8_t>(context.type.size()));
  w.raw(context.type.data(), context.type.size());
  const std::vector<std::byte> message = w.take();
  AuthMac mac{};
  unsigned int mac_bytes = 0;
  const unsigned char* done = HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
                                   reinterpret_cast<const unsigned char*>(message.data()), message.size(),
                                   reinterpret_cast<unsigned char*>(mac.data()), &mac_bytes);
  FJORD_ASSERT_MSG(done != nullptr, "HMAC-SHA256 failed (libcrypto)");
  FJORD_ASSERT(mac_bytes == kAuthMacBytes);
  return mac;
}

AuthNonce random_nonce() {
  AuthNonce nonce{};
  std::size_t got = 0;
  while (got < nonce.size()) {
    const ssize_t n = ::getrandom(nonce.data() + got, nonce.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    FJORD_ASSERT_MSG(n > 0, "getrandom failed");
    got += static_cast<std::size_t>(n);
  }
  return nonce;
}

bool proofs_equal(const AuthMac& a, const AuthMac& b) { return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0; }

}  // namespace fjord::transport
