// TC: the transaction coordinator block (NDB's DBTC), one instance per tc
// thread (or on the main/single thread).
//
// It receives operations from API nodes (TcKeyReq), routes each to the LDM
// instance owning its partition (hash of the primary key), reads unique-key
// rows through the hidden unique-index table and keeps those tables in step
// with writes, counts completions per execute() batch, commits or aborts at
// every LDM instance the transaction touched, and answers the API. It also
// coordinates scans (tc_scan.cpp): one ScanFragReq per partition, in rounds.
//
// Errors abort the whole transaction (NDB's AbortOnError): the API gets one
// TcKeyRef naming the failing operation after every lock is released.
// Timeouts: an operation waiting longer than TransactionDeadlockDetectionTimeout
// (a lock wait, probably a deadlock) aborts its transaction with 266; a
// transaction idle longer than TransactionInactiveTimeout is aborted (237)
// and its API told (TcAbortRep). A disconnected API node's transactions are
// aborted.
//
// Every record comes from pools sized at start-up (MaxNoOfConcurrent*); a
// full pool refuses the request with an error, never allocates.
//
// Thread: its tc thread; stats() from any thread. Hot path: execute().
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "fjord/engine/key_codec.h"
#include "fjord/engine/protocol.h"
#include "fjord/engine/runtime/block.h"

namespace fjord::engine {

struct TcOptions {
  uint16_t instance = 0;
  uint16_t ldm_instances = 1;
  uint32_t max_transactions = 4096;
  uint32_t max_operations = 32768;
  uint32_t max_scans = 256;
  uint32_t deadlock_timeout_ms = 1200;
  uint32_t inactive_timeout_ms = 0;  // 0 = never
  uint32_t timer_period_ms = 50;     // how often timeouts are checked
};

// Counters. The tc thread is the only writer (fjord::bump, fjord/base/
// counter.h: it costs what `++` on a plain integer does, and says why
// relaxed is enough); any thread may read them (TcBlock::stats).
struct TcCounters {
  std::atomic<uint64_t> transactions_committed{0};
  std::atomic<uint64_t> transactions_aborted{0};
  std::atomic<uint64_t> operations{0};
  std::atomic<uint64_t> deadlock_aborts{0};
  std::atomic<uint64_t> inactive_aborts{0};
  std::atomic<uint64_t> drop_aborts{0};  // transactions aborted because a table they wrote to was dropped
  std::atomic<uint64_t> scans{0};
  std::atomic<uint64_t> refused_requests{0};
};

// A snapshot of the counters, for tests and the node's statistics. Each
// field is read on its own: taken while the block runs, the fields need
// not agree with one another (a transaction may be counted in operations
// and not yet in transactions_committed).
struct TcStats {
  uint64_t transactions_committed = 0;
  uint64_t transactions_aborted = 0;  // all of them, whatever the reason
  uint64_t operations = 0;
  uint64_t deadlock_aborts = 0;  // an operation waited longer than TransactionDeadlockDetectionTimeout (266)
  uint64_t inactive_aborts = 0;  // idle longer than TransactionInactiveTimeout (237)
  uint64_t drop_aborts = 0;      // a table it wrote to was dropped (283)
  uint64_t scans = 0;
  uint64_t refused_requests = 0;  // TcKeyRef or ScanRef before any work (bad request, pools full, overload)
};

class TcBlock final : public Block {
 public:
  explicit TcBlock(const TcOptions& options);
  ~TcBlock() override;

  void on_start(BlockContext& context) override;
  void execute(const Signal& signal, BlockContext& context) override;
  bool wants_node_events() const override { return true; }
  // With an LDM on its own thread, TC runs read-committed pk reads there
  // directly (LdmBlock::read_committed_now) and prefetches their rows.
  void prefetch(const Signal& signal, int stage) const override;

  // Any thread.
  TcStats stats() const;

  struct Impl;

 private:
  [[gnu::noinline]] void timer_signal(const Signal& s, BlockContext& c);
  std::unique_ptr<Impl> impl_;
  TcCounters counters_;
};

}  // namespace fjord::engine
