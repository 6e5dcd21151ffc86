// The API against a data node that breaks the protocol. A stand-in node (this
// test, over a real TCP link) registers the API node properly and then
// answers its transaction with a signal that is not what the protocol says:
// the transaction fails at once with a protocol error naming the signal and
// what was wrong, not at its request timeout, and the API node goes on.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <ostream>
#include <thread>

#include "builtin_transporters.h"
#include "fjord/api/api.h"
#include "fjord/base/clock.h"
#include "fjord/engine/cluster_config.h"
#include "fjord/engine/protocol.h"
#include "fjord/transport/config_file.h"
#include "fjord/transport/frame.h"
#include "node_cluster.h"

namespace fjord::test {
namespace {

using engine::Signal;
namespace gsn = engine::protocol::gsn;
namespace protocol = engine::protocol;

constexpr uint64_t kSecond = 1'000'000'000ULL;

// What the stand-in answers to a key request (a TcKeyReq or a TcKeyTrain,
// decoded as `req`): the words and section of one signal.
struct Answer {
  uint16_t number = 0;
  std::vector<uint32_t> words;
  std::vector<std::byte> section;
};
using Answerer = std::function<Answer(const protocol::TcKeyReq& req)>;

class StandInNode {
 public:
  StandInNode(const std::string& config, Answerer answer) : answer_(std::move(answer)) {
    auto file = config::parse_text(config, "<stand-in>");
    EXPECT_TRUE(file) << file.status().to_string();
    auto cluster = engine::load_cluster_config(*file, tools::builtin_registry());
    EXPECT_TRUE(cluster) << cluster.status().to_string();
    cluster_ = std::move(cluster).value();
    auto listener = tools::builtin_registry().find("tcp")->listen(1, cluster_.links);
    EXPECT_TRUE(listener) << listener.status().to_string();
    listener_ = std::move(listener).value();
    thread_ = std::thread([this] { serve(); });
  }
  ~StandInNode() {
    stop_ = true;
    thread_.join();
  }

 private:
  void serve() {
    if (!listener_) return;  // the constructor said why
    std::unique_ptr<transport::Transporter> link;
    while (!stop_ && !link) {
      auto t = listener_->accept(monotonic_ns() + kSecond / 10);
      if (t) link = std::move(t).value();
    }
    while (!stop_ && link && link->is_up()) {
      const transport::ReceiveBatch batch = link->receive();
      frame::FrameCursor cursor(batch.bytes);
      Signal s;
      s.sender_node = 50;
      while (cursor.next(s.view)) {
        if (s.number() == gsn::kApiRegReq) {
          send(*link, {gsn::kApiRegConf, {s.word(0), 1, 1, 8}, {}});
        } else if (s.number() == gsn::kTcKeyReq) {
          protocol::TcKeyReq req;
          if (protocol::decode_tc_key_req(s, req)) send(*link, answer_(req));
        } else if (s.number() == gsn::kTcKeyTrain) {
          protocol::TcKeyTrainCursor train(s);
          protocol::TcKeyReq req;
          if (train.next(req)) send(*link, answer_(req));
        }
      }
      if (!batch.bytes.empty()) link->release(batch.bytes.size());
    }
  }
  static void send(transport::Transporter& link, const Answer& a) {
    const std::span<const std::byte> sections[1] = {a.section};
    const std::span<std::byte> space = link.reserve(frame::kMaxFrameBytes);
    ASSERT_FALSE(space.empty());
    const std::size_t n = frame::pack_frame(space, {a.number, {1, 0}, {1, 0}, 0}, a.words,
                                            std::span(sections, a.section.empty() ? 0 : 1), false);
    ASSERT_GT(n, 0u);
    link.commit(n, 1);
    while (link.flush() == transport::FlushStatus::kPending) std::this_thread::yield();
  }

  Answerer answer_;
  engine::ClusterConfig cluster_;
  std::unique_ptr<transport::Listener> listener_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

engine::TableDef one_key_table() {
  engine::TableDef t;
  t.name = "t";
  t.table_id = 1;
  t.version = 1;
  t.partitions = 8;
  t.columns = {{"id", engine::ColumnType::kUint64, 0, false}, {"v", engine::ColumnType::kUint64, 0, false}};
  t.primary_key = {0};
  return t;
}

struct Case {
  const char* name;
  Answerer answer;
  const char* expected;  // in the transaction's error
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class ApiProtocolTest : public ::testing::TestWithParam<Case> {};

TEST_P(ApiProtocolTest, AnAnswerThatBreaksTheProtocolFailsTheTransactionAtOnceAndSaysWhy) {
  const Case& c = GetParam();
  const uint16_t port = free_tcp_port();
  const std::string config = "[ndbd]\nNodeId=1\nHostName=127.0.0.1\nServerPort=" + std::to_string(port) +
                             "\n[api]\nNodeId=50\nHostName=127.0.0.1\n";
  StandInNode node(config, c.answer);
  api::ConnectOptions o;
  o.config_text = config;
  o.node_id = 50;
  o.registry = &tools::builtin_registry();
  o.request_timeout_ms = 20000;
  auto conn = api::Connection::connect(o);
  ASSERT_TRUE(conn) << conn.status().to_string();
  const engine::TableDef table = one_key_table();
  for (int round = 0; round < 2; ++round) {  // the API node goes on after the first
    const uint64_t t0 = monotonic_ns();
    api::Transaction& tx = (*conn)->start_transaction();
    tx.read(table, api::Row().set(0, uint64_t{7}));
    const Status s = tx.execute(api::ExecType::kCommit);
    tx.close();
    EXPECT_EQ(s.code(), StatusCode::kProtocolError) << s.to_string();
    EXPECT_NE(s.message().find(c.expected), std::string::npos) << s.message();
    EXPECT_LT(monotonic_ns() - t0, 5 * kSecond) << "the transaction waited for its timeout";
  }
}

// Answers whose shape is wrong, or that name an operation the batch lacks.
const Case kCases[] = {
    {"TcKeyConfOfTwoWords",
     [](const protocol::TcKeyReq& r) {
       return Answer{gsn::kTcKeyConf, {r.api_conn, 0}, {}};
     },
     "malformed signal 201 from data node 1"},
    {"KeyDataForAnOperationTheBatchLacks",
     [](const protocol::TcKeyReq& r) {
       Answer a;
       a.number = gsn::kKeyDataConf;
       a.words = {r.api_conn, r.tx.hi(), r.tx.lo(), 9, 1, 1};  // op 9 of a batch of one
       return a;
     },
     "values for operation 9 of a batch of 1"},
    {"KeyDataTrainOfBadFraming",
     [](const protocol::TcKeyReq& r) {
       Answer a;
       a.number = gsn::kKeyDataTrain;
       a.words = {r.api_conn, r.tx.hi(), r.tx.lo(), 1, 1, 1, 1};
       a.section.assign(12, std::byte{0});  // a record header claiming 0 bytes, then 4 stray bytes
       return a;
     },
     "malformed signal 212 from data node 1"},
    {"TcAbortRepWithAnUnknownErrorCode",
     [](const protocol::TcKeyReq& r) {
       return Answer{gsn::kTcAbortRep, {r.api_conn, r.tx.hi(), r.tx.lo(), 12345}, {}};
     },
     "malformed signal 205 from data node 1"},
};

INSTANTIATE_TEST_SUITE_P(Answers, ApiProtocolTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& param_info) {
                           return std::string(param_info.param.name);
                         });

}  // namespace
}  // namespace fjord::test
