// `latency_bench` / `latency_bench access`: the access-method table of NDB's
// testReadPerf over every transporter available (or --transporter, or the
// link of --config), beside NDB 2004's figures, with --compare's redis and
// bare-TCP rows, the memory the table took, and the targets for each.
#include <cstdio>

#include "access_report.h"
#include "access_run.h"
#include "access_table.h"
#include "cluster_target.h"
#include "commands.h"
#include "fjord/base/cache.h"
#include "fjord/base/clock.h"
#include "floors.h"
#include "redis_peer.h"
#include "sweep.h"

namespace fjord::bench {
namespace {

constexpr uint64_t kNsPerSecond = 1'000'000'000ULL;
constexpr std::size_t kBareTcpWireBytes = 128;  // about a pk read request or its answer on our wire
constexpr uint64_t kRedisMaxKeys = 1'000'000;   // more keys only make redis's load longer

AccessPlan access_plan(const Options& o) {
  AccessPlan p;
  p.iterations = effective_iterations(o);
  p.warmup = effective_warmup(o);
  p.full_scans = std::clamp<uint64_t>(p.iterations / 2000, 3, 50);
  p.batch = o.batch;
  return p;
}

std::string title(const Options& o, const ClusterTarget& t) {
  std::string names;
  for (const TargetEndpoint& e : t.endpoints) names += (names.empty() ? "" : ", ") + e.transporter;
  return std::string("latency_bench access: NDB testReadPerf's access methods over ") + names +
         (o.config_path.empty() ? "" : " (" + t.endpoints.front().link + " of " + o.config_path + ")") +
         ", microseconds per row, NDB 2004's figures beside them";
}

AccessConditions conditions(const Options& o, const RunContext& ctx, const ClusterTarget& t, const AccessPlan& p) {
  AccessConditions c;
  c.title = title(o, t);
  c.rows = o.rows;
  c.row_bytes = o.row_bytes;
  c.batch = o.batch;
  c.iterations = p.iterations;
  c.warmup = p.warmup;
  c.full_scans = p.full_scans;
  c.poll = poll_mode_name(o.poll);
  c.cpus = ctx.cpus;
  c.node = t.description;
  c.config = t.config_label;
  auto layout = node_layout(t.control_socket);
  c.node_layout = layout ? *layout : "node layout not available: " + layout.status().message();
  return c;
}

constexpr uint32_t kFloorSlices = 10;

ComparisonRow bare_tcp_row(const Options& o) {
  ComparisonRow row;
  row.key = o.poll == PollMode::kBusy ? "floor.bare_tcp_busy" : "floor.bare_tcp_blocking";
  row.label = std::string("floor: bare TCP ") + (o.poll == PollMode::kBusy ? "busy-poll" : "blocking") + ", " +
              std::to_string(kBareTcpWireBytes) + " B, in turn with serial pk";
  row.beside = "serial_pk";
  row.unit = "rtt";
  return row;
}

// Serial pk reads and the bare TCP floor their target is judged against, in
// kFloorSlices alternating slices. A host's round-trip latency can move
// between states within one run (power states, interrupt placement, other
// work), so a floor measured seconds after the reads, as a block of its
// own, may compare two different states. Each
// slice of reads has its own warm-up (the node's thread slept meanwhile);
// each slice of the floor its own echo process on the node's CPU.
MethodResult serial_pk_beside_floor(api::Connection& conn, const AccessTable& table, const Options& o,
                                    const RunContext& ctx, const AccessPlan& plan, ComparisonRow& floor,
                                    Progress& progress) {
  MethodResult total;
  total.method = AccessMethod::kSerialPk;
  Histogram floor_rtt;
  Status floor_status;
  for (uint32_t slice = 0; slice < kFloorSlices; ++slice) {
    AccessPlan part = plan;
    part.iterations = plan.iterations / kFloorSlices + (slice < plan.iterations % kFloorSlices ? 1 : 0);
    part.warmup = std::max<uint64_t>(plan.warmup / kFloorSlices, std::min<uint64_t>(plan.warmup, 50));
    if (part.iterations == 0) continue;
    if (floor_status) {
      const FloorParams params{part.iterations, part.warmup, kBareTcpWireBytes, ctx.cpus[1],
                               o.timeout_s * kNsPerSecond};
      floor_status = bare_tcp_samples(params, o.poll, floor_rtt, nullptr, progress);
    }
    MethodResult m = measure_access_method(conn, table, AccessMethod::kSerialPk, part, progress);
    total.rows_per_sample = m.rows_per_sample;
    total.samples += m.samples;
    total.rows += m.rows;
    total.elapsed_ns += m.elapsed_ns;
    total.per_row_ns.merge(m.per_row_ns);
    total.usage.wall_ns += m.usage.wall_ns;
    total.usage.cpu_ns += m.usage.cpu_ns;
    total.usage.involuntary_switches += m.usage.involuntary_switches;
    if (!m.status) {
      total.status = m.status;
      break;
    }
  }
  floor.samples = floor_rtt.count();
  if (!floor_status) {
    floor.outcome = Outcome::kFailed;
    floor.reason = floor_status.message();
  } else if (floor.samples == 0) {
    floor.outcome = Outcome::kFailed;
    floor.reason = total.status ? "no serial pk slices ran" : "serial pk failed first: " + total.status.message();
  } else {
    floor.per_row_ns = LatencySummary::from(floor_rtt);
  }
  return total;
}

// The cache-line mailbox between the two CPUs (two processes, the echo on
// the node's CPU while the node waits), measured just `when` ("before",
// "after") a transporter's rows: the host's cross-core state, which moves
// by itself (power states, other work) and every shm figure with it.
ComparisonRow mailbox_row(const RunContext& ctx, const std::string& when, const std::string& transporter,
                          Progress& progress) {
  ComparisonRow row;
  row.key = "floor.mailbox." + when;
  row.label = "floor: cache-line mailbox, 2 processes, " + when + " the " + transporter + " rows";
  row.unit = "rtt";
  const Row measured = mailbox_floor(FloorParams{20'000, 2'000, kCacheLineBytes, ctx.cpus[1]}, progress);
  if (measured.outcome != Outcome::kMeasured || !measured.rtt) {
    row.outcome = Outcome::kFailed;
    row.reason = measured.reason;
    return row;
  }
  row.samples = measured.rtt->count;
  row.per_row_ns = *measured.rtt;
  return row;
}

// Every method over one connection; a failed method is a cell that says why.
// Over tcp with --compare, serial pk alternates with the bare TCP floor,
// which is added to the report's comparisons; over shm with --compare, the
// cache-line mailbox is measured before and after its rows.
void measure_transporter(api::Connection& conn, const AccessTable& table, const std::string& transporter,
                         const Options& o, const RunContext& ctx, const AccessPlan& plan, AccessReport& report,
                         Progress& progress) {
  const bool with_floor = o.compare && transporter == "tcp";
  const bool with_mailbox = o.compare && transporter == "shm";
  ComparisonRow floor = bare_tcp_row(o);
  if (with_mailbox) report.compare.push_back(mailbox_row(ctx, "before", transporter, progress));
  for (AccessMethod method : kAccessMethods) {
    progress.begin(transporter + ": " + access_method_label(method), plan.iterations);
    MethodResult m = with_floor && method == AccessMethod::kSerialPk
                         ? serial_pk_beside_floor(conn, table, o, ctx, plan, floor, progress)
                         : measure_access_method(conn, table, method, plan, progress);
    AccessCell cell;
    cell.transporter = transporter;
    cell.method = method;
    cell.rows_per_sample = m.rows_per_sample;
    cell.samples = m.samples;
    cell.rows = m.rows;
    cell.per_row_ns = LatencySummary::from(m.per_row_ns);
    cell.usage = m.usage;
    if (!m.status) {
      cell.outcome = Outcome::kFailed;
      cell.reason = m.status.message();
    }
    report.cells.push_back(cell);
  }
  if (with_floor) report.compare.push_back(floor);
  if (with_mailbox) report.compare.push_back(mailbox_row(ctx, "after", transporter, progress));
}

// Loads the table over the first endpoint and measures the DataMemory it took.
Result<AccessTable> create_and_load(api::Connection& conn, const Options& o, const ClusterTarget& t,
                                    AccessReport& report, Progress& progress) {
  const AccessTableSpec spec{kAccessTableName, o.rows, o.row_bytes};
  report.memory.rows = o.rows;
  report.memory.row_bytes = o.row_bytes;
  auto before = node_pages_in_use(t.control_socket);
  auto table = create_access_table(conn, spec);
  if (!table) return table.status();
  auto load = load_access_table(conn, *table, progress);
  if (!load) return load.status();
  report.load = {load->rows, load->elapsed_ns, load->rows_per_transaction, t.endpoints.front().transporter};
  auto after = node_pages_in_use(t.control_socket);
  if (before && after) {
    report.memory.measured = true;
    report.memory.pages_before = *before;
    report.memory.pages_after = *after;
  } else {
    report.memory.reason = (before ? after.status() : before.status()).message();
  }
  return table;
}

// Serial pk read through a session of a shared cluster connection (NDB's
// Ndb of an Ndb_cluster_connection), on the API node the column used, for
// the comparison with the Connection's own serial pk row: what a program
// with one thread per session pays for the shared receive and send paths.
ComparisonRow session_row(const ClusterTarget& target, const TargetEndpoint& e, const AccessTableSpec& spec,
                          const Options& o, const AccessPlan& plan, Progress& progress, bool drop) {
  ComparisonRow row;
  row.key = "session." + e.transporter + ".serial_pk";
  row.label = "serial pk through a Session of a ClusterConnection, " + e.transporter;
  row.beside = "serial_pk";
  auto failed = [&row](const Status& s) {
    row.outcome = Outcome::kFailed;
    row.reason = s.message();
    return row;
  };
  auto cluster = api::ClusterConnection::connect(api_options(target, e.api_nodes.front(), o));
  if (!cluster) return failed(cluster.status());
  auto session = (*cluster)->new_session();
  if (!session) return failed(session.status());
  Result<AccessTable> table = describe_access_table(**session, spec);
  if (!table) return failed(table.status());
  progress.begin(e.transporter + ": serial pk through a session", plan.iterations);
  const MethodResult m = measure_access_method(**session, *table, AccessMethod::kSerialPk, plan, progress);
  if (drop) (void)(*session)->drop_table(kAccessTableName);
  if (!m.status) return failed(m.status);
  row.samples = m.samples;
  row.per_row_ns = LatencySummary::from(m.per_row_ns);
  return row;
}

// One transporter's column. The first endpoint measures over the loader's
// connection, the others connect as their own API node; each connection is
// closed before the next transporter is measured, so the node's loop serves
// only the link being measured. The last one drops the table.
TransporterColumn measure_endpoint(const Options& o, const RunContext& ctx, const ClusterTarget& target, std::size_t i,
                                   std::unique_ptr<api::Connection> conn, const AccessTable& loaded,
                                   const AccessPlan& plan, AccessReport& report, Progress& progress) {
  const TargetEndpoint& e = target.endpoints[i];
  TransporterColumn column{e.transporter, Outcome::kMeasured, "", e.api_nodes.front(), e.link};
  Result<AccessTable> table = loaded;
  if (!conn) {
    auto connected = connect_api(target, e.api_nodes.front(), o);
    if (connected) {
      conn = std::move(connected).value();
      table = describe_access_table(*conn, loaded.spec);
    } else {
      table = connected.status();
    }
  }
  if (!table) {
    column.outcome = Outcome::kFailed;
    column.reason = table.status().message();
    return column;
  }
  measure_transporter(*conn, *table, e.transporter, o, ctx, plan, report, progress);
  const bool last = i + 1 == target.endpoints.size();
  if (e.transporter == "tcp" || e.transporter == "shm") {
    conn.reset();  // the session below connects as the same API node
    report.compare.push_back(session_row(target, e, loaded.spec, o, plan, progress, last));
    if (last && report.compare.back().outcome != Outcome::kMeasured) {
      if (auto again = connect_api(target, e.api_nodes.front(), o)) (void)(*again)->drop_table(kAccessTableName);
    }
    return column;
  }
  if (last) (void)conn->drop_table(kAccessTableName);
  conn.reset();
  return column;
}

// The comparison a target needs, if this run measured it.
const ComparisonRow* comparison(const AccessReport& r, const std::string& key) {
  for (const ComparisonRow& c : r.compare)
    if (c.key == key && c.outcome == Outcome::kMeasured) return &c;
  return nullptr;
}

double us(uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

// The host's cross-core state around the shm rows, for their targets: ""
// when the mailbox was not measured.
std::string shm_host_state(const AccessReport& r) {
  const ComparisonRow* before = comparison(r, "floor.mailbox.before");
  const ComparisonRow* after = comparison(r, "floor.mailbox.after");
  if (before == nullptr || after == nullptr) return "";
  return "cache-line mailbox p50 " + format_us(before->per_row_ns.p50_ns) + " us before, " +
         format_us(after->per_row_ns.p50_ns) + " us after the shm rows";
}

// TLS's cost: tcp-tls beside plain tcp, measured against the same node.
void add_tls_target(AccessReport& r, const AccessCell* tcp) {
  const std::string tls_pk = "serial pk read over tcp-tls: median <= 1.3x plain tcp's";
  const AccessCell* tls = r.cell(std::string(kTcpTls), AccessMethod::kSerialPk);
  if (tcp && tcp->outcome == Outcome::kMeasured && tls && tls->outcome == Outcome::kMeasured &&
      tcp->per_row_ns.p50_ns > 0)
    r.targets.push_back(evaluated_target(
        tls_pk, static_cast<double>(tls->per_row_ns.p50_ns) / static_cast<double>(tcp->per_row_ns.p50_ns), 1.3, "x tcp",
        "tcp-tls p50 " + format_us(tls->per_row_ns.p50_ns) + " us / tcp p50 " + format_us(tcp->per_row_ns.p50_ns) +
            " us",
        false));
  else
    r.targets.push_back(unevaluated_target(tls_pk, "needs tcp and tcp-tls measured in the same run"));
}

// A session of a shared cluster connection against the Connection, per
// transporter measured with both.
void add_session_targets(AccessReport& r, const std::string& shm_host) {
  for (const char* transporter : {"tcp", "shm"}) {
    const std::string name =
        std::string("serial pk read through a session over ") + transporter + ": median <= 1.05x a Connection's";
    const AccessCell* whole = r.cell(transporter, AccessMethod::kSerialPk);
    const ComparisonRow* session = comparison(r, std::string("session.") + transporter + ".serial_pk");
    if (whole && whole->outcome == Outcome::kMeasured && session && whole->per_row_ns.p50_ns > 0)
      r.targets.push_back(evaluated_target(
          name, static_cast<double>(session->per_row_ns.p50_ns) / static_cast<double>(whole->per_row_ns.p50_ns), 1.05,
          "x Connection",
          "session p50 " + format_us(session->per_row_ns.p50_ns) + " us / Connection p50 " +
              format_us(whole->per_row_ns.p50_ns) + " us",
          false));
    else
      r.targets.push_back(unevaluated_target(name, std::string(transporter) + " was not measured in this run"));
    if (std::string_view(transporter) == "shm") r.targets.back().host = shm_host;
  }
}

void add_targets(const Options& o, AccessReport& r) {
  const std::string shm_host = shm_host_state(r);
  const std::string shm_pk = "serial pk read over shm: median <= 2 us";
  if (const AccessCell* c = r.cell("shm", AccessMethod::kSerialPk); c && c->outcome == Outcome::kMeasured) {
    r.targets.push_back(evaluated_target(shm_pk, us(c->per_row_ns.p50_ns), 2.0, "us", "", false));
    r.targets.back().host = shm_host;
  } else
    r.targets.push_back(unevaluated_target(shm_pk, "shm was not measured in this run"));
  const std::string tcp_pk = "serial pk read over tcp: median <= bare busy-poll TCP RTT + 3 us";
  const AccessCell* tcp = r.cell("tcp", AccessMethod::kSerialPk);
  const ComparisonRow* bare = comparison(r, "floor.bare_tcp_busy");
  if (tcp && tcp->outcome == Outcome::kMeasured && bare)
    r.targets.push_back(evaluated_target(tcp_pk, us(tcp->per_row_ns.p50_ns), us(bare->per_row_ns.p50_ns) + 3.0, "us",
                                         "bare TCP p50 " + format_us(bare->per_row_ns.p50_ns) + " us + 3 us", false));
  else
    r.targets.push_back(unevaluated_target(
        tcp_pk, !tcp ? "tcp was not measured in this run" : "needs the bare TCP floor: --compare with --poll busy"));
  add_tls_target(r, tcp);
  add_session_targets(r, shm_host);
  const std::string batched = "batched pk read, 20 rows per execute, over shm: <= 0.2 us per row (median)";
  const AccessCell* b = r.cell("shm", AccessMethod::kBatchedPk);
  if (o.batch != 20)
    r.targets.push_back(unevaluated_target(batched, "this run used --batch " + std::to_string(o.batch)));
  else if (b && b->outcome == Outcome::kMeasured) {
    r.targets.push_back(evaluated_target(batched, us(b->per_row_ns.p50_ns), 0.2, "us/row", "", false));
    r.targets.back().host = shm_host;
  } else
    r.targets.push_back(unevaluated_target(batched, "shm was not measured in this run"));
  const std::string memory = "memory: 1,000,000 rows of 100 bytes <= 2x their payload";
  if (!r.memory.measured)
    r.targets.push_back(unevaluated_target(memory, r.memory.reason));
  else if (r.memory.rows != 1'000'000 || r.memory.row_bytes != 100)
    r.targets.push_back(unevaluated_target(memory, "this run loaded " + std::to_string(r.memory.rows) + " rows of " +
                                                       std::to_string(r.memory.row_bytes) +
                                                       " bytes; run access --rows 1000000 --row-bytes 100"));
  else
    r.targets.push_back(evaluated_target(memory, r.memory.ratio(), 2.0, "x payload",
                                         "DataMemory pages in use after loading minus before, 32 KB each; the table "
                                         "has a unique and an ordered index",
                                         false));
}

void add_notes(AccessReport& r) {
  r.notes = {
      "us per row = a sample's time / the rows it returned; p50 / p99 over samples. A sample is one",
      "execute(Commit) (serial: 1 read, batched: K reads of random rows) or one whole scan (open, read every",
      "row, close). Indexed eq-bound: ordered-index scan with lower = upper bound, one row (NDB's set-up",
      "cost of a range scan). Index range: ordered-index scan over K consecutive keys. Full scan: every row.",
      "Every returned row is checked (id, unique key, ordered key; key reads also the filler).",
      "Serial pk insert: one insert of a new row per execute(Commit), deleted untimed after it; serial pk",
      "update: one update of a random row's filler per execute(Commit).",
      std::string("NDB 2004 TCP and NDB 2004 SCI: NDB's own figures of 2004, from the ") + kReferenceSource + ":",
      std::string(kReferenceConditions) + ";",
      "ours: one data node, this machine. The ratio, not the year, is the point.",
  };
}

int finish(const Options& o, AccessReport& report, ClusterTarget& target) {
  bool failed = false;
  for (const AccessCell& c : report.cells) failed = failed || c.outcome != Outcome::kMeasured;
  if (Status s = target.node ? target.node->stop() : Status::ok(); !s) {
    report.notes.push_back("the data node did not stop cleanly: " + s.message());
    failed = true;
  }
  report.machine.load_end = load_average();
  const std::string text = o.json ? format_access_json(report) : format_access_table(report);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  if (!o.plot_path.empty()) {
    if (Status s = write_access_plot(report, o.plot_path); !s)
      std::fprintf(stderr, "latency_bench: --plot %s: %s\n", o.plot_path.c_str(), s.message().c_str());
    else if (!o.json)
      std::printf("plot: %s\n", o.plot_path.c_str());
  }
  return failed ? 1 : 0;
}

}  // namespace

int run_access_command(const Options& o) {
  if (!o.sweep_param.empty()) return run_sweep_command(o);
  auto ctx = prepare_run(o);
  if (!ctx) return usage_error(ctx.status().message());
  auto target = prepare_cluster(o, *ctx, 1, o.rows, o.row_bytes);
  if (!target)
    return target.status().code() == StatusCode::kInvalidArgument ? usage_error(target.status().message())
                                                                  : run_error(target.status().message());
  Progress progress(true);
  const AccessPlan plan = access_plan(o);
  AccessReport report;
  report.machine = ctx->machine;
  report.conditions = conditions(o, *ctx, *target, plan);
  auto loader = connect_api(*target, target->endpoints.front().api_nodes.front(), o);
  if (!loader) return run_error(loader.status().message());
  auto table = create_and_load(**loader, o, *target, report, progress);
  if (!table) return run_error(table.status().message());
  const int node_pid = target->node ? target->node->pid() : -1;
  const ProcessSchedule node_before = read_process_schedule(node_pid);
  const uint64_t measure_start = monotonic_ns();
  std::unique_ptr<api::Connection> first = std::move(loader).value();
  for (std::size_t i = 0; i < target->endpoints.size(); ++i)
    report.transporters.push_back(
        measure_endpoint(o, *ctx, *target, i, i == 0 ? std::move(first) : nullptr, *table, plan, report, progress));
  report.transporters.insert(report.transporters.end(), target->skipped.begin(), target->skipped.end());
  report.conditions.node_schedule =
      schedule_share(node_before, read_process_schedule(node_pid), monotonic_ns() - measure_start);
  if (o.compare) {
    const RedisPlan redis{std::min(o.rows, kRedisMaxKeys),
                          o.row_bytes,
                          o.batch,
                          plan.iterations,
                          plan.warmup,
                          ctx->cpus[1],
                          o.poll == PollMode::kBusy,
                          o.timeout_s * 3 * kNsPerSecond};
    for (ComparisonRow& row : measure_redis(redis, progress)) report.compare.push_back(std::move(row));
  }
  add_targets(o, report);
  add_notes(report);
  return finish(o, report, *target);
}

}  // namespace fjord::bench
