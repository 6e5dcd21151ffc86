// Child processes: our own peer (fork+exec of this program with hidden
// options), the floors' echo processes (fork only) and peer tools (sockperf,
// ucx_perftest), each pinned to a CPU before it runs, and killed with us.
//
// Slow path. One thread owns a ChildProcess. fork() is only called while the
// process has a single thread (latency_bench starts a thread only as the
// in-process peer of a medium that cannot cross processes, and joins it
// before anything else runs).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "fjord/base/fd.h"
#include "fjord/base/status.h"

namespace fjord::bench {

class ChildProcess {
 public:
  ChildProcess() = default;
  // `output`: a pipe to read until EOF, or (in_memory) a memfd the child
  // wrote to, read from its start.
  ChildProcess(pid_t pid, UniqueFd output, bool in_memory = false)
      : pid_(pid), output_(std::move(output)), output_in_memory_(in_memory) {}
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  // Kills (SIGKILL) and reaps a child that is still running.
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  // False once it exited (reaps it and keeps the exit code).
  bool running();
  // Exit code (128 + signal when killed), or kTimeout if still running.
  Result<int> wait_for(uint64_t timeout_ns);
  // SIGTERM, then SIGKILL if it has not exited within grace_ns; reaps.
  void stop(uint64_t grace_ns = 1'000'000'000ULL);
  // The captured stdout+stderr: a pipe is read until EOF or the deadline;
  // a memory file returns what the child wrote so far, at once.
  std::string read_output(uint64_t deadline_ns);

 private:
  void reap(int status);

  pid_t pid_ = -1;
  UniqueFd output_;
  bool output_in_memory_ = false;
  int exit_code_ = -1;
};

struct SpawnSpec {
  std::vector<std::string> argv;  // argv[0]: a path, or a name looked up in PATH
  std::vector<std::string> env;   // "KEY=VALUE", added to (or replacing in) our environment
  int cpu = -1;                   // pin before exec; -1 = inherit
  // kCapture: a pipe (read it while the child runs, or it may block when
  // full); kMemory: a memfd that never blocks the child, read afterwards.
  enum class Output : uint8_t { kInherit, kCapture, kMemory, kDiscard } output = Output::kInherit;
};

// fork + exec. The child dies with us (PR_SET_PDEATHSIG). An exec failure
// shows up as exit code 127 with a message on the child's stderr.
Result<ChildProcess> spawn(const SpawnSpec& spec);
// fork only: the child pins itself, runs `body` and _exits with its result.
Result<ChildProcess> fork_child(int cpu, const std::function<int()>& body);

// This program's own path (/proc/self/exe).
std::string self_exe();
// The full path of `program` in PATH, or "" when it is not installed.
std::string find_in_path(std::string_view program);
// A TCP port on 127.0.0.1 that was free a moment ago.
Result<uint16_t> free_tcp_port();
// Waits until some process listens on TCP `port` (read from /proc/net/tcp*,
// so the listener sees no probe connection).
Status wait_for_listener(uint16_t port, uint64_t deadline_ns);

}  // namespace fjord::bench
