// TC's core: construction, start-up, execute()'s dispatch (one method per
// signal, in the topic files named in tc_impl.h), statistics, and schema
// installs from DICT.
#include <string>

#include "fjord/base/log.h"
#include "tc_impl.h"

namespace fjord::engine {

using namespace protocol;

namespace {
constexpr uint16_t kTcTimer = runtime_signals::kFirstUser;  // TC's own periodic check
}  // namespace

TcBlock::Impl::Impl(const TcOptions& options, TcCounters& c)
    : o(options),
      counters(c),
      faults("TC " + std::to_string(options.instance)),
      txs(options.max_transactions),
      tx_by_id(options.max_transactions),
      ops(options.max_operations),
      lookup_columns(options.max_operations),
      scans(options.max_scans),
      key_buffer(kMaxKeyBytes),
      prepared_bytes(std::size_t{Block::kPrefetchWindow} * kMaxKeyBytes),
      section_a(frame::kMaxFrameBytes),
      section_b(frame::kMaxFrameBytes),
      train_key_bytes(std::size_t{kMaxTrainOps} * kMaxKeyBytes),
      train_hidden_rows(std::size_t{kMaxTrainOps} * kHiddenRowBytes),
      train_hidden_keys(std::size_t{kMaxTrainOps} * kHiddenRowBytes),
      reply_bytes(kMaxTrainBytes) {
  FJORD_ASSERT(options.ldm_instances >= 1);
  FJORD_ASSERT(options.ldm_instances <= 64);  // Tx::ldm_touched and ldm_held have a bit each
}

TcBlock::TcBlock(const TcOptions& options)
    : Block(block_numbers::kTc, options.instance, "TC(" + std::to_string(options.instance) + ")"),
      impl_(std::make_unique<Impl>(options, counters_)) {}

TcBlock::~TcBlock() = default;

TcStats TcBlock::stats() const {
  const auto get = [](const std::atomic<uint64_t>& v) { return v.load(std::memory_order_relaxed); };
  TcStats out;
  out.transactions_committed = get(counters_.transactions_committed);
  out.transactions_aborted = get(counters_.transactions_aborted);
  out.operations = get(counters_.operations);
  out.deadlock_aborts = get(counters_.deadlock_aborts);
  out.inactive_aborts = get(counters_.inactive_aborts);
  out.drop_aborts = get(counters_.drop_aborts);
  out.scans = get(counters_.scans);
  out.refused_requests = get(counters_.refused_requests);
  return out;
}

void TcBlock::on_start(BlockContext& c) {
  set_prefetches(impl_->find_direct_ldms(c));
  c.send_delayed(impl_->o.timer_period_ms, ref(), kTcTimer, {});
}

void TcBlock::prefetch(const Signal& s, int stage) const { impl_->prefetch(s, stage); }

void TcBlock::execute(const Signal& s, BlockContext& c) {
  Impl& m = *impl_;
  switch (s.number()) {
    case gsn::kTcKeyReq: return m.tc_key_req(s, c);
    case gsn::kTcKeyTrain: return m.tc_key_train(s, c);
    case gsn::kLqhKeyConf: return m.lqh_key_conf(s, c);
    case gsn::kLqhKeyRef: return m.lqh_key_ref(s, c);
    case gsn::kLqhCommitConf:
    case gsn::kLqhAbortConf: return m.tx_conf(s, c);
    case gsn::kTcCommitReq:
    case gsn::kTcRollbackReq: return m.rollback_req(s, c);
    case gsn::kScanReq: return m.scan_req(s, c);
    case gsn::kScanNextReq:
    case gsn::kScanCloseReq: return m.scan_next(s, c);
    case gsn::kScanFragConf: return m.scan_frag_conf(s, c);
    case gsn::kScanFragRef: return m.scan_frag_ref(s, c);
    case gsn::kSchemaInstall: return m.schema_install(s, c);
    case runtime_signals::kNodeDisconnected:
      if (foreign_runtime_signal(s)) return;
      return m.node_disconnected(static_cast<NodeId>(s.word(0)), c);
    case runtime_signals::kNodeConnected: return;
    case kTcTimer: return timer_signal(s, c);
    default: m.faults.refuse(s, "a signal TC does not serve");
  }
}

// TC's periodic check: its own signal, from send_delayed(). One from another
// block or node would start a second chain of timers (and fill the thread's
// timer queue), so it is refused. Out of line: execute() stays small.
void TcBlock::timer_signal(const Signal& s, BlockContext& c) {
  Impl& m = *impl_;
  if (s.sender_node != c.self_node() || s.sender() != ref())
    return m.faults.refuse(s, "TC's timer signal from another block or node");
  m.timer(c);
  c.send_delayed(m.o.timer_period_ms, ref(), kTcTimer, {});
}

// ---- LDM instances on this thread -------------------------------------------------------

// NDB's EXECUTE_DIRECT: an LDM instance on TC's own thread (single-threaded
// nodes, or a layout that puts them together) can run a read-committed read
// at once, with no LqhKeyReq/LqhKeyConf round. Returns whether there is one.
bool TcBlock::Impl::find_direct_ldms(BlockContext& c) {
  direct_ldm.assign(o.ldm_instances, nullptr);
  train_plans.assign(o.ldm_instances, {});
  bool any = false;
  for (uint16_t i = 0; i < o.ldm_instances; ++i) {
    direct_ldm[i] = dynamic_cast<LdmBlock*>(c.block_on_this_thread({block_numbers::kLdm, i}));
    any = any || direct_ldm[i] != nullptr;
  }
  any_direct_ldm = any;
  return any;
}

// ---- schema ---------------------------------------------------------------------------

void TcBlock::Impl::schema_install(const Signal& s, BlockContext& c) {
  auto m = decode_schema_install(s);
  if (!m) return faults.refuse(s, m.status().message());
  if (m->table_id >= tables.size()) tables.resize(m->table_id + 1);
  if (m->drop) {
    abort_writers_of(m->table_id, c);
    tables[m->table_id].reset();
  } else {
    auto def = decode_installed_table(*m);
    if (!def) return faults.refuse(s, def.status().message());
    auto t = std::make_unique<TcTable>(std::move(def).value());
    for (const IndexDef& index : t->def.indexes)
      if (index.kind == IndexKind::kUnique) t->uniques.push_back({index.index_id, index.columns});
    tables[m->table_id] = std::move(t);
  }
  send_out(c, s.sender_address(), SchemaInstallConf{m->install_id});
}

}  // namespace fjord::engine
