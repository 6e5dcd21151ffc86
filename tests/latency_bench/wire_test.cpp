// latency_bench's wire protocol and drivers in one process: the responder on
// one thread, ping and stream on another, over every transporter the
// contract suite knows in this build; and the generated link configuration.
#include "wire.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "bench_link.h"
#include "builtin_transporters.h"
#include "fjord/base/clock.h"
#include "link_harness.h"
#include "ping.h"
#include "stream.h"

namespace fjord::bench {
namespace {

TEST(LatencyBenchWire, PackedMessagesReadBack) {
  MessagePacker packer(100, true);
  EXPECT_EQ(packer.frame_bytes(), message_frame_bytes(100, true));
  std::vector<std::byte> buffer(packer.frame_bytes());
  ASSERT_EQ(packer.pack(buffer, kStreamSignal, 0x1'0000'0007ULL), buffer.size());
  frame::SignalView view;
  ASSERT_EQ(frame::unpack_frame(buffer, view), frame::FrameError::kNone);
  Message m;
  ASSERT_TRUE(read_message(view, m));
  EXPECT_EQ(m.signal, kStreamSignal);
  EXPECT_EQ(m.seq, 0x1'0000'0007ULL);
  EXPECT_EQ(m.payload.size(), 100u);
  EXPECT_EQ(payload_seq(m.payload, 0), 0x1'0000'0007ULL);
}

TEST(LatencyBenchWire, PayloadLimits) {
  EXPECT_EQ(max_payload_bytes(false), 32728u);
  EXPECT_EQ(message_frame_bytes(32728, false), frame::kMaxFrameBytes);
  EXPECT_EQ(message_frame_bytes(32729, false), 0u);
  EXPECT_EQ(message_frame_bytes(max_payload_bytes(true), true) % frame::kFrameAlign, 0u);
  EXPECT_EQ(message_frame_bytes(max_payload_bytes(true) + 1, true), 0u);
  EXPECT_EQ(message_frame_bytes(64, false), 104u);
  EXPECT_EQ(payload_seq({}, 42), 42u);  // nothing to check in a short payload
}

class LatencyBenchOverLink : public ::testing::TestWithParam<test::Medium> {
 protected:
  void SetUp() override {
    transport::TransporterFactory* factory = test::test_registry().find(GetParam().type);
    if (Status s = factory->probe(); !s) GTEST_SKIP() << GetParam().type << ": " << s.message();
    auto pair = test::make_pair(GetParam());
    ASSERT_TRUE(pair) << pair.status().to_string();
    pair_ = std::move(pair).value();
  }

  // Runs the responder on its own thread for the duration of `driver`.
  Result<SessionSummary> with_responder(PollMode poll, const std::function<void(transport::Transporter&)>& driver) {
    Result<SessionSummary> session(Status(StatusCode::kInternal, "not run"));
    std::thread responder([&] { session = serve_session(*pair_.server, poll); });
    driver(*pair_.client);
    if (pair_.client->is_up()) {
      EXPECT_TRUE(send_control(*pair_.client, kByeSignal, {}, monotonic_ns() + 5'000'000'000));
    }
    responder.join();
    return session;
  }

  test::LinkPair pair_;
};

TEST_P(LatencyBenchOverLink, PingRecordsEveryRoundTripAfterTheWarmup) {
  for (PollMode poll : {PollMode::kBusy, PollMode::kSleep}) {
    Histogram rtt;
    Progress progress(false);
    auto session = with_responder(poll, [&](transport::Transporter& t) {
      const Status s = run_ping(t, PingParams{64, 300, 30, poll, 10'000'000'000ULL}, rtt, progress);
      EXPECT_TRUE(s) << s.to_string();
    });
    ASSERT_TRUE(session) << session.status().to_string();
    EXPECT_TRUE(session->said_bye);
    EXPECT_EQ(session->pings, 330u);
    EXPECT_EQ(rtt.count(), 300u);
    EXPECT_GT(rtt.min(), 0u);
  }
}

TEST_P(LatencyBenchOverLink, StreamIsCountedAndCheckedByTheResponder) {
  Result<StreamResult> result(Status(StatusCode::kInternal, "not run"));
  Progress progress(false);
  auto session = with_responder(PollMode::kBusy, [&](transport::Transporter& t) {
    result = run_stream(t, StreamParams{4096, 5000, 200, 16, PollMode::kBusy, 10'000'000'000ULL}, progress);
  });
  ASSERT_TRUE(result) << result.status().to_string();
  EXPECT_EQ(result->messages, 5000u);
  EXPECT_EQ(result->report.received, 5000u);
  EXPECT_EQ(result->report.bad, 0u);
  EXPECT_EQ(result->frame_bytes, message_frame_bytes(4096, pair_.client->config().checksum));
  EXPECT_GT(result->elapsed_ns, 0u);
  ASSERT_TRUE(session);
  EXPECT_EQ(session->stream_messages, 5200u);
}

TEST_P(LatencyBenchOverLink, ZeroBytePayloadsWork) {
  Histogram rtt;
  Progress progress(false);
  auto session = with_responder(PollMode::kBusy, [&](transport::Transporter& t) {
    EXPECT_TRUE(run_ping(t, PingParams{0, 50, 5, PollMode::kBusy, 10'000'000'000ULL}, rtt, progress));
    EXPECT_TRUE(run_stream(t, StreamParams{0, 500, 0, 8, PollMode::kBusy, 10'000'000'000ULL}, progress));
  });
  ASSERT_TRUE(session);
  EXPECT_EQ(rtt.count(), 50u);
}

TEST_P(LatencyBenchOverLink, AForeignSignalEndsTheSessionWithAProtocolError) {
  auto session = with_responder(PollMode::kBusy, [&](transport::Transporter& t) {
    EXPECT_TRUE(send_control(t, 4242, {}, monotonic_ns() + 5'000'000'000ULL));
  });
  ASSERT_FALSE(session);
  EXPECT_EQ(session.status().code(), StatusCode::kProtocolError);
  EXPECT_EQ(session.status().message(), "unexpected signal 4242 from the driver");
}

TEST_P(LatencyBenchOverLink, ADriverThatGoesAwayEndsTheSession) {
  Result<SessionSummary> session(Status(StatusCode::kInternal, "not run"));
  std::thread responder([&] { session = serve_session(*pair_.server, PollMode::kSleep); });
  pair_.client->close("test");
  responder.join();
  ASSERT_TRUE(session) << session.status().to_string();
  EXPECT_FALSE(session->said_bye);
}

INSTANTIATE_TEST_SUITE_P(Media, LatencyBenchOverLink, ::testing::ValuesIn(test::contract_media()),
                         [](const ::testing::TestParamInfo<test::Medium>& medium) { return medium.param.name(); });

// A factory whose parameters include an endpoint key, for the generator.
class EndpointFactory final : public transport::TransporterFactory {
 public:
  std::string_view name() const override { return "tcp"; }
  std::string_view description() const override { return "test"; }
  std::span<const config::ParamSpec> parameters() const override { return params_; }
  Result<std::unique_ptr<transport::Listener>> listen(NodeId, const transport::LinkTable&) override {
    return Status(StatusCode::kUnavailable, "test");
  }
  Result<std::unique_ptr<transport::Transporter>> connect(NodeId, const transport::LinkConfig&, DeadlineNs) override {
    return Status(StatusCode::kUnavailable, "test");
  }

 private:
  config::ParamSpec params_[1] = {{"ShmKey", config::Kind::kUint, 0, UINT64_MAX, "0", false, "test"}};
};

std::string value_of(const std::string& text, const std::string& key) {
  const std::size_t at = text.find("\n" + key + "=");
  if (at == std::string::npos) return "";
  const std::size_t start = at + key.size() + 2;
  return text.substr(start, text.find('\n', start) - start);
}

TEST(LatencyBenchLink, GeneratedSectionNamesBothNodesAndAFreshEndpoint) {
  EndpointFactory factory;
  const std::string a = generate_link_config(factory, LinkHosts{}, {});
  const std::string b = generate_link_config(factory, LinkHosts{}, {});
  EXPECT_NE(a.find("\n[tcp]\nNodeId1=1\nNodeId2=2\nNodeIdServer=1\nHostName1=127.0.0.1\nHostName2=127.0.0.1\n"
                   "PortNumber=0\n"),
            std::string::npos)
      << a;
  EXPECT_FALSE(value_of(a, "ShmKey").empty());
  EXPECT_NE(value_of(a, "ShmKey"), value_of(b, "ShmKey"));  // parallel runs never share an endpoint
  const std::string fixed = generate_link_config(factory, LinkHosts{"0.0.0.0", "client", 12000}, {});
  EXPECT_EQ(value_of(fixed, "ShmKey"), "12000");  // both sides of --server/--client agree
  EXPECT_EQ(value_of(fixed, "HostName2"), "client");
}

TEST(LatencyBenchLink, LinkParamsReplaceGeneratedKeys) {
  EndpointFactory factory;
  const std::vector<std::string> params = {"PortNumber=5000", "shmkey=9", "Checksum=1"};
  const std::string text = generate_link_config(factory, LinkHosts{}, params);
  EXPECT_EQ(value_of(text, "PortNumber"), "5000");
  EXPECT_EQ(value_of(text, "shmkey"), "9");
  EXPECT_EQ(value_of(text, "ShmKey"), "");
  EXPECT_EQ(text.find("PortNumber=0"), std::string::npos);
  EXPECT_EQ(value_of(text, "Checksum"), "1");
}

TEST(LatencyBenchLink, GeneratedLinksLoad) {
  auto& registry = tools::builtin_registry();
  auto choice = generated_link(registry, "tcp", LinkHosts{}, std::vector<std::string>{"Checksum=1"});
  ASSERT_TRUE(choice) << choice.status().to_string();
  EXPECT_EQ(choice->link.type, "tcp");
  EXPECT_EQ(choice->link.server_node, 1);
  EXPECT_TRUE(choice->link.checksum);
  EXPECT_TRUE(choice->config_path.empty());
  auto bad = generated_link(registry, "tcp", LinkHosts{}, std::vector<std::string>{"Bogus=1"});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().message().rfind("the generated link section (with --link-param) is not valid: ", 0), 0u)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("Bogus"), std::string::npos);
}

TEST(LatencyBenchLink, ConfigFileSectionChoosesTheTransporter) {
  const std::string path = ::testing::TempDir() + "latency_bench_link_" + std::to_string(::getpid()) + ".ini";
  std::ofstream(path) << "[ndbd]\nNodeId=1\n\n[tcp]\nNodeId1=1\nNodeId2=2\nHostName1=127.0.0.1\n"
                         "HostName2=127.0.0.1\nPortNumber=0\n";
  auto choice = link_from_file(tools::builtin_registry(), path, "");
  ASSERT_TRUE(choice) << choice.status().to_string();
  EXPECT_EQ(choice->link.type, "tcp");
  EXPECT_EQ(choice->config_path, path);
  auto wrong = link_from_file(tools::builtin_registry(), path, "shm");
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.status().message(), path + ": no [shm] link section in it");
  std::ofstream(path) << "[ndbd]\nNodeId=1\n";
  auto none = link_from_file(tools::builtin_registry(), path, "");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.status().message(), path + ": no link section ([tcp], [shm], ...) in it");
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace fjord::bench
