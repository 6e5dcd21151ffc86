#include "block_cluster.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "../runtime/test_blocks.h"
#include "fjord/base/clock.h"
#include "fjord/engine/blocks/dict.h"

namespace fjord::engine::test {

using namespace protocol;

BlockCluster::BlockCluster(Layout layout, uint32_t tc_timer_ms, uint32_t max_operations, uint32_t inactive_timeout_ms,
                           uint32_t max_scans) {
  auto pool = storage::PagePool::create({32 << 20});
  EXPECT_TRUE(pool);
  pool_ = std::move(pool).value();
  // Up to four busy threads (200 us spin) and the test's on two cores.
  std::vector<ThreadSpec> threads = {plan(ThreadType::kMain, 0, 200), plan(ThreadType::kLdm, 0, 200),
                                     plan(ThreadType::kLdm, 1, 200)};
  if (layout == Layout::kSeparate) threads.push_back(plan(ThreadType::kTc, 0, 200));
  auto rt = Runtime::create(options_with(threads));
  EXPECT_TRUE(rt);
  rt_ = std::move(rt).value();
  TcOptions tc;
  tc.ldm_instances = kLdmInstances;
  tc.deadlock_timeout_ms = 300;
  tc.timer_period_ms = tc_timer_ms;
  tc.max_operations = max_operations;
  tc.inactive_timeout_ms = inactive_timeout_ms;
  tc.max_scans = max_scans;
  add_blocks(layout, tc, max_operations);
  EXPECT_TRUE(rt_->start());
}

void BlockCluster::add_blocks(Layout layout, const TcOptions& tc, uint32_t max_operations) {
  auto tc_block = std::make_unique<TcBlock>(tc);
  tc_ = tc_block.get();
  EXPECT_TRUE(rt_->add_block(std::move(tc_block), layout == Layout::kSeparate ? ThreadType::kTc : ThreadType::kLdm, 0));
  EXPECT_TRUE(rt_->add_block(std::make_unique<DictBlock>(1, kLdmInstances, 4), ThreadType::kMain, 0));
  for (uint16_t i = 0; i < kLdmInstances; ++i) {
    LdmOptions o;
    o.instance = i;
    o.ldm_instances = kLdmInstances;
    o.max_operations = max_operations;
    auto ldm = std::make_unique<LdmBlock>(*pool_, o);
    ldm_[i] = ldm.get();
    EXPECT_TRUE(rt_->add_block(std::move(ldm), ThreadType::kLdm, i));
  }
  EXPECT_TRUE(rt_->add_block(std::make_unique<LambdaBlock>(block_numbers::kApi, 0, "API-DOUBLE",
                                                           [this](const Signal& s, BlockContext& c) {
                                                             if (s.number() != kRelay) return inbox_.push(capture(s));
                                                             relay(s, c);
                                                           }),
                             ThreadType::kMain, 0));
  // Holds LDM 0's thread while stalled_ (stall_ldm0): a slow node.
  EXPECT_TRUE(rt_->add_block(
      std::make_unique<LambdaBlock>(kStaller, 0, "STALLER", [this](const Signal&, BlockContext&) { hold(); }),
      ThreadType::kLdm, 0));
}

BlockCluster::~BlockCluster() {
  stalled_ = false;
  rt_->stop();
}

void BlockCluster::send(BlockNumber block, const SignalOut& out, uint16_t instance) {
  std::vector<uint32_t> words = {block, instance, out.number};
  words.insert(words.end(), out.words, out.words + out.word_count);
  ASSERT_TRUE(rt_->inject({kSelf, {block_numbers::kApi, 0}}, kRelay, words, out.section_list()).is_ok());
}

void BlockCluster::stall_ldm0() {
  stalled_ = true;
  ASSERT_TRUE(rt_->inject({kSelf, {kStaller, 0}}, kStall, {}).is_ok());
  while (!holding_) std::this_thread::sleep_for(kStallPoll);
}

uint64_t BlockCluster::signals_on(const std::string& thread_name) const {
  const auto read = [&] {
    for (const ThreadStats& t : rt_->thread_stats())
      if (t.name == thread_name) return t.signals;
    ADD_FAILURE() << "no thread " << thread_name;
    return uint64_t{0};
  };
  for (uint64_t last = read();;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const uint64_t now = read();
    if (now == last) return now;
    last = now;
  }
}

TableDef BlockCluster::create(const TableDef& t) {
  send(block_numbers::kDict, encode(SchemaMessage{gsn::kCreateTableReq, 1, encode_table(t)}));
  const Captured c = inbox_.take([](const Captured& x) { return x.number() == gsn::kCreateTableConf; });
  return decode_table(decode_schema_message(c.signal())->payload).value();
}

void BlockCluster::drop(const std::string& name) {
  send(block_numbers::kDict, encode(SchemaMessage{gsn::kDropTableReq, 2, std::as_bytes(std::span(name))}));
  (void)inbox_.take([](const Captured& x) { return x.number() == gsn::kDropTableConf; });
}

// The relayed words are: block, instance, signal number, then the signal's own.
void BlockCluster::relay(const Signal& s, BlockContext& c) {
  std::vector<uint32_t> words;
  for (std::size_t i = 3; i < s.word_count(); ++i) words.push_back(s.word(i));
  std::span<const std::byte> sections[frame::kMaxSections];
  for (std::size_t i = 0; i < s.section_count(); ++i) sections[i] = s.section(i);
  c.send({kSelf, {static_cast<BlockNumber>(s.word(0)), static_cast<uint16_t>(s.word(1))}},
         static_cast<uint16_t>(s.word(2)), words, {sections, s.section_count()});
}

void BlockCluster::hold() {
  holding_ = true;
  const uint64_t until = monotonic_ns() + kStallNsMax;
  while (stalled_ && monotonic_ns() < until) std::this_thread::sleep_for(kStallPoll);
  holding_ = false;
}

}  // namespace fjord::engine::test
