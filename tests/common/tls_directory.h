// A private directory holding a fresh cluster CA and node certificates
// (fjord/tcp/tls_credentials.h), for tests of TCP links with TLS; removed
// with everything in it when the object goes.
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <span>
#include <string>

#include "fjord/base/assert.h"
#include "fjord/tcp/tls_credentials.h"

namespace fjord::test {

class TlsDirectory {
 public:
  // Credentials for `nodes` (none: an empty directory).
  explicit TlsDirectory(std::span<const NodeId> nodes) {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/fjord-tls-test.XXXXXX";
    const char* made = ::mkdtemp(pattern.data());
    FJORD_ASSERT_MSG(made != nullptr, "mkdtemp for TLS test credentials");
    path_ = pattern;
    if (nodes.empty()) return;
    const Status written = tcp::write_tls_credentials(path_, nodes);
    FJORD_ASSERT_MSG(written.is_ok(), written.to_string().c_str());
  }
  ~TlsDirectory() {
    if (DIR* dir = ::opendir(path_.c_str())) {
      while (const dirent* entry = ::readdir(dir))
        if (entry->d_name[0] != '.') ::unlink((path_ + "/" + entry->d_name).c_str());
      ::closedir(dir);
    }
    ::rmdir(path_.c_str());
  }
  TlsDirectory(const TlsDirectory&) = delete;
  TlsDirectory& operator=(const TlsDirectory&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace fjord::test
