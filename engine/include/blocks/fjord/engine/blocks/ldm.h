// LDM: the local data manager block (NDB's DBLQH, DBTUP, DBACC and DBTUX in
// one block), one instance per ldm thread.
//
// Instance i owns partition p of every table when p % ldm_instances == i.
// Per owned partition it keeps a row store, a primary-key hash index and one
// ordered index per ordered index of the table, all in pages of the node's
// DataMemory (a PagePool shared by every LDM instance of the node).
//
// It executes what TC sends (protocol.h): key operations (LqhKeyReq) with
// row locks, commit and abort of a transaction's operations, and scans
// (ScanFragReq) in rounds. Writes take exclusive row locks and prepare a
// pending version beside the committed one (copy-on-write), so a
// read-committed read never waits and sees the last committed version until
// the writer commits; shared locks on request. A request that meets a
// conflicting lock waits ("parked", in FIFO order per row) in memory bounded
// at start-up; deadlocks are broken by TC's timeout (LqhAbortReq). Commit
// never needs memory: everything it makes visible was prepared, index
// entries included. docs/ldm.md describes the design.
//
// Every record (operations, locks, transactions, parked requests, scans)
// comes from pools sized at start-up: a full pool refuses the request with
// an error code, never allocates.
//
// Thread: its ldm thread (execute, on_start). stats() from any thread.
// Hot path: execute(); it allocates nothing from the heap (tests prove it).
// Schema installs and drops are slow-path.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>

#include "fjord/engine/protocol.h"
#include "fjord/engine/runtime/block.h"
#include "fjord/engine/storage/page_pool.h"

namespace fjord::engine {

// A primary key as the table's KeyCodec encodes it, and hash_key of those
// bytes: what a co-located TC computed to route a request, handed to
// read_committed_now so the LDM need not compute it again.
struct EncodedKey {
  std::span<const std::byte> bytes;
  uint64_t hash = 0;
  // Rows (storage::RowId) the key's hash bucket listed under its hash bits
  // when the caller looked ahead (LdmBlock::prefetch_rows) in the same
  // signal, with nothing erased from the index since: the key's row, if the
  // bucket itself holds it, is one of them. The read compares these first
  // and searches the index only if none is the key's. Null: not looked up.
  const uint32_t* candidates = nullptr;
  uint32_t candidate_count = 0;
};

struct LdmOptions {
  uint16_t instance = 0;       // this block's ldm thread index
  uint16_t ldm_instances = 1;  // LDM instances of the node (partitions are spread over them)
  // MaxNoOfConcurrentOperations: operation/lock records of this instance.
  // A transaction's operations on one row share one record; each locked row
  // and each transaction with something held or waiting needs one more.
  uint32_t max_operations = 32768;
  uint32_t max_scans = 256;  // fragment scans open at once on this instance (one per partition scanned)
  // Bytes for requests waiting for a lock (their key, values and column
  // list); when full, a request that would wait is refused (kTooManyOperations).
  uint32_t parked_request_bytes = 1 << 20;
  // Scan definitions (filters and column lists) of open scans.
  uint32_t scan_definition_bytes = 1 << 20;
  // Rows a scan examines per signal before it yields the thread to other
  // signals (the round goes on in a signal to itself).
  uint32_t scan_slice_rows = 1024;
};

// Counters. The ldm thread is the only writer (a relaxed load and store);
// any thread may read them. Relaxed is enough: each counter is read on its
// own, as a statistic, and no other memory is published through it.
struct LdmCounters {
  std::atomic<uint64_t> committed_rows{0};  // rows visible to read-committed readers
  std::atomic<uint64_t> key_operations{0};  // LqhKeyReq executed (each resumption counts again)
  std::atomic<uint64_t> reads{0};
  std::atomic<uint64_t> inserts{0};
  std::atomic<uint64_t> updates{0};
  std::atomic<uint64_t> deletes{0};
  std::atomic<uint64_t> refused{0};     // LqhKeyRef sent
  std::atomic<uint64_t> lock_waits{0};  // requests parked behind a lock
  std::atomic<uint64_t> commits{0};     // LqhCommitReq handled
  std::atomic<uint64_t> aborts{0};      // LqhAbortReq handled
  std::atomic<uint64_t> scans{0};       // ScanFragReq accepted
  std::atomic<uint64_t> scan_rows{0};   // rows sent by scans
  // Scan rounds answered (a ScanFragConf after rows, not a close's): with
  // scan_rows, how well batches are filled.
  std::atomic<uint64_t> scan_rounds{0};
  std::atomic<uint64_t> out_of_memory{0};
  // Key lookups that found their row among the rows a look-ahead listed
  // (EncodedKey::candidates), and those that searched the hash index.
  std::atomic<uint64_t> lookahead_hits{0};
  std::atomic<uint64_t> index_searches{0};
  // Gauges.
  std::atomic<uint64_t> parked_now{0};
  std::atomic<uint64_t> operation_records_in_use{0};
  std::atomic<uint64_t> lock_records_in_use{0};
  std::atomic<uint64_t> scans_open{0};
};

// A snapshot of the counters plus DataMemory, for the node's statistics.
struct LdmStats {
  uint64_t committed_rows = 0, key_operations = 0, reads = 0, inserts = 0, updates = 0, deletes = 0;
  uint64_t refused = 0, lock_waits = 0, commits = 0, aborts = 0, scans = 0, scan_rows = 0, scan_rounds = 0;
  uint64_t out_of_memory = 0;
  uint64_t lookahead_hits = 0, index_searches = 0;
  uint64_t parked_now = 0, operation_records_in_use = 0, lock_records_in_use = 0, scans_open = 0;
  uint64_t data_memory_used_bytes = 0;  // the node's DataMemory in use (all LDM instances)
  uint64_t data_memory_bytes = 0;       // the node's DataMemory
};

class LdmBlock final : public Block {
 public:
  // `data_memory` is shared by every LDM instance of the node and must
  // outlive the block.
  LdmBlock(storage::PagePool& data_memory, const LdmOptions& options);
  ~LdmBlock() override;

  void execute(const Signal& signal, BlockContext& context) override;
  void prefetch(const Signal& signal, int stage) const override;

  // NDB's EXECUTE_DIRECT for the commonest request, called by a TC on this
  // block's thread instead of sending it an LqhKeyReq: a read-committed read
  // by primary key whose values go to the API (req.op kRead, req.lock
  // kCommitted, req.result_to kApi). It holds nothing here and never waits,
  // so it runs at once, checked as an LqhKeyReq is; the KeyData goes to
  // req.api_node through `context`. Returns kNone, or the error an
  // LqhKeyRef would have carried (nothing is sent then). `batch_end`, when
  // given, is the TcKeyConf this read ends (a committed batch, nothing else
  // outstanding): the KeyData carries it (kKeyDataConf). `key`, when given,
  // is req.key already encoded and hashed by the caller (TC routed by it),
  // so the read does not do it again. Hot path.
  // `into`, when given, takes the values instead of a KeyData: a
  // KeyDataTrain record (header and values) written at its start, which
  // must have room for kKeyDataRecordHeaderBytes + max_read_bytes(table);
  // returns the bytes written in `written` (batch_end is then null; and
  // req.result_to may be kTc: TC's lookup of a unique key's hidden row).
  struct Into {
    std::span<std::byte> room;
    std::size_t written = 0;
  };
  protocol::ErrorCode read_committed_now(const protocol::LqhKeyReq& req, BlockContext& context,
                                         const protocol::TcKeyConf* batch_end = nullptr,
                                         const EncodedKey* key = nullptr, Into* into = nullptr);
  // A train's reads that share a table and a column list, as TC runs them
  // (run_planned): what read_committed_now checks of those (the table here
  // at that version, the column list) checked once, for read_planned. An
  // invalid plan when a check fails: those reads then take
  // read_committed_now, which names the error. A plan holds `columns`
  // (the caller's bytes) and is good while the schema does not change:
  // within the signal that made it.
  struct ReadPlan {
    const void* table = nullptr;  // this instance's table
    std::span<const std::byte> columns;
    bool valid() const { return table != nullptr; }
  };
  ReadPlan plan_reads(uint32_t table_id, uint32_t table_version, std::span<const std::byte> columns) const;
  // One read of a plan: its partition as prefetch_bucket's `found` named
  // it (in this signal), its op_index, and its key, which the caller
  // encoded and hashed and routed there.
  struct PlannedRead {
    const void* found = nullptr;
    uint32_t op_index = 0;
    const EncodedKey* key = nullptr;
  };
  // Read-committed reads of a plan, in order, each as read_committed_now
  // runs one with `into` (same answer, record and counters) for an
  // LqhKeyReq of the plan's table and columns: their KeyDataTrain records
  // back to back from the start of into.room, which has room for each at
  // the table's longest read. Stops at the first that fails (no partition
  // of the plan's table: kBadRequest; no row: kNoSuchRow), which
  // writes nothing. Returns how many ran (into.written: their bytes) and
  // sets `error` to the failing read's error (kNone when all ran). Hot
  // path: a train's reads, the table and the call paid once for a run.
  uint32_t read_planned(const ReadPlan& plan, std::span<const PlannedRead> reads, Into& into,
                        protocol::ErrorCode& error);
  // prefetch() for a request a co-located TC is about to run that way.
  void prefetch_key(uint32_t table_id, uint32_t partition, uint32_t key_hash, int stage) const;
  // prefetch_key's stages for a look-ahead in one signal: stage 0, which
  // returns the bucket it loads (null if none), and stage 1 given that
  // bucket back, which also gives the rows it loads (at most `max`,
  // returned): EncodedKey::candidates for a read in the same signal.
  // `more`, when given, is set to the overflow block stage 1 started
  // loading when the bucket listed no candidate but chains on (null if
  // not): given back as `bucket` a little later, stage 1 looks there.
  // `found`, when given, is set to the partition stage 0 found (null when
  // it is not this instance's): a handle good within the same signal, for
  // prefetch_rows_in and PlannedRead, which then do not find the table and
  // partition again.
  const void* prefetch_bucket(uint32_t table_id, uint32_t partition, uint32_t key_hash,
                              const void** found = nullptr) const;
  uint32_t prefetch_rows(uint32_t table_id, uint32_t partition, uint32_t key_hash, const void* bucket, uint32_t* rows,
                         uint32_t max, const void** more = nullptr) const;
  uint32_t prefetch_rows_in(const void* found, uint32_t key_hash, const void* bucket, uint32_t* rows, uint32_t max,
                            const void** more = nullptr) const;

  LdmStats stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace fjord::engine
