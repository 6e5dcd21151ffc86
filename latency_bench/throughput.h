// NDB's flexAsynch in spirit: definer threads prepare key operations
// and hand them to executor threads through bounded single-producer/
// single-consumer queues (one per definer-executor pair, as NDB's job
// buffers); each executor owns one api::Session (a Connection of its own
// API node id, or one of many sessions of one API node's ClusterConnection) and
// keeps up to `in_flight` transactions outstanding with execute_async() and
// poll(), each transaction carrying up to `batch` operations from its queues.
//
//   closed loop (rate 0)   definers fill the queues as fast as executors drain them; a latency
//                          is execute_async() to completion
//   open loop (rate N/s)   definer d schedules its k-th operation at start + k / (N / definers);
//                          a latency is its scheduled time to completion, so time spent waiting
//                          in a queue or for a free transaction counts (no coordinated omission)
//
// Operations complete in the measured window [start + warmup, start + warmup
// + duration] are counted; the rest are discarded. Reads read every column,
// updates rewrite the filler; keys are uniform over the table.
//
// Threads: run_throughput() starts them (pinned to one CPU when asked), the
// caller's thread waits and draws progress; each Session is used only by
// its executor. The loops allocate nothing per operation: requests travel by
// value through preallocated rings, transactions come from the API's free
// list, callbacks capture a pointer and an index.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "access_table.h"
#include "fjord/api/api.h"
#include "fjord/base/cache.h"
#include "fjord/base/histogram.h"
#include "fjord/base/spsc_queue.h"
#include "machine.h"
#include "progress.h"

namespace fjord::bench {

// One key operation on its way from a definer to an executor.
struct KeyRequest {
  uint64_t id = 0;            // the row
  uint64_t scheduled_ns = 0;  // open loop: when it was due to be sent
  bool update = false;
};

// A bounded single-producer/single-consumer queue of KeyRequests
// (fjord/base/spsc_queue.h), with a sleep for a producer that finds it full.
// push() and wait_for_room() only from the producer thread, pop() only from
// the consumer; wake() from anyone.
class RequestRing {
 public:
  explicit RequestRing(uint32_t capacity_pow2) : queue_(capacity_pow2) {}
  bool push(const KeyRequest& request) noexcept { return queue_.push(request); }  // false when full
  bool pop(KeyRequest& request) noexcept {                                        // false when empty
    if (!queue_.pop(request)) return false;
    // W: a producer asleep on the full ring is woken once half of it is free
    // (the tail read afresh: the consumer's cached one may be far behind, and
    // a wake-up per pop would follow). Relaxed: a wake-up missed here costs
    // the producer its timeout, no more.
    if (producer_waiting_.load(std::memory_order_relaxed) != 0 && queue_.size_hint() <= queue_.capacity() / 2) wake();
    return true;
  }
  // The producer, having found the ring full: sleeps until the consumer
  // has taken half of it (pop wakes it then), wake() is called, or
  // `timeout_ns` passed (the bound if a wake-up is missed: the consumer
  // looks at the flag without a fence, so one can be).
  void wait_for_room(uint64_t timeout_ns) noexcept;
  void wake() noexcept;

 private:
  SpscQueue<KeyRequest> queue_;
  // 1 while the producer sleeps in wait_for_room (a futex word). Its own
  // line: the consumer reads it on every pop, the producer writes it
  // only when the ring is full.
  alignas(kCacheLineBytes) std::atomic<uint32_t> producer_waiting_{0};
};

struct ThroughputPlan {
  uint32_t definers = 1;
  uint32_t executors = 1;
  uint32_t in_flight = 64;  // transactions per executor
  uint32_t batch = 1;       // operations per transaction
  uint32_t read_percent = 100;
  uint64_t rate_per_s = 0;  // 0: closed loop
  uint64_t duration_ns = 5'000'000'000ULL;
  uint64_t warmup_ns = 500'000'000ULL;
  uint64_t rows = 100'000;
  uint32_t row_bytes = 100;
  int cpu = -1;  // pin every definer and executor here; -1: not pinned
  bool busy_poll = true;
  uint32_t queue_capacity = 4096;  // per definer-executor ring, a power of two
  uint64_t seed = 0x5eed;
};

struct ExecutorResult {
  NodeId api_node = kNoNode;
  uint64_t transactions = 0;  // completed in the window
  uint64_t operations = 0;
  uint64_t reads = 0;
  uint64_t updates = 0;
  uint64_t failures = 0;  // operations whose transaction failed (in the window)
  std::string first_failure;
  Histogram latency_ns;  // per operation
  CpuUsage usage;
  bool short_slice = false;  // the kernel took the request for short time slices
};

struct ThroughputResult {
  Status status;  // a thread that could not run at all
  uint64_t window_ns = 0;
  std::vector<ExecutorResult> executors;
  Histogram latency_ns;  // all executors
  uint64_t transactions = 0, operations = 0, reads = 0, updates = 0, failures = 0;
  uint64_t definer_full_waits = 0;  // times a definer found its queue full
  Histogram definer_late_ns;        // open loop: how far behind schedule definers queued each operation
  double transactions_per_s() const;
  double operations_per_s() const;
};

// Runs the plan over the executors' sessions (one per executor) on the
// table each of them describes.
ThroughputResult run_throughput(const std::vector<api::Session*>& sessions, const std::vector<AccessTable>& tables,
                                const ThroughputPlan& plan, Progress& progress);
// The same over a Connection (its own API node id) per executor.
ThroughputResult run_throughput(std::vector<std::unique_ptr<api::Connection>>& connections,
                                const std::vector<AccessTable>& tables, const ThroughputPlan& plan, Progress& progress);

}  // namespace fjord::bench
