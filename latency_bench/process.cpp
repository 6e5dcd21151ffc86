#include "process.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "fjord/base/clock.h"

extern char** environ;

namespace fjord::bench {
namespace {

constexpr uint64_t kPollSliceNs = 5'000'000;

// Runs in the child between fork and exec/body: only async-signal-safe calls.
void prepare_child(pid_t parent, int cpu) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(126);  // the parent died before prctl
  if (cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    ::sched_setaffinity(0, sizeof set, &set);
  }
}

std::vector<std::string> merged_environment(const std::vector<std::string>& additions) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string_view entry(*e);
    const std::string_view key = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const std::string& a : additions)
      if (std::string_view(a).substr(0, a.find('=')) == key) replaced = true;
    if (!replaced) env.emplace_back(entry);
  }
  env.insert(env.end(), additions.begin(), additions.end());
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Whether /proc/net/tcp-style `path` has a socket in LISTEN state on `port`.
bool listening_in(const char* path, uint16_t port) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    unsigned local_port = 0, state = 0;
    const std::size_t colon = line.find(':', line.find(':') + 1);  // after "sl:", the local address's ':'
    if (colon == std::string::npos) continue;
    if (std::sscanf(line.c_str() + colon + 1, "%x %*s %x", &local_port, &state) != 2) continue;
    if (local_port == port && state == 0x0A) return true;
  }
  return false;
}

}  // namespace

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      output_(std::move(other.output_)),
      output_in_memory_(other.output_in_memory_),
      exit_code_(other.exit_code_) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    if (pid_ > 0) stop(0);
    pid_ = std::exchange(other.pid_, -1);
    output_ = std::move(other.output_);
    output_in_memory_ = other.output_in_memory_;
    exit_code_ = other.exit_code_;
  }
  return *this;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) stop(0);
}

void ChildProcess::reap(int status) {
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  pid_ = -1;
}

bool ChildProcess::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  const pid_t rc = ::waitpid(pid_, &status, WNOHANG);
  if (rc == pid_) reap(status);
  return pid_ > 0;
}

Result<int> ChildProcess::wait_for(uint64_t timeout_ns) {
  const uint64_t deadline = monotonic_ns() + timeout_ns;
  while (running()) {
    if (monotonic_ns() >= deadline) return Status(StatusCode::kTimeout, "process still running");
    std::this_thread::sleep_for(std::chrono::nanoseconds(kPollSliceNs / 5));
  }
  return exit_code_;
}

void ChildProcess::stop(uint64_t grace_ns) {
  if (!running()) return;
  ::kill(pid_, grace_ns == 0 ? SIGKILL : SIGTERM);
  if (wait_for(grace_ns).is_ok()) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  if (::waitpid(pid_, &status, 0) == pid_) reap(status);
}

std::string ChildProcess::read_output(uint64_t deadline_ns) {
  std::string out;
  char buffer[4096];
  if (output_in_memory_) {
    ssize_t n = 0;
    for (off_t at = 0; output_.valid() && (n = ::pread(output_.get(), buffer, sizeof buffer, at)) > 0; at += n)
      out.append(buffer, static_cast<std::size_t>(n));
    return out;
  }
  while (output_.valid()) {
    const uint64_t now = monotonic_ns();
    if (now >= deadline_ns) break;
    pollfd p{output_.get(), POLLIN, 0};
    const int wait_ms = static_cast<int>(std::min<uint64_t>((deadline_ns - now) / 1'000'000 + 1, 100));
    if (::poll(&p, 1, wait_ms) <= 0) continue;
    const ssize_t n = ::read(output_.get(), buffer, sizeof buffer);
    if (n > 0) {
      out.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      output_.reset();  // EOF: the child closed its side (usually: exited)
    }
  }
  return out;
}

Result<ChildProcess> spawn(const SpawnSpec& spec) {
  if (spec.argv.empty()) return Status(StatusCode::kInvalidArgument, "nothing to run");
  std::vector<std::string> args = spec.argv;
  std::vector<std::string> env = merged_environment(spec.env);
  std::vector<char*> argv = pointers(args);
  std::vector<char*> envp = pointers(env);
  int pipe_fds[2] = {-1, -1};
  if (spec.output == SpawnSpec::Output::kCapture && ::pipe2(pipe_fds, O_CLOEXEC) != 0) return io_error("pipe", errno);
  if (spec.output == SpawnSpec::Output::kMemory) {
    pipe_fds[0] = ::memfd_create("latency_bench-child-output", MFD_CLOEXEC);
    if (pipe_fds[0] < 0) return io_error("memfd_create", errno);
    pipe_fds[1] = ::fcntl(pipe_fds[0], F_DUPFD_CLOEXEC, 0);  // the child's copy; closed here after fork
  }
  const int null_fd = spec.output == SpawnSpec::Output::kDiscard ? ::open("/dev/null", O_WRONLY | O_CLOEXEC) : -1;
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return io_error("fork", errno);
  if (pid == 0) {
    prepare_child(parent, spec.cpu);
    const int out_fd = pipe_fds[1] >= 0 ? pipe_fds[1] : null_fd;
    if (out_fd >= 0) {
      ::dup2(out_fd, STDOUT_FILENO);
      ::dup2(out_fd, STDERR_FILENO);
    }
    ::execvpe(argv[0], argv.data(), envp.data());
    const char* why = std::strerror(errno);
    (void)!::write(STDERR_FILENO, "latency_bench: cannot run ", 26);
    (void)!::write(STDERR_FILENO, argv[0], std::strlen(argv[0]));
    (void)!::write(STDERR_FILENO, ": ", 2);
    (void)!::write(STDERR_FILENO, why, std::strlen(why));
    (void)!::write(STDERR_FILENO, "\n", 1);
    ::_exit(127);
  }
  if (null_fd >= 0) ::close(null_fd);
  if (pipe_fds[1] >= 0) ::close(pipe_fds[1]);
  return ChildProcess(pid, UniqueFd(pipe_fds[0]), spec.output == SpawnSpec::Output::kMemory);
}

Result<ChildProcess> fork_child(int cpu, const std::function<int()>& body) {
  const pid_t parent = ::getpid();
  std::fflush(nullptr);  // nothing buffered may be written twice
  const pid_t pid = ::fork();
  if (pid < 0) return io_error("fork", errno);
  if (pid == 0) {
    prepare_child(parent, cpu);
    ::_exit(body());
  }
  return ChildProcess(pid, UniqueFd());
}

std::string self_exe() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return "latency_bench";
  return std::string(path, static_cast<std::size_t>(n));
}

std::string find_in_path(std::string_view program) {
  const char* path = std::getenv("PATH");
  std::string_view dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  while (!dirs.empty()) {
    const std::size_t colon = dirs.find(':');
    std::string candidate(dirs.substr(0, colon));
    candidate += "/";
    candidate += program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string_view::npos) break;
    dirs.remove_prefix(colon + 1);
  }
  return "";
}

Result<uint16_t> free_tcp_port() {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return io_error("socket", errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) return io_error("bind 127.0.0.1:0", errno);
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) return io_error("getsockname", errno);
  return ntohs(addr.sin_port);
}

Status wait_for_listener(uint16_t port, uint64_t deadline_ns) {
  while (!listening_in("/proc/net/tcp", port) && !listening_in("/proc/net/tcp6", port)) {
    if (monotonic_ns() >= deadline_ns)
      return Status(StatusCode::kTimeout, "nothing listened on port " + std::to_string(port));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return Status::ok();
}

}  // namespace fjord::bench
