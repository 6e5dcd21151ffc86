#include "redis_peer.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "fjord/base/clock.h"
#include "fjord/base/fd.h"
#include "node_process.h"
#include "process.h"

namespace fjord::bench {
namespace {

constexpr uint64_t kStartNs = 5'000'000'000ULL;
constexpr uint32_t kLoadChunk = 1000;  // SETs per pipelined write while loading
constexpr std::size_t kKeyBytes = 16;  // "key:" and 12 digits, as redis-benchmark's __rand_int__

std::string key_text(uint64_t id) {
  char key[32];
  std::snprintf(key, sizeof key, "key:%012llu", static_cast<unsigned long long>(id % 1'000'000'000'000ULL));
  return key;
}

// A connected socket to the server, receiving with busy-poll or blocking.
class RespClient {
 public:
  static Result<RespClient> connect_to(const sockaddr* address, socklen_t length, bool tcp, bool busy) {
    UniqueFd fd(::socket(address->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return io_error("socket", errno);
    if (::connect(fd.get(), address, length) != 0) return io_error("connect to redis-server", errno);
    const int one = 1;
    if (tcp) ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return RespClient(std::move(fd), busy);
  }

  Status send_all(std::string_view bytes) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd_.get(), bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<std::size_t>(n);
      } else if (n < 0 && errno != EINTR && errno != EAGAIN) {
        return io_error("send to redis-server", errno);
      }
    }
    return Status::ok();
  }

  // Reads exactly `out.size()` bytes: spinning on MSG_DONTWAIT, or blocking.
  Status receive_exactly(std::span<char> out, uint64_t deadline_ns) {
    std::size_t got = 0;
    const int flags = busy_ ? MSG_DONTWAIT : 0;
    while (got < out.size()) {
      const ssize_t n = ::recv(fd_.get(), out.data() + got, out.size() - got, flags);
      if (n > 0) {
        got += static_cast<std::size_t>(n);
      } else if (n == 0) {
        return Status(StatusCode::kLinkDown, "redis-server closed the connection");
      } else if (errno != EAGAIN && errno != EINTR) {
        return io_error("recv from redis-server", errno);
      } else if (monotonic_ns() > deadline_ns) {
        return Status(StatusCode::kTimeout, "redis-server did not answer in time");
      }
    }
    return Status::ok();
  }

 private:
  RespClient(UniqueFd fd, bool busy) : fd_(std::move(fd)), busy_(busy) {}
  UniqueFd fd_;
  bool busy_;
};

// The server: started on a free port and a socket in a temporary directory.
struct RedisServer {
  ChildProcess process;
  uint16_t port = 0;
  std::string dir;
  std::string socket_path;
  ~RedisServer() {
    process.stop();
    forget_interrupt_cleanup();
    std::error_code ignored;
    if (!dir.empty()) std::filesystem::remove_all(dir, ignored);
  }
};

Result<std::unique_ptr<RedisServer>> start_redis(int cpu) {
  const std::string program = find_in_path("redis-server");
  if (program.empty())
    return Status(StatusCode::kNotFound, "redis-server is not installed (Debian package redis-server)");
  auto port = free_tcp_port();
  if (!port) return port.status();
  auto dir = make_temp_dir();
  if (!dir) return dir.status();
  auto server = std::make_unique<RedisServer>();
  server->port = *port;
  server->dir = *dir;
  server->socket_path = *dir + "/redis.sock";
  note_interrupt_cleanup(server->dir, server->socket_path);
  auto child = spawn(SpawnSpec{{program,
                                "--port",
                                std::to_string(*port),
                                "--bind",
                                "127.0.0.1",
                                "--save",
                                "",
                                "--appendonly",
                                "no",
                                "--unixsocket",
                                server->socket_path,
                                "--unixsocketperm",
                                "700",
                                "--dir",
                                *dir,
                                "--daemonize",
                                "no",
                                "--protected-mode",
                                "no",
                                "--loglevel",
                                "warning"},
                               {},
                               cpu,
                               SpawnSpec::Output::kMemory});
  if (!child) return child.status();
  server->process = std::move(child).value();
  if (Status s = wait_for_listener(*port, monotonic_ns() + kStartNs); !s)
    return Status(s.code(), "redis-server did not start: " + server->process.read_output(0));
  const uint64_t deadline = monotonic_ns() + kStartNs;
  while (::access(server->socket_path.c_str(), F_OK) != 0) {
    if (monotonic_ns() > deadline) return Status(StatusCode::kTimeout, "redis-server made no Unix socket");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return server;
}

Result<RespClient> connect_client(const RedisServer& server, bool tcp, bool busy) {
  if (tcp) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(server.port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return RespClient::connect_to(reinterpret_cast<sockaddr*>(&a), sizeof a, true, busy);
  }
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, server.socket_path.c_str(), sizeof a.sun_path - 1);
  return RespClient::connect_to(reinterpret_cast<sockaddr*>(&a), sizeof a, false, busy);
}

// SET key:i to a value_bytes value for every key, pipelined.
Status load_keys(RespClient& client, uint64_t keys, uint32_t value_bytes, uint64_t deadline_ns) {
  const std::string value(value_bytes, 'v');
  std::string batch;
  std::vector<char> replies;
  for (uint64_t first = 0; first < keys; first += kLoadChunk) {
    const uint64_t end = std::min<uint64_t>(keys, first + kLoadChunk);
    batch.clear();
    for (uint64_t id = first; id < end; ++id)
      batch +=
          "*3\r\n$3\r\nSET\r\n$16\r\n" + key_text(id) + "\r\n$" + std::to_string(value_bytes) + "\r\n" + value + "\r\n";
    if (Status s = client.send_all(batch); !s) return s;
    replies.resize((end - first) * 5);  // "+OK\r\n"
    if (Status s = client.receive_exactly(replies, deadline_ns); !s) return s;
    if (std::memcmp(replies.data(), "+OK\r\n", 5) != 0) return Status(StatusCode::kProtocolError, "SET was refused");
  }
  return Status::ok();
}

// Writes the 12 digits of `id` over the key at `at` in a prepared request.
void patch_key(std::string& request, std::size_t at, uint64_t id) {
  for (int i = 11; i >= 0; --i) {
    request[at + 4 + static_cast<std::size_t>(i)] = static_cast<char>('0' + id % 10);
    id /= 10;
  }
}

struct Timed {
  Status status;
  Histogram per_row_ns;
  uint64_t samples = 0;
};

// GET (batch 1) or MGET (batch K) of random keys, `iterations` times after
// `warmup`; records time / keys per request.
Timed time_requests(RespClient& client, const RedisPlan& p, uint32_t batch, Progress& progress,
                    const std::string& label) {
  Timed t;
  std::vector<uint64_t> ids(batch, 0);
  std::string request = redis_request(batch == 1 ? "GET" : "MGET", ids);
  std::vector<std::size_t> key_at;
  for (std::size_t at = request.find("key:"); at != std::string::npos; at = request.find("key:", at + 1))
    key_at.push_back(at);
  const std::size_t reply_bytes =
      batch == 1 ? redis_get_reply_bytes(p.value_bytes) : redis_mget_reply_bytes(batch, p.value_bytes);
  std::vector<char> reply(reply_bytes);
  uint64_t rng = 0x9E3779B97F4A7C15ULL;
  progress.begin(label, p.iterations);
  const uint64_t deadline = monotonic_ns() + p.timeout_ns;
  for (uint64_t i = 0; i < p.warmup + p.iterations; ++i) {
    for (std::size_t at : key_at) {
      rng ^= rng << 13;
      rng ^= rng >> 7;
      rng ^= rng << 17;
      patch_key(request, at, rng % p.keys);
    }
    const uint64_t start = monotonic_ns();
    t.status = client.send_all(request);
    if (t.status) t.status = client.receive_exactly(reply, deadline);
    const uint64_t elapsed = monotonic_ns() - start;
    if (!t.status) break;
    if (reply[0] != (batch == 1 ? '$' : '*')) {
      t.status = Status(StatusCode::kProtocolError, "unexpected reply from redis-server");
      break;
    }
    if (i >= p.warmup) {
      t.per_row_ns.record(elapsed / batch);
      ++t.samples;
      progress.update(t.samples);
    }
  }
  progress.clear();
  return t;
}

ComparisonRow redis_row(const std::string& key, const std::string& label, const std::string& beside, uint32_t batch) {
  ComparisonRow row;
  row.key = key;
  row.label = label;
  row.beside = beside;
  row.rows_per_sample = batch;
  return row;
}

}  // namespace

std::size_t redis_get_reply_bytes(uint32_t value_bytes) {
  return 1 + std::to_string(value_bytes).size() + 2 + value_bytes + 2;
}

std::size_t redis_mget_reply_bytes(uint32_t keys, uint32_t value_bytes) {
  return 1 + std::to_string(keys).size() + 2 + keys * redis_get_reply_bytes(value_bytes);
}

std::string redis_request(std::string_view command, const std::vector<uint64_t>& ids) {
  std::string r = "*" + std::to_string(ids.size() + 1) + "\r\n$" + std::to_string(command.size()) + "\r\n";
  r += command;
  r += "\r\n";
  for (uint64_t id : ids) r += "$" + std::to_string(kKeyBytes) + "\r\n" + key_text(id) + "\r\n";
  return r;
}

Result<double> parse_redis_benchmark_csv(std::string_view output) {
  const std::size_t header = output.find("\"rps\"");
  if (header == std::string_view::npos) return Status(StatusCode::kProtocolError, "no CSV header with \"rps\"");
  const std::size_t line = output.find('\n', header);
  if (line == std::string_view::npos) return Status(StatusCode::kProtocolError, "no data line after the CSV header");
  const std::size_t comma = output.find(",\"", line);
  if (comma == std::string_view::npos) return Status(StatusCode::kProtocolError, "no rps field in the data line");
  const std::string number(output.substr(comma + 2, 32));
  char* end = nullptr;
  const double rps = std::strtod(number.c_str(), &end);
  if (end == number.c_str() || *end != '"' || rps <= 0)
    return Status(StatusCode::kProtocolError, "the rps field is not a positive number");
  return rps;
}

std::vector<ComparisonRow> measure_redis(const RedisPlan& p, Progress& progress) {
  const std::string k = std::to_string(p.batch);
  std::vector<ComparisonRow> rows = {
      redis_row("redis.get.tcp", "redis-server GET, TCP loopback, one client", "serial_pk", 1),
      redis_row("redis.mget.tcp", "redis-server MGET of " + k + " keys, TCP loopback", "batched_pk", p.batch),
      redis_row("redis.get.unix", "redis-server GET, Unix socket, one client", "serial_pk", 1),
      redis_row("redis.mget.unix", "redis-server MGET of " + k + " keys, Unix socket", "batched_pk", p.batch),
  };
  const auto fail_all = [&](Outcome outcome, const std::string& why) {
    for (ComparisonRow& r : rows) {
      r.outcome = outcome;
      r.reason = why;
    }
    return rows;
  };
  auto server = start_redis(p.cpu_server);
  if (!server)
    return fail_all(server.status().code() == StatusCode::kNotFound ? Outcome::kNotInstalled : Outcome::kFailed,
                    server.status().message());
  const uint64_t deadline = monotonic_ns() + p.timeout_ns;
  {
    auto loader = connect_client(**server, false, false);
    if (!loader) return fail_all(Outcome::kFailed, loader.status().message());
    if (Status s = load_keys(*loader, p.keys, p.value_bytes, deadline); !s)
      return fail_all(Outcome::kFailed, "loading keys: " + s.message());
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const bool tcp = i < 2;
    const uint32_t batch = i % 2 == 0 ? 1 : p.batch;
    auto client = connect_client(**server, tcp, p.busy_poll);
    if (!client) {
      rows[i].outcome = Outcome::kFailed;
      rows[i].reason = client.status().message();
      continue;
    }
    Timed t = time_requests(*client, p, batch, progress, rows[i].label);
    rows[i].samples = t.samples;
    if (!t.status) {
      rows[i].outcome = Outcome::kFailed;
      rows[i].reason = t.status.message();
    } else {
      rows[i].per_row_ns = LatencySummary::from(t.per_row_ns);
    }
  }
  return rows;
}

RedisRate redis_pipelined_get_rate(uint64_t keys, uint32_t value_bytes, uint32_t pipeline, uint32_t clients,
                                   uint64_t requests, int cpu_server, int cpu_client) {
  RedisRate r;
  const std::string benchmark = find_in_path("redis-benchmark");
  if (benchmark.empty()) {
    r.outcome = Outcome::kNotInstalled;
    r.reason = "redis-benchmark is not installed (Debian package redis-tools)";
    return r;
  }
  auto server = start_redis(cpu_server);
  if (!server) {
    r.outcome = server.status().code() == StatusCode::kNotFound ? Outcome::kNotInstalled : Outcome::kFailed;
    r.reason = server.status().message();
    return r;
  }
  auto loader = connect_client(**server, false, false);
  Status loaded = loader ? load_keys(*loader, keys, value_bytes, monotonic_ns() + 60'000'000'000ULL) : loader.status();
  if (!loaded) {
    r.outcome = Outcome::kFailed;
    r.reason = "loading keys: " + loaded.message();
    return r;
  }
  const std::vector<std::string> argv = {benchmark,
                                         "-h",
                                         "127.0.0.1",
                                         "-p",
                                         std::to_string((*server)->port),
                                         "-t",
                                         "get",
                                         "-n",
                                         std::to_string(requests),
                                         "-P",
                                         std::to_string(pipeline),
                                         "-c",
                                         std::to_string(clients),
                                         "-d",
                                         std::to_string(value_bytes),
                                         "-r",
                                         std::to_string(keys),
                                         "--csv"};
  r.command = "redis-benchmark -t get -n " + std::to_string(requests) + " -P " + std::to_string(pipeline) + " -c " +
              std::to_string(clients) + " -d " + std::to_string(value_bytes) + " -r " + std::to_string(keys);
  auto child = spawn(SpawnSpec{argv, {}, cpu_client, SpawnSpec::Output::kCapture});
  if (!child) {
    r.outcome = Outcome::kFailed;
    r.reason = child.status().message();
    return r;
  }
  const std::string output = child->read_output(monotonic_ns() + 120'000'000'000ULL);
  auto code = child->wait_for(2'000'000'000ULL);
  auto rps = parse_redis_benchmark_csv(output);
  if (!code || *code != 0 || !rps) {
    r.outcome = Outcome::kFailed;
    r.reason = rps ? "redis-benchmark failed: " + output : rps.status().message() + ": " + output;
    return r;
  }
  r.requests_per_s = *rps;
  return r;
}

}  // namespace fjord::bench
