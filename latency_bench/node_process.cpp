#include "node_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "fjord/base/clock.h"
#include "fjord/engine/data_node.h"
#include "fjord/engine/storage/page_pool.h"
#include "fjord/transport/config_file.h"
#include "options.h"

namespace fjord::bench {
namespace {

constexpr uint64_t kStopGraceNs = 5'000'000'000ULL;
constexpr uint64_t kReadyPollNs = 20'000'000;
constexpr std::size_t kOutputTailBytes = 600;

static_assert(kDataMemoryPageBytes == engine::storage::PagePool::kPageBytes);

// What SIGINT/SIGTERM must clean up while a node runs. Plain storage only:
// the handler may use async-signal-safe calls and nothing else.
struct InterruptCleanup {
  volatile sig_atomic_t pid = 0;
  char files[3][512] = {};  // the node's config and log; a helper's file
  char dirs[2][512] = {};   // the node's directory; a helper's
};
InterruptCleanup g_cleanup;
struct sigaction g_old_int, g_old_term;

void on_interrupt(int signal_number) {
  if (g_cleanup.pid > 0) {
    ::kill(g_cleanup.pid, SIGKILL);
    ::waitpid(g_cleanup.pid, nullptr, 0);
  }
  for (const char* file : g_cleanup.files)
    if (file[0] != '\0') ::unlink(file);
  for (const char* dir : g_cleanup.dirs)
    if (dir[0] != '\0') ::rmdir(dir);
  ::signal(signal_number, SIG_DFL);
  ::raise(signal_number);
}

void copy_path(char (&out)[512], const std::string& path) {
  const std::size_t n = std::min(path.size(), sizeof out - 1);
  std::memcpy(out, path.data(), n);
  out[n] = '\0';
}

// Sets a path the handler may read at any moment: it sees an empty path or
// a complete one, because the first byte goes in last (the signal fences
// keep the compiler from reordering the writes around it).
void publish_path(char (&out)[512], const std::string& path) {
  out[0] = '\0';
  std::atomic_signal_fence(std::memory_order_seq_cst);
  const std::size_t n = std::min(path.size(), sizeof out - 1);
  if (n == 0) return;
  std::memcpy(out + 1, path.data() + 1, n - 1);
  out[n] = '\0';
  std::atomic_signal_fence(std::memory_order_seq_cst);
  out[0] = path[0];
}

void arm_cleanup(pid_t pid, const NodeLaunch& launch, const std::string& log_path) {
  g_cleanup = InterruptCleanup{};
  g_cleanup.pid = pid;
  if (!launch.temp_dir.empty()) {
    copy_path(g_cleanup.files[0], launch.config_path);
    copy_path(g_cleanup.files[1], log_path);
    copy_path(g_cleanup.dirs[0], launch.temp_dir);
  }
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, &g_old_int);
  ::sigaction(SIGTERM, &action, &g_old_term);
}

void disarm_cleanup() {
  ::sigaction(SIGINT, &g_old_int, nullptr);
  ::sigaction(SIGTERM, &g_old_term, nullptr);
  g_cleanup.pid = 0;
}

std::string tail(const std::string& text) {
  std::string t = text.size() > kOutputTailBytes ? "..." + text.substr(text.size() - kOutputTailBytes) : text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  return t.empty() ? "(no output)" : t;
}

bool executable(const std::string& path) { return !path.empty() && ::access(path.c_str(), X_OK) == 0; }

// "ShmKey", "SimEndpoint": the rendezvous keys a generated link must make
// unique to this process.
bool endpoint_key(std::string_view name) {
  const std::string lower = config::lower(name);
  return lower == "shmkey" || lower == "simendpoint";
}

}  // namespace

Result<std::string> find_datanode_program() {
  if (const char* env = std::getenv("FJORD_DATANODE"); env && *env) {
    if (!executable(env))
      return Status(StatusCode::kNotFound, std::string("FJORD_DATANODE=") + env + " is not executable");
    return std::string(env);
  }
  const std::filesystem::path self = std::filesystem::path(self_exe()).parent_path();
  const std::string build_tree = (self / ".." / "tools" / "fjord-datanode").lexically_normal().string();
  const std::string installed = (self / "fjord-datanode").string();
  for (const std::string& candidate : {build_tree, installed})
    if (executable(candidate)) return candidate;
  if (std::string in_path = find_in_path("fjord-datanode"); !in_path.empty()) return in_path;
  return Status(StatusCode::kNotFound, "cannot find the fjord-datanode program (looked at " + build_tree + ", " +
                                           installed +
                                           " and PATH; set FJORD_DATANODE to its path, or build it: "
                                           "ninja -C build tools/fjord-datanode)");
}

NodeId embedded_api_node(std::size_t transporter_index, uint32_t i) {
  return static_cast<NodeId>(50 + 10 * transporter_index + i);
}

uint64_t embedded_data_memory_bytes(uint64_t rows, uint32_t row_bytes) {
  // Row, hash entry, hidden unique-index row and its hash entry, ordered
  // index entry: about 3x the row plus 100 bytes, doubled for slack and
  // partially filled pages, plus 32 MB for the schema and small tables.
  const uint64_t per_row = 2 * (3ULL * row_bytes + 100);
  const uint64_t bytes = rows * per_row + (32ULL << 20);
  return (bytes + (1ULL << 20) - 1) & ~((1ULL << 20) - 1);
}

std::string embedded_config_text(const EmbeddedConfig& c, const transport::TransporterRegistry& registry) {
  std::string t = "# generated by latency_bench: one data node, single-threaded and spinning\n";
  t += "[ndbd default]\nDataMemory=" + std::to_string(c.data_memory_bytes / (1ULL << 20)) + "M\n";
  t += "[ndbd]\nNodeId=" + std::to_string(kEmbeddedDataNode) +
       "\nHostName=127.0.0.1\nServerPort=" + std::to_string(c.port) + "\nDataDir=" + c.data_dir +
       "\nControlSocket=" + c.control_socket +
       "\nSingleThreaded=1\nSchedulerSpinTimer=" + std::to_string(c.spintime_us) + "\n";
  for (const std::string& line : c.node_params) t += line + "\n";
  // Single-threaded mode keeps the first LDM thread's placement.
  if (c.node_cpu >= 0)
    t += "ThreadConfig=ldm={cpubind=" + std::to_string(c.node_cpu) + ",spintime=" + std::to_string(c.spintime_us) +
         "}\n";
  for (std::size_t i = 0; i < c.transporters.size(); ++i)
    for (uint32_t a = 0; a < c.api_nodes_per_transporter; ++a)
      t += "[api]\nNodeId=" + std::to_string(embedded_api_node(i, a)) + "\nHostName=127.0.0.1\n";
  uint64_t endpoint = c.endpoint_base;
  for (std::size_t i = 0; i < c.transporters.size(); ++i) {
    const std::string& type = c.transporters[i];
    if (type == "tcp") continue;  // the default link between a data node and an API node
    if (type == kTcpTls) {
      for (uint32_t a = 0; a < c.api_nodes_per_transporter; ++a)
        t += "[tcp]\nNodeId1=" + std::to_string(kEmbeddedDataNode) +
             "\nNodeId2=" + std::to_string(embedded_api_node(i, a)) +
             "\nRequireTls=1\nTlsSearchPath=" + c.tls_search_path + "\n";
      continue;
    }
    const transport::TransporterFactory* factory = registry.find(type);
    // Both ends on this machine, at the address the medium can use (an RDMA
    // device's, not 127.0.0.1; the factory knows which).
    const std::string host = factory ? factory->local_host() : "127.0.0.1";
    std::string hosts = "HostName1=";
    hosts.append(host).append("\nHostName2=").append(host).append("\n");
    for (uint32_t a = 0; a < c.api_nodes_per_transporter; ++a) {
      t += "[" + type + "]\nNodeId1=" + std::to_string(kEmbeddedDataNode) +
           "\nNodeId2=" + std::to_string(embedded_api_node(i, a)) + "\n";
      t += hosts;
      if (factory)
        for (const config::ParamSpec& spec : factory->parameters())
          if (endpoint_key(spec.name)) t += std::string(spec.name) + "=" + std::to_string(++endpoint) + "\n";
    }
  }
  return t;
}

void note_interrupt_cleanup(const std::string& dir, const std::string& file) {
  publish_path(g_cleanup.files[2], file);
  publish_path(g_cleanup.dirs[1], dir);
}

void forget_interrupt_cleanup() {
  g_cleanup.files[2][0] = '\0';
  g_cleanup.dirs[1][0] = '\0';
}

Result<std::string> make_temp_dir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/latency_bench.XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) return io_error("mkdtemp " + pattern, errno);
  return pattern;
}

Result<std::unique_ptr<NodeProcess>> NodeProcess::start(const NodeLaunch& launch) {
  SpawnSpec spec;
  spec.argv = {launch.program, "--config", launch.config_path, "--node-id", std::to_string(launch.node)};
  if (!launch.log_path.empty()) spec.argv.insert(spec.argv.end(), {"--log-file", launch.log_path});
  spec.cpu = launch.cpu;
  spec.output = SpawnSpec::Output::kMemory;
  auto child = spawn(spec);
  if (!child) return child.status();
  arm_cleanup(child->pid(), launch, launch.log_path);
  std::unique_ptr<NodeProcess> node(new NodeProcess(launch, std::move(child).value()));
  const uint64_t deadline = monotonic_ns() + launch.timeout_ns;
  for (;;) {
    if (!node->child_.running()) {
      const std::string output = node->child_.read_output(0);
      return Status(StatusCode::kUnavailable, "the data node (" + launch.program + " --config " + launch.config_path +
                                                  " --node-id " + std::to_string(launch.node) +
                                                  ") exited at start: " + tail(output));
    }
    if (engine::control_request(launch.control_socket, "ping", 500)) return node;
    if (monotonic_ns() >= deadline)
      return Status(StatusCode::kTimeout, "the data node did not answer on " + launch.control_socket + " within " +
                                              std::to_string(launch.timeout_ns / 1'000'000'000ULL) +
                                              " s; its output: " + tail(node->child_.read_output(0)));
    std::this_thread::sleep_for(std::chrono::nanoseconds(kReadyPollNs));
  }
}

NodeProcess::~NodeProcess() { (void)stop(); }

Status NodeProcess::stop() {
  if (stopped_) return Status::ok();
  stopped_ = true;
  Status result;
  if (child_.running()) {
    child_.stop(kStopGraceNs);
  }
  auto code = child_.wait_for(0);
  if (code && *code != 0)
    result = Status(StatusCode::kInternal,
                    "the data node exited with code " + std::to_string(*code) + ": " + tail(child_.read_output(0)));
  disarm_cleanup();
  remove_temp_dir();
  return result;
}

void NodeProcess::remove_temp_dir() {
  if (launch_.temp_dir.empty()) return;
  std::error_code ignored;
  std::filesystem::remove_all(launch_.temp_dir, ignored);
}

Result<std::string> node_layout(const std::string& control_socket, uint32_t timeout_ms) {
  return engine::control_request(control_socket, "layout", timeout_ms);
}

Result<uint64_t> node_pages_in_use(const std::string& control_socket, uint32_t timeout_ms) {
  auto reply = engine::control_request(control_socket, "stats json", timeout_ms);
  if (!reply) return reply.status();
  constexpr std::string_view kKey = "\"pages_in_use\":";
  const std::size_t at = reply->find(kKey);
  if (at == std::string::npos)
    return Status(StatusCode::kNotFound, "the node's statistics (" + control_socket + ") have no DataMemory pages");
  return std::strtoull(reply->c_str() + at + kKey.size(), nullptr, 10);
}

}  // namespace fjord::bench
