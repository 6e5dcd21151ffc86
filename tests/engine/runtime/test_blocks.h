// Blocks and helpers for runtime tests.
#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include "fjord/engine/runtime/runtime.h"

namespace fjord::engine::test {

// A block whose behaviour is a lambda.
class LambdaBlock final : public Block {
 public:
  using Fn = std::function<void(const Signal&, BlockContext&)>;
  LambdaBlock(BlockNumber number, uint16_t instance, std::string name, Fn fn, bool node_events = false)
      : Block(number, instance, std::move(name)), fn_(std::move(fn)), node_events_(node_events) {}
  void execute(const Signal& s, BlockContext& c) override { fn_(s, c); }
  bool wants_node_events() const override { return node_events_; }

 private:
  Fn fn_;
  bool node_events_;
};

inline ThreadSpec plan(ThreadType type, uint32_t instance, uint32_t spintime_us = 0) {
  ThreadSpec p;
  p.type = type;
  p.instance = instance;
  p.spintime_us = spintime_us;
  return p;
}

inline RuntimeOptions options_with(std::vector<ThreadSpec> threads, NodeId self = 1, bool single = false) {
  RuntimeOptions o;
  o.self = self;
  o.single_threaded = single;
  o.threads = std::move(threads);
  o.job_buffer_bytes = 256 << 10;
  o.local_queue_bytes = 1 << 20;
  o.spill_bytes = 1 << 20;
  return o;
}

// Waits until pred() or the timeout; returns pred().
inline bool eventually(const std::function<bool()>& pred, int timeout_ms = 20000) {
  for (int i = 0; i < timeout_ms; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return pred();
}

}  // namespace fjord::engine::test
