#include "media.h"

#include <dirent.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "builtin_transporters.h"
#include "fjord/base/assert.h"
#include "fjord/tcp/tls_credentials.h"

namespace fjord::test {
namespace {

std::string unique_suffix() {
  static std::atomic<unsigned> counter{0};
  return std::to_string(::getpid()) + std::to_string(counter.fetch_add(1));
}

std::string common(const char* type, NodeId a, NodeId b) {
  return std::string("[") + type + "]\nNodeId1=" + std::to_string(a) + "\nNodeId2=" + std::to_string(b) +
         "\nNodeIdServer=" + std::to_string(a) + "\n";
}

std::string tcp_section(NodeId a, NodeId b, const std::string& extra) {
  return common("tcp", a, b) + "HostName1=127.0.0.1\nHostName2=127.0.0.1\nPortNumber=0\n" + extra;
}

// A cluster CA and certificates for nodes 1..kTlsNodes in a private
// directory, made on first use and removed when the process exits.
constexpr NodeId kTlsNodes = 16;

class TlsDirectory {
 public:
  TlsDirectory() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/fjord-tls-media.XXXXXX";
    const char* made = ::mkdtemp(pattern.data());
    FJORD_ASSERT_MSG(made != nullptr, "mkdtemp for the TLS medium's credentials");
    path_ = pattern;
    std::vector<NodeId> nodes;
    for (NodeId n = 1; n <= kTlsNodes; ++n) nodes.push_back(n);
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
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

const std::string& tls_directory() {
  static TlsDirectory directory;
  return directory.path();
}

std::string tcp_tls_section(NodeId a, NodeId b, const std::string& extra) {
  return tcp_section(a, b, "RequireTls=1\nTlsSearchPath=" + tls_directory() + "\n" + extra);
}

std::string shm_section(NodeId a, NodeId b, const std::string& extra) {
  return common("shm", a, b) + "ShmKey=" + unique_suffix() + "\n" + extra;
}

std::string sim_section(NodeId a, NodeId b, const std::string& extra) {
  return common("sim", a, b) + "SimEndpoint=" + unique_suffix() + "\n" + extra;
}

std::string rdma_section(NodeId a, NodeId b, const std::string& extra) {
  const char* ip = ::getenv("RXE_IP");
  const std::string host = ip ? ip : "127.0.0.1";
  return common("rdma", a, b) + "HostName1=" + host + "\nHostName2=" + host + "\nPortNumber=0\n" + extra;
}

const Medium kAll[] = {
    {"tcp", tcp_section},   {"tcp", tcp_tls_section, false, "tcp_tls"},
    {"shm", shm_section},   {"sim", sim_section, /*in_process_only=*/true},
    {"rdma", rdma_section},
};

}  // namespace

std::vector<Medium> contract_media() {
  std::vector<Medium> out;
  for (const Medium& m : kAll)
    if (tools::builtin_registry().find(m.type)) out.push_back(m);
  return out;
}

const Medium* find_medium(const std::string& type) {
  for (const Medium& m : kAll)
    if (m.name() == type) return &m;
  return nullptr;
}

}  // namespace fjord::test
