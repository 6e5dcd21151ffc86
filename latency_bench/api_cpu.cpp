// api_cpu: the API library's instructions per primary-key read, on the paths
// latency_bench drives, counted by callgrind (instruction counts repeat
// from run to run; wall-clock A/B runs on a shared two-CPU host do not):
//
//   serial   key.set, start_transaction(table, &key), read, execute(kCommit), close
//   batched  K x key.set, start_transaction(), K reads, execute(kCommit), close
//   async    key.set, start_transaction(table, &key), read, execute_async(kCommit),
//            poll(0, 0) until its callback (which closes the transaction) ran
//   shared   async, through two sessions of one ClusterConnection (a second API
//            node), on this thread: each starts a read, then the second polls
//            until its callback ran (taking the poll right, it receives the
//            first's answer and hands it over), then the first polls once. Its
//            misses are that poll's, one per two reads (its answer is in its
//            mailbox, the link empty); "shared-empty" (N empty polls of a
//            shared session) is what each cost, to take out of the figure.
//
// Each path reads --ops random rows of latency_bench's access table and
// checks the id of every row read. The node is single-threaded (one TC), or
// with --tc-threads T multi-threaded with T TCs, where a hinted transaction
// encodes and hashes its key to pick the TC. Only those calls are counted:
// the program turns callgrind's collection on around them
// (CALLGRIND_TOGGLE_COLLECT), so loading the table is not, and dumps each
// path's counters on their own, named "<path> reads=N empty=E". The data node (fjord-datanode, started here
// over --transporter) runs in its own process, which valgrind does not follow.
//
// Waiting is kept out of the count, and so is the race between the data
// node's answer and the API's first poll (which decides how many empty polls
// and sleeps a read costs): the API's link is the real transporter behind a
// forwarding one that, after each flush that sent a request, sleeps 100 us
// uncounted (the shared path waits on its link instead), so the first poll
// finds the answer. Polls that still found nothing are counted as misses (E
// in the dump's name) and taken out with the cost of an empty poll, which
// the first dump ("empty": N polls with nothing in flight) measures; a run
// with many misses is worth repeating.
//
//   valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file=/tmp/api_cpu.%p
//       build/latency_bench/api_cpu --ops 2000 --batch 10
//   awk '/^desc: Trigger/ {path = $5; reads = substr($6, 7); empty = substr($7, 7)}
//        /^totals:/ {if (path ~ /empty/) poll = $2 / reads;
//                    printf "%-8s %.0f instructions per read\n", path, ($2 - empty * poll) / reads}'
//       /tmp/api_cpu.PID.*           (each command on one line)
//
// Outside valgrind it prints wall-clock ns per read, for orientation only.
// Never a test: benchmarks do not fail on time.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define FJORD_COUNT_TOGGLE() CALLGRIND_TOGGLE_COLLECT
#define FJORD_COUNT_DUMP(name) CALLGRIND_DUMP_STATS_AT(name)
#else
#define FJORD_COUNT_TOGGLE() ((void)0)
#define FJORD_COUNT_DUMP(name) ((void)(name))
#endif

#include "access_table.h"
#include "builtin_transporters.h"
#include "fjord/api/api.h"
#include "fjord/base/clock.h"
#include "fjord/base/log.h"
#include "fjord/tcp/tls_credentials.h"
#include "fjord/transport/registry.h"
#include "fjord/transport/transporter.h"
#include "node_process.h"
#include "options.h"
#include "process.h"

namespace fjord::bench {
namespace {

struct Params {
  uint64_t ops = 2000;  // reads per path
  uint32_t batch = 10;  // reads per batched transaction
  uint64_t rows = 10000;
  std::string transporter = "shm";
  uint32_t tc_threads = 0;  // 0: a single-threaded node (one TC, as latency_bench starts)
};

bool g_counting = false;  // inside a Counted region
// How long a counted flush that sent something sleeps, uncounted, for the
// answer (0 for the shared path, which waits on its link instead).
uint32_t g_answer_wait_us = 100;
uint64_t g_misses = 0;  // empty receives while counting (see AnswerFirst)

// Counts the calls inside it: collection is off outside.
class Counted {
 public:
  Counted() {
    FJORD_COUNT_TOGGLE();
    g_counting = true;
  }
  ~Counted() {
    g_counting = false;
    FJORD_COUNT_TOGGLE();
  }
  Counted(const Counted&) = delete;
  Counted& operator=(const Counted&) = delete;
};

// The API's link: every call goes to the real transporter, but a counted
// flush that sent something then sleeps, uncounted, long enough for the data
// node to answer (see the header). Receives that find nothing while counting
// are misses.
class AnswerFirst final : public transport::Transporter {
 public:
  explicit AnswerFirst(std::unique_ptr<transport::Transporter> real)
      : Transporter(real->config(), real->local_node()), real_(std::move(real)) {}
  ~AnswerFirst() override { real_->close("API node disconnected"); }
  AnswerFirst(const AnswerFirst&) = delete;
  AnswerFirst& operator=(const AnswerFirst&) = delete;

  std::span<std::byte> reserve(std::size_t min_bytes) override { return real_->reserve(min_bytes); }
  void commit(std::size_t bytes, uint32_t frames) override {
    real_->commit(bytes, frames);
    committed_ = true;
  }
  transport::FlushStatus flush() override {
    const transport::FlushStatus status = real_->flush();
    if (committed_ && g_counting && g_answer_wait_us != 0) {
      FJORD_COUNT_TOGGLE();
      std::this_thread::sleep_for(std::chrono::microseconds(g_answer_wait_us));
      FJORD_COUNT_TOGGLE();
    }
    committed_ = false;
    return status;
  }
  std::size_t send_buffer_used() const override { return real_->send_buffer_used(); }
  std::size_t send_buffer_capacity() const override { return real_->send_buffer_capacity(); }
  transport::ReceiveBatch receive() override {
    const transport::ReceiveBatch batch = real_->receive();
    if (batch.bytes.empty() && g_counting) ++g_misses;
    return batch;
  }
  void release(std::size_t bytes) override { real_->release(bytes); }
  int wait_fd() const override { return real_->wait_fd(); }
  bool arm_wakeup() override { return real_->arm_wakeup(); }
  void disarm_wakeup() override { real_->disarm_wakeup(); }
  transport::WaitResult wait_for_receive(uint64_t timeout_ns, uint64_t spin_ns) override {
    return real_->wait_for_receive(timeout_ns, spin_ns);
  }

 private:
  std::unique_ptr<transport::Transporter> real_;
  bool committed_ = false;
};

// A built-in transporter whose connections are wrapped in AnswerFirst.
class AnswerFirstFactory final : public transport::TransporterFactory {
 public:
  explicit AnswerFirstFactory(transport::TransporterFactory& real) : real_(real) {}
  std::string_view name() const override { return real_.name(); }
  std::string_view description() const override { return real_.description(); }
  std::span<const config::ParamSpec> parameters() const override { return real_.parameters(); }
  Status validate(const transport::LinkConfig& link) const override { return real_.validate(link); }
  Status probe() const override { return real_.probe(); }
  std::string local_host() const override { return real_.local_host(); }
  Result<std::unique_ptr<transport::Listener>> listen(NodeId self, const transport::LinkTable& links) override {
    return real_.listen(self, links);
  }
  Result<std::unique_ptr<transport::Transporter>> connect(NodeId self, const transport::LinkConfig& link,
                                                          DeadlineNs deadline) override {
    auto t = real_.connect(self, link, deadline);
    if (!t) return t.status();
    auto wrapped = std::make_unique<AnswerFirst>(std::move(t).value());
    last_ = wrapped.get();
    return std::unique_ptr<transport::Transporter>(std::move(wrapped));
  }
  // The link connected last (the shared path's), while it lives.
  transport::Transporter* last() const { return last_; }

 private:
  transport::TransporterFactory& real_;
  transport::Transporter* last_ = nullptr;
};

class Paths {
 public:
  Paths(api::Connection& connection, const AccessTable& table, const Params& params)
      : conn_(connection), t_(table), p_(params), keys_(params.batch), ids_(params.batch) {}

  Status serial() {
    for (uint64_t i = 0; i < p_.ops; ++i) {
      ids_[0] = next_id();
      Status s;
      {
        const Counted counted;
        keys_[0].set(kIdColumn, ids_[0]);
        api::Transaction& tx = conn_.start_transaction(t_.table, &keys_[0]);
        tx.read(*t_.table, keys_[0]);
        s = tx.execute(api::ExecType::kCommit);
        if (s) s = check(tx, 1);
        tx.close();
      }
      if (!s) return s;
    }
    return Status::ok();
  }

  Status batched() {
    for (uint64_t done = 0; done < p_.ops; done += p_.batch) {
      for (uint32_t i = 0; i < p_.batch; ++i) ids_[i] = next_id();
      Status s;
      {
        const Counted counted;
        for (uint32_t i = 0; i < p_.batch; ++i) keys_[i].set(kIdColumn, ids_[i]);
        api::Transaction& tx = conn_.start_transaction(t_.table, p_.batch == 1 ? &keys_[0] : nullptr);
        for (uint32_t i = 0; i < p_.batch; ++i) tx.read(*t_.table, keys_[i]);
        s = tx.execute(api::ExecType::kCommit);
        if (s) s = check(tx, p_.batch);
        tx.close();
      }
      if (!s) return s;
    }
    return Status::ok();
  }

  Status async() {
    for (uint64_t i = 0; i < p_.ops; ++i) {
      ids_[0] = next_id();
      {
        const Counted counted;
        async_done_ = false;
        keys_[0].set(kIdColumn, ids_[0]);
        api::Transaction& tx = conn_.start_transaction(t_.table, &keys_[0]);
        tx.read(*t_.table, keys_[0]);
        // Captures one pointer, as latency_bench's executor does: small
        // enough for std::function to hold without allocating.
        async_status_ = tx.execute_async(api::ExecType::kCommit,
                                         [this](api::Transaction& t, const Status& st) { async_complete(t, st); });
      }
      while (async_status_ && !async_done_) {
        {
          const Counted counted;
          (void)conn_.poll(0, 0);
        }
        // A node slowed down by other work on the host: wait for it
        // uncounted instead of adding a miss per spin.
        if (!async_done_) std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      if (!async_status_) return async_status_;
    }
    return Status::ok();
  }

  // Polls with nothing to receive: what each miss cost, to take out of the
  // paths' figures.
  Status empty_polls() {
    for (uint64_t i = 0; i < p_.ops; ++i) {
      const Counted counted;
      if (conn_.poll(0, 0) != 0) return Status(StatusCode::kInternal, "a poll completed something");
    }
    g_misses = 0;
    return Status::ok();
  }

 private:
  void async_complete(api::Transaction& tx, const Status& status) {
    async_status_ = status ? check(tx, 1) : status;
    async_done_ = true;
    tx.close();
  }

  uint64_t next_id() {
    rng_ ^= rng_ << 13;  // xorshift64: the same keys in every run
    rng_ ^= rng_ >> 7;
    rng_ ^= rng_ << 17;
    return rng_ % p_.rows;
  }

  // Checked inside the counted region, but only by comparing one column: the
  // API's own work to give it back.
  Status check(api::Transaction& tx, uint32_t count) {
    for (uint32_t i = 0; i < count; ++i) {
      const api::Operation& op = tx.operation(i);
      if (!op.has_row() || op.value(kIdColumn).as_uint64() != ids_[i])
        return Status(StatusCode::kInternal, "read " + std::to_string(i) + " returned the wrong row");
    }
    return Status::ok();
  }

  api::Connection& conn_;
  const AccessTable& t_;
  const Params& p_;
  std::vector<api::Row> keys_;
  std::vector<uint64_t> ids_;
  uint64_t rng_ = 0x2545F4914F6CDD1DULL;
  Status async_status_;
  bool async_done_ = false;
};

// The shared path (see the header): two sessions of one ClusterConnection.
class SharedPath {
 public:
  SharedPath(std::array<api::Session*, 2> sessions, transport::Transporter& link, const AccessTable& table,
             const Params& params)
      : sessions_(sessions), link_(link), t_(table), p_(params) {}

  Status run() {
    for (uint64_t i = 0; i < p_.ops; i += 2) {
      for (std::size_t s = 0; s < 2; ++s) {
        ids_[s] = next_id();
        done_[s] = false;
        const Counted counted;
        keys_[s].set(kIdColumn, ids_[s]);
        api::Transaction& tx = sessions_[s]->start_transaction(t_.table, &keys_[s]);
        tx.read(*t_.table, keys_[s]);
        status_[s] = tx.execute_async(api::ExecType::kCommit,
                                      [this, s](api::Transaction& t, const Status& st) { complete(s, t, st); });
      }
      // The second polls first, each time once the link has something (an
      // uncounted wait): it receives the first's answer (sent first) and
      // hands it over, then its own. The first's one poll finds its answer
      // in its mailbox (and the link empty: one miss).
      while (status_[1] && !done_[1]) {
        (void)link_.wait_for_receive(kAnswerWaitNs, 0);
        const Counted counted;
        (void)sessions_[1]->poll(0, 0);
      }
      if (status_[0] && !done_[0]) {
        const Counted counted;
        (void)sessions_[0]->poll(0, 0);
      }
      for (const Status& s : status_)
        if (!s) return s;
      if (!done_[0]) return Status(StatusCode::kInternal, "the first session's answer was not handed over");
    }
    return Status::ok();
  }

 private:
  void complete(std::size_t s, api::Transaction& tx, const Status& status) {
    const api::Operation& op = tx.operation(0);
    status_[s] = !status ? status
                 : op.has_row() && op.value(kIdColumn).as_uint64() == ids_[s]
                     ? Status::ok()
                     : Status(StatusCode::kInternal, "a shared read returned the wrong row");
    done_[s] = true;
    tx.close();
  }

  uint64_t next_id() {
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 7;
    rng_ ^= rng_ << 17;
    return rng_ % p_.rows;
  }

  static constexpr uint64_t kAnswerWaitNs = 1'000'000'000;
  std::array<api::Session*, 2> sessions_;
  transport::Transporter& link_;
  const AccessTable& t_;
  const Params& p_;
  std::array<api::Row, 2> keys_;
  std::array<uint64_t, 2> ids_{};
  std::array<Status, 2> status_;
  std::array<bool, 2> done_{};
  uint64_t rng_ = 0x9E3779B97F4A7C15ULL;
};

Status run_shared(const api::ConnectOptions& options, const AnswerFirstFactory& factory, const Params& p) {
  api::ConnectOptions o = options;
  o.node_id = embedded_api_node(0, 1);
  auto cluster = api::ClusterConnection::connect(o);
  if (!cluster) return cluster.status();
  transport::Transporter* link = factory.last();
  auto first = (*cluster)->new_session();
  if (!first) return first.status();
  auto second = (*cluster)->new_session();
  if (!second) return second.status();
  std::array<AccessTable, 2> tables;
  for (std::size_t s = 0; s < 2; ++s) {
    auto table = describe_access_table(s == 0 ? **first : **second, AccessTableSpec{kAccessTableName, p.rows, 100});
    if (!table) return table.status();
    tables[s] = *table;
  }
  // What a shared session's empty poll costs (the poll right taken and
  // given back), to take the shared path's misses out with.
  for (uint64_t i = 0; i < p.ops; ++i) {
    const Counted counted;
    if ((*first)->poll(0, 0) != 0) return Status(StatusCode::kInternal, "a poll completed something");
  }
  const std::string empty = "shared-empty reads=" + std::to_string(p.ops) + " empty=0";
  FJORD_COUNT_DUMP(empty.c_str());
  SharedPath path({first->get(), second->get()}, *link, tables[0], p);
  g_answer_wait_us = 0;
  g_misses = 0;
  const uint64_t start = monotonic_ns();
  if (Status s = path.run(); !s) return s;
  const uint64_t elapsed = monotonic_ns() - start;
  const std::string dump = "shared reads=" + std::to_string(p.ops) + " empty=" + std::to_string(g_misses);
  FJORD_COUNT_DUMP(dump.c_str());
  std::printf("%-8s %llu reads  %.0f ns per read (wall clock, sleeps included)  %llu misses\n", "shared",
              static_cast<unsigned long long>(p.ops), static_cast<double>(elapsed) / static_cast<double>(p.ops),
              static_cast<unsigned long long>(g_misses));
  return Status::ok();
}

// Runs one path, dumps its counters (named "<path> reads=N empty=E", E its
// misses) and prints its wall-clock figure.
Status run_path(const char* name, Status (Paths::*path)(), Paths& paths, const Params& p) {
  g_misses = 0;
  const uint64_t start = monotonic_ns();
  if (Status s = (paths.*path)(); !s) return s;
  const uint64_t elapsed = monotonic_ns() - start;
  const std::string dump = std::string(name) + " reads=" + std::to_string(p.ops) + " empty=" + std::to_string(g_misses);
  FJORD_COUNT_DUMP(dump.c_str());
  std::printf("%-8s %llu reads  %.0f ns per read (wall clock, sleeps included)  %llu misses\n", name,
              static_cast<unsigned long long>(p.ops), static_cast<double>(elapsed) / static_cast<double>(p.ops),
              static_cast<unsigned long long>(g_misses));
  return Status::ok();
}

Result<std::unique_ptr<NodeProcess>> start_node(const Params& p, const std::string& dir) {
  auto program = find_datanode_program();
  if (!program) return program.status();
  auto port = free_tcp_port();
  if (!port) return port.status();
  EmbeddedConfig c;
  c.transporters = {p.transporter};
  c.port = *port;
  c.data_dir = dir;
  c.control_socket = "@fjord-api-cpu-" + std::to_string(::getpid());
  c.data_memory_bytes = embedded_data_memory_bytes(p.rows, 100);
  c.api_nodes_per_transporter = 2;  // the second: the shared path's ClusterConnection
  c.endpoint_base = static_cast<uint64_t>(::getpid()) << 8;
  if (p.transporter == kTcpTls) {
    // A cluster CA and both ends' certificates, in the run's directory.
    const NodeId nodes[] = {kEmbeddedDataNode, embedded_api_node(0, 0)};
    if (Status s = tcp::write_tls_credentials(dir, nodes); !s) return s;
    c.tls_search_path = dir;
  }
  std::string text = embedded_config_text(c, tools::builtin_registry());
  if (p.tc_threads != 0) {
    // Several TCs, so a hinted transaction hashes its key to pick one; the
    // node's threads sleep when idle rather than spin on a shared host.
    const std::string single = "SingleThreaded=1\nSchedulerSpinTimer=" + std::to_string(c.spintime_us) + "\n";
    const std::size_t at = text.find(single);
    if (at == std::string::npos) return Status(StatusCode::kInternal, "the generated config changed its form");
    text.replace(at, single.size(),
                 "SingleThreaded=0\nSchedulerSpinTimer=0\nThreadConfig=ldm={count=1},tc={count=" +
                     std::to_string(p.tc_threads) + "},recv={count=1}\n");
  }
  const std::string config = dir + "/config.ini";
  std::ofstream(config) << text;
  return NodeProcess::start(NodeLaunch{*program, config, kEmbeddedDataNode, -1, c.control_socket,
                                       dir + "/ndb_1_out.log", dir, 10'000'000'000ULL});
}

Status run(const Params& p) {
  auto dir = make_temp_dir();
  if (!dir) return dir.status();
  auto node = start_node(p, *dir);
  if (!node) return node.status();
  api::ConnectOptions o;
  o.config_path = *dir + "/config.ini";
  o.node_id = embedded_api_node(0, 0);
  transport::TransporterRegistry registry;
  const AnswerFirstFactory* wrapped_transporter = nullptr;
  for (transport::TransporterFactory* f : tools::builtin_registry().all()) {
    auto factory = std::make_unique<AnswerFirstFactory>(*f);
    if (f->name() == p.transporter) wrapped_transporter = factory.get();
    if (Status s = registry.add(std::move(factory)); !s) return s;
  }
  if (wrapped_transporter == nullptr) return Status(StatusCode::kNotFound, "no transporter " + p.transporter);
  o.registry = &registry;
  o.poll_mode = api::PollMode::kSleep;
  o.spin_us = 0;
  auto conn = api::Connection::connect(o);
  if (!conn) return conn.status();
  auto table = create_access_table(**conn, AccessTableSpec{kAccessTableName, p.rows, 100});
  if (!table) return table.status();
  Progress progress(false);
  if (auto loaded = load_access_table(**conn, *table, progress); !loaded) return loaded.status();
  Paths paths(**conn, *table, p);
  if (Status s = run_path("empty", &Paths::empty_polls, paths, p); !s) return s;
  if (Status s = run_path("serial", &Paths::serial, paths, p); !s) return s;
  if (Status s = run_path("batched", &Paths::batched, paths, p); !s) return s;
  if (Status s = run_path("async", &Paths::async, paths, p); !s) return s;
  if (Status s = run_shared(o, *wrapped_transporter, p); !s) return s;
  conn->reset();
  return (*node)->stop();
}

bool parse(int argc, char** argv, Params& p) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--ops")
      p.ops = std::strtoull(value, nullptr, 10);
    else if (flag == "--batch")
      p.batch = static_cast<uint32_t>(std::strtoul(value, nullptr, 10));
    else if (flag == "--rows")
      p.rows = std::strtoull(value, nullptr, 10);
    else if (flag == "--transporter")
      p.transporter = value;
    else if (flag == "--tc-threads")
      p.tc_threads = static_cast<uint32_t>(std::strtoul(value, nullptr, 10));
    else
      return false;
  }
  return argc % 2 == 1 && p.ops > 0 && p.batch > 0 && p.rows > 0 && p.ops % p.batch == 0;
}

}  // namespace
}  // namespace fjord::bench

int main(int argc, char** argv) {
  fjord::bench::Params params;
  if (!fjord::bench::parse(argc, argv, params)) {
    std::fputs(
        "usage: api_cpu [--ops N] [--batch K (divides N)] [--rows R] [--transporter shm|tcp|tcp-tls|...]\n"
        "               [--tc-threads T (a multi-threaded node with T TCs)]\n",
        stderr);
    return 2;
  }
  fjord::log_set_level(fjord::LogLevel::kWarn);
  if (fjord::Status s = fjord::bench::run(params); !s) {
    std::fprintf(stderr, "api_cpu: %s\n", s.to_string().c_str());
    return 1;
  }
  return 0;
}
