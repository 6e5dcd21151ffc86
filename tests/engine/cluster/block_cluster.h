// A cluster of blocks in one Runtime, without transport: DICT on the main
// thread, a real TC, two LDM instances, and an API double that relays what
// the test injects (so that answers come back to it) and captures the rest
// in an Inbox. Tests of the TC and LDM contract drive it; the test thread
// calls everything here, the blocks run on the runtime's threads.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "fjord/engine/blocks/ldm.h"
#include "fjord/engine/blocks/tc.h"
#include "fjord/engine/protocol.h"
#include "fjord/engine/runtime/runtime.h"
#include "fjord/engine/storage/page_pool.h"
#include "signal_capture.h"

namespace fjord::engine::test {

// Where TC runs: on a thread of its own, or on LDM 0's thread (TC then runs
// read-committed reads of LDM 0's partitions there directly, and sends
// everything else, and all of LDM 1's, as signals).
enum class Layout { kSeparate, kTcWithLdm0 };

class BlockCluster {
 public:
  static constexpr NodeId kSelf = 1;
  static constexpr uint16_t kLdmInstances = 2;

  // `tc_timer_ms`: TC's timer period; `max_operations`: TC's and each LDM's
  // MaxNoOfConcurrentOperations; `inactive_timeout_ms`: TC's
  // TransactionInactiveTimeout (0 = none); `max_scans`: TC's
  // MaxNoOfConcurrentScans.
  explicit BlockCluster(Layout layout = Layout::kSeparate, uint32_t tc_timer_ms = 20, uint32_t max_operations = 32768,
                        uint32_t inactive_timeout_ms = 0, uint32_t max_scans = 256);
  ~BlockCluster();
  BlockCluster(const BlockCluster&) = delete;
  BlockCluster& operator=(const BlockCluster&) = delete;

  // Sends `out` to `block` (instance `instance`) from the API double.
  void send(BlockNumber block, const protocol::SignalOut& out, uint16_t instance = 0);
  // What the blocks sent to the API double.
  Inbox& inbox() { return inbox_; }
  // LDM 0 runs nothing from when this returns until resume_ldm0() (or 10 s).
  void stall_ldm0();
  void resume_ldm0() { stalled_ = false; }
  const LdmBlock& ldm(uint16_t instance) const { return *ldm_[instance]; }
  // Read once the cluster is quiet (the test has its answers).
  const TcBlock& tc() const { return *tc_; }
  // Signals the thread named ("ldm 0") has executed, once it is quiet: a
  // thread counts a batch's signals after it ran them (and sent answers).
  uint64_t signals_on(const std::string& thread_name) const;

  // Creates `t` through DICT (installed in TC and both LDMs) and returns it
  // as DICT made it (ids assigned).
  TableDef create(const TableDef& t);
  void drop(const std::string& name);

 private:
  void add_blocks(Layout layout, const TcOptions& tc, uint32_t max_operations);
  void relay(const Signal& s, BlockContext& c);
  // The staller's signal: holds its thread until resume_ldm0().
  void hold();

  static constexpr uint16_t kRelay = runtime_signals::kFirstUser + 50;  // test -> API double: forward
  static constexpr BlockNumber kStaller = block_numbers::kFirstTest;
  static constexpr uint16_t kStall = runtime_signals::kFirstUser;
  static constexpr uint64_t kStallNsMax = 10'000'000'000;
  static constexpr std::chrono::milliseconds kStallPoll{1};

  std::unique_ptr<storage::PagePool> pool_;
  std::unique_ptr<Runtime> rt_;
  std::atomic<bool> stalled_{false};  // set and cleared by the test, read by the staller
  std::atomic<bool> holding_{false};  // the staller holds LDM 0's thread
  Inbox inbox_;
  LdmBlock* ldm_[kLdmInstances] = {};
  TcBlock* tc_ = nullptr;
};

}  // namespace fjord::engine::test
