// The TLS record layer of a TCP link's data path (transport/tcp/src/
// tls_records.h): records split anywhere by the network, many writes'
// worth in one record, data larger than a record read through small spans,
// a partial send retried, and what ends a stream (an altered record, an
// alert, close_notify, an oversized or unprotected record, a peer gone
// mid-record), each with its reason. Last, the records are TLS 1.3's own:
// OpenSSL's record layer on the other end reads and writes them.
#include "tls_records.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <thread>
#include <vector>

#include "fjord/base/clock.h"
#include "fjord/base/fd.h"
#include "tls_client_hello.h"
#include "tls_directory.h"
#include "tls_session.h"

namespace fjord::tcp {
namespace {

constexpr uint64_t kSecond = 1'000'000'000ULL;

struct SocketPair {
  UniqueFd writer;
  UniqueFd reader;
};

SocketPair socket_pair() {
  int fds[2] = {-1, -1};
  FJORD_ASSERT(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

TlsTrafficKeys test_keys() {
  std::vector<uint8_t> secret(32);
  for (std::size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<uint8_t>(0x40 + i);
  auto keys = derive_traffic_keys(TlsSuite::kAes128GcmSha256, secret);
  FJORD_ASSERT(keys.is_ok());
  return *keys;
}

std::vector<std::byte> pattern(std::size_t bytes, uint8_t seed) {
  std::vector<std::byte> out(bytes);
  for (std::size_t i = 0; i < bytes; ++i) out[i] = static_cast<std::byte>((i * 31 + seed) & 0xff);
  return out;
}

void put(int fd, std::span<const std::byte> bytes) {
  ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

// What a sender starting at sequence 0 puts on the wire for `writes`.
std::vector<std::byte> sealed_wire(const std::vector<std::vector<std::byte>>& writes) {
  SocketPair pair = socket_pair();
  TlsRecordSender sender;
  FJORD_ASSERT(sender.start(test_keys()).is_ok());
  for (const auto& w : writes) {
    const TlsIo io = sender.write(pair.writer.get(), w);
    FJORD_ASSERT(io.state == TlsIoState::kOk);
    FJORD_ASSERT(io.bytes == w.size());
  }
  std::vector<std::byte> wire(1 << 20);
  const ssize_t n = ::recv(pair.reader.get(), wire.data(), wire.size(), MSG_DONTWAIT);
  FJORD_ASSERT(n > 0);
  wire.resize(static_cast<std::size_t>(n));
  return wire;
}

// Reads everything the receiver can give now into `out`; the last state.
TlsIoState drain(TlsRecordReceiver& receiver, int fd, std::vector<std::byte>& out, std::size_t span_bytes = 65536) {
  std::vector<std::byte> buffer(span_bytes);
  for (;;) {
    const TlsIo io = receiver.read(fd, buffer);
    if (io.state != TlsIoState::kOk) return io.state;
    out.insert(out.end(), buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(io.bytes));
    if (!receiver.holds_data()) return TlsIoState::kOk;
  }
}

TEST(TlsRecordsTest, RecordsSplitAtEveryByteBoundaryComeOutWhole) {
  const std::vector<std::vector<std::byte>> writes = {pattern(100, 1), pattern(57, 2)};
  const std::vector<std::byte> wire = sealed_wire(writes);
  std::vector<std::byte> expected = writes[0];
  expected.insert(expected.end(), writes[1].begin(), writes[1].end());
  ASSERT_EQ(wire.size(), expected.size() + 2 * (kTlsRecordHeaderBytes + 1 + kTlsTagBytes));
  for (std::size_t split = 1; split < wire.size(); ++split) {
    SocketPair pair = socket_pair();
    TlsRecordReceiver receiver;
    ASSERT_TRUE(receiver.start(test_keys(), {}).is_ok());
    std::vector<std::byte> got;
    put(pair.writer.get(), std::span(wire).first(split));
    const TlsIoState first = drain(receiver, pair.reader.get(), got);
    ASSERT_TRUE(first == TlsIoState::kOk || first == TlsIoState::kWouldBlock) << "split at " << split;
    EXPECT_FALSE(receiver.holds_data()) << "split at " << split;
    put(pair.writer.get(), std::span(wire).subspan(split));
    for (int polls = 0; polls < 4 && got.size() < expected.size(); ++polls)
      ASSERT_NE(drain(receiver, pair.reader.get(), got), TlsIoState::kFailed) << receiver.error();
    ASSERT_EQ(got, expected) << "split at " << split;
  }
}

TEST(TlsRecordsTest, ManyFramesOfOneWriteTravelInOneRecord) {
  std::vector<std::byte> batch;
  for (uint8_t frame = 0; frame < 64; ++frame) {
    const std::vector<std::byte> one = pattern(40 + frame, frame);
    batch.insert(batch.end(), one.begin(), one.end());
  }
  const std::vector<std::byte> wire = sealed_wire({batch});
  EXPECT_EQ(wire.size(), kTlsRecordHeaderBytes + batch.size() + 1 + kTlsTagBytes) << "one record";
  SocketPair pair = socket_pair();
  TlsRecordReceiver receiver;
  ASSERT_TRUE(receiver.start(test_keys(), {}).is_ok());
  put(pair.writer.get(), wire);
  std::vector<std::byte> into(batch.size() + 1000);
  const TlsIo io = receiver.read(pair.reader.get(), into);
  ASSERT_EQ(io.state, TlsIoState::kOk) << receiver.error();
  ASSERT_EQ(io.bytes, batch.size());
  EXPECT_TRUE(std::equal(batch.begin(), batch.end(), into.begin()));
  EXPECT_FALSE(receiver.holds_data());
}

// More than one record's worth, read through spans smaller than a record:
// the rest of a record waits inside the receiver, and holds_data() says so.
TEST(TlsRecordsTest, DataLargerThanARecordReadThroughSmallSpansArrivesWhole) {
  const std::vector<std::byte> big = pattern(40000, 9);
  SocketPair pair = socket_pair();
  TlsRecordSender sender;
  TlsRecordReceiver receiver;
  ASSERT_TRUE(sender.start(test_keys()).is_ok());
  ASSERT_TRUE(receiver.start(test_keys(), {}).is_ok());
  const TlsIo sent = sender.write(pair.writer.get(), big);
  ASSERT_EQ(sent.state, TlsIoState::kOk) << sender.error();
  ASSERT_EQ(sent.bytes, big.size());
  std::vector<std::byte> got;
  std::vector<std::byte> span(1000);
  const DeadlineNs deadline = monotonic_ns() + 10 * kSecond;
  while (got.size() < big.size() && monotonic_ns() < deadline) {
    const TlsIo io = receiver.read(pair.reader.get(), span);
    ASSERT_NE(io.state, TlsIoState::kFailed) << receiver.error();
    got.insert(got.end(), span.begin(), span.begin() + static_cast<std::ptrdiff_t>(io.bytes));
    if (io.state == TlsIoState::kOk && got.size() % 16384 != 0 && got.size() < big.size()) {
      EXPECT_TRUE(receiver.holds_data()) << "mid-record at " << got.size();
    }
  }
  EXPECT_EQ(got, big);
  EXPECT_FALSE(receiver.holds_data());
}

// A socket that takes only part of the records: the rest waits in the
// sender, goes first on the retry, and the bytes arrive once, in order.
TEST(TlsRecordsTest, APartialSendIsFinishedByTheRetryWithTheSameBytes) {
  SocketPair pair = socket_pair();
  const int small = 4096;
  ASSERT_EQ(::setsockopt(pair.writer.get(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
  TlsRecordSender sender;
  TlsRecordReceiver receiver;
  ASSERT_TRUE(sender.start(test_keys()).is_ok());
  ASSERT_TRUE(receiver.start(test_keys(), {}).is_ok());
  const std::vector<std::byte> stream = pattern(300000, 5);
  std::size_t offset = 0;
  std::size_t retries = 0;
  std::vector<std::byte> got;
  const DeadlineNs deadline = monotonic_ns() + 20 * kSecond;
  while (got.size() < stream.size() && monotonic_ns() < deadline) {
    if (offset < stream.size()) {
      const TlsIo io = sender.write(pair.writer.get(), std::span(stream).subspan(offset));
      ASSERT_NE(io.state, TlsIoState::kFailed) << sender.error();
      if (io.state == TlsIoState::kWouldBlock) ++retries;
      offset += io.bytes;
    }
    ASSERT_NE(drain(receiver, pair.reader.get(), got), TlsIoState::kFailed) << receiver.error();
  }
  EXPECT_GT(retries, 0U) << "the socket never filled: the test did not cover a partial send";
  EXPECT_EQ(got, stream);
}

// Reads until the receiver says something other than kOk/kWouldBlock.
TlsIo read_to_end(TlsRecordReceiver& receiver, int fd, std::vector<std::byte>& got) {
  std::vector<std::byte> span(65536);
  for (int i = 0; i < 100; ++i) {
    const TlsIo io = receiver.read(fd, span);
    if (io.state == TlsIoState::kOk)
      got.insert(got.end(), span.begin(), span.begin() + static_cast<std::ptrdiff_t>(io.bytes));
    else if (io.state != TlsIoState::kWouldBlock)
      return io;
  }
  return {0, TlsIoState::kWouldBlock};
}

TEST(TlsRecordsTest, AnAlteredRecordEndsTheStreamNamingTheFailedTag) {
  std::vector<std::byte> wire = sealed_wire({pattern(200, 3)});
  wire[kTlsRecordHeaderBytes + 50] ^= std::byte{0x01};
  SocketPair pair = socket_pair();
  TlsRecordReceiver receiver;
  ASSERT_TRUE(receiver.start(test_keys(), {}).is_ok());
  put(pair.writer.get(), wire);
  std::vector<std::byte> got;
  EXPECT_EQ(read_to_end(receiver, pair.reader.get(), got).state, TlsIoState::kFailed);
  EXPECT_TRUE(got.empty());
  EXPECT_NE(receiver.error().find("failed authentication (bad record MAC)"), std::string::npos) << receiver.error();
}

TEST(TlsRecordsTest, DataBeforeAPeersAlertIsDeliveredThenTheAlertIsNamed) {
  SocketPair pair = socket_pair();
  TlsRecordSender sender;
  TlsRecordReceiver receiver;
  ASSERT_TRUE(sender.start(test_keys()).is_ok());
  ASSERT_TRUE(receiver.start(test_keys(), {}).is_ok());
  const std::vector<std::byte> data = pattern(300, 4);
  ASSERT_EQ(sender.write(pair.writer.get(), data).state, TlsIoState::kOk);
  ASSERT_EQ(sender.write_alert(pair.writer.get(), 2, 10).state, TlsIoState::kOk);
  std::vector<std::byte> got;
  EXPECT_EQ(read_to_end(receiver, pair.reader.get(), got).state, TlsIoState::kFailed);
  EXPECT_EQ(got, data);
  EXPECT_NE(receiver.error().find("TLS alert unexpected_message (10)"), std::string::npos) << receiver.error();
}

TEST(TlsRecordsTest, CloseNotifyIsAnOrderlyClose) {
  SocketPair pair = socket_pair();
  TlsRecordSender sender;
  TlsRecordReceiver receiver;
  ASSERT_TRUE(sender.start(test_keys()).is_ok());
  ASSERT_TRUE(receiver.start(test_keys(), {}).is_ok());
  ASSERT_EQ(sender.write_alert(pair.writer.get(), 1, 0).state, TlsIoState::kOk);
  std::vector<std::byte> got;
  EXPECT_EQ(read_to_end(receiver, pair.reader.get(), got).state, TlsIoState::kClosed);
  EXPECT_NE(receiver.error().find("close_notify"), std::string::npos) << receiver.error();
}

TEST(TlsRecordsTest, AnOversizedOrUnprotectedRecordIsRefusedByName) {
  struct Case {
    std::vector<uint8_t> header;
    const char* reason;
  };
  const Case cases[] = {
      {{23, 3, 3, 0x48, 0x00}, "18432 bytes, above the limit of 16640 (record overflow)"},
      {{22, 3, 3, 0x00, 0x20}, "a TLS record of type 22 after the handshake"},
      {{23, 3, 3, 0x00, 0x10}, "16 bytes, too short for its tag"},
  };
  for (const Case& c : cases) {
    SocketPair pair = socket_pair();
    TlsRecordReceiver receiver;
    ASSERT_TRUE(receiver.start(test_keys(), {}).is_ok());
    std::vector<std::byte> wire(c.header.size() + 64);
    std::memcpy(wire.data(), c.header.data(), c.header.size());
    put(pair.writer.get(), wire);
    std::vector<std::byte> got;
    EXPECT_EQ(read_to_end(receiver, pair.reader.get(), got).state, TlsIoState::kFailed) << c.reason;
    EXPECT_NE(receiver.error().find(c.reason), std::string::npos) << receiver.error();
  }
}

TEST(TlsRecordsTest, APeerGoneMidRecordIsAClosedStreamThatSaysSo) {
  const std::vector<std::byte> wire = sealed_wire({pattern(500, 6)});
  SocketPair pair = socket_pair();
  TlsRecordReceiver receiver;
  ASSERT_TRUE(receiver.start(test_keys(), {}).is_ok());
  put(pair.writer.get(), std::span(wire).first(200));
  pair.writer.reset();
  std::vector<std::byte> got;
  EXPECT_EQ(read_to_end(receiver, pair.reader.get(), got).state, TlsIoState::kClosed);
  EXPECT_TRUE(got.empty());
  EXPECT_NE(receiver.error().find("in the middle of a TLS record (200 bytes of it received)"), std::string::npos)
      << receiver.error();
}

// OpenSSL's own record layer as the server: it decrypts what the session
// sealed, and the session opens what it sealed, both ways across records.
TEST(TlsRecordsTest, OpenSslsRecordLayerReadsAndWritesTheSameRecords) {
  constexpr NodeId kNodes[] = {1, 2};
  test::TlsDirectory dir{kNodes};
  auto server_context = TlsContext::load(1, dir.path());
  auto client_context = TlsContext::load(2, dir.path());
  ASSERT_TRUE(server_context) << server_context.status().to_string();
  ASSERT_TRUE(client_context) << client_context.status().to_string();
  SocketPair pair = socket_pair();
  timeval timeout{10, 0};  // bounds the server's blocking calls
  ASSERT_EQ(::setsockopt(pair.reader.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout), 0);
  const std::vector<std::byte> up = pattern(50000, 7);
  const std::vector<std::byte> down = pattern(70000, 8);
  std::vector<std::byte> server_got(up.size());
  bool server_ok = false;
  std::thread server([&] {
    SSL* ssl = SSL_new((*server_context)->get());
    SSL_set_fd(ssl, pair.reader.get());
    std::size_t n = 0;
    server_ok = SSL_accept(ssl) == 1;
    for (std::size_t done = 0; server_ok && done < up.size(); done += n)
      server_ok = SSL_read_ex(ssl, server_got.data() + done, up.size() - done, &n) == 1;
    // The context allows partial writes: one record per call at least.
    for (std::size_t done = 0; server_ok && done < down.size(); done += n)
      server_ok = SSL_write_ex(ssl, down.data() + done, down.size() - done, &n) == 1;
    SSL_free(ssl);
  });
  auto session = TlsSession::connect(**client_context, pair.writer.get(), 1, monotonic_ns() + 10 * kSecond, "node 1");
  ASSERT_TRUE(session) << session.status().to_string();
  ASSERT_TRUE((*session)->send_all(up, monotonic_ns() + 10 * kSecond).is_ok());
  std::vector<std::byte> client_got(down.size());
  const Status received = (*session)->recv_exact(client_got, monotonic_ns() + 10 * kSecond);
  server.join();
  EXPECT_TRUE(received.is_ok()) << received.to_string();
  EXPECT_TRUE(server_ok);
  EXPECT_EQ(server_got, up);
  EXPECT_EQ(client_got, down);
}

// The other way round: OpenSSL as the client, sending its first records
// right behind its last handshake message, so the session's server takes
// them over from what the handshake read.
TEST(TlsRecordsTest, RecordsThatCameWithTheHandshakesEndAreNotLost) {
  constexpr NodeId kNodes[] = {1, 2};
  test::TlsDirectory dir{kNodes};
  auto server_context = TlsContext::load(1, dir.path());
  auto client_context = TlsContext::load(2, dir.path());
  ASSERT_TRUE(server_context) << server_context.status().to_string();
  ASSERT_TRUE(client_context) << client_context.status().to_string();
  SocketPair pair = socket_pair();
  timeval timeout{10, 0};  // bounds the client's blocking calls
  ASSERT_EQ(::setsockopt(pair.writer.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout), 0);
  const std::vector<std::byte> up = pattern(3000, 10);
  const std::vector<std::byte> down = pattern(20000, 11);
  std::vector<std::byte> client_got(down.size());
  bool client_ok = false;
  std::thread client([&] {
    SSL* ssl = SSL_new((*client_context)->get());
    SSL_set_fd(ssl, pair.writer.get());
    std::size_t n = 0;
    client_ok = SSL_connect(ssl) == 1 && SSL_write_ex(ssl, up.data(), up.size(), &n) == 1 && n == up.size();
    for (std::size_t done = 0; client_ok && done < down.size(); done += n)
      client_ok = SSL_read_ex(ssl, client_got.data() + done, down.size() - done, &n) == 1;
    SSL_free(ssl);
  });
  // The listener's way: the handshake moved on as bytes arrive.
  auto session = TlsSession::start_accept(**server_context, pair.reader.get());
  Status accepted = session ? Status::ok() : session.status();
  for (const DeadlineNs deadline = monotonic_ns() + 10 * kSecond; accepted;) {
    auto wait = (*session)->advance_accept("node 2");
    if (!wait) accepted = wait.status();
    if (!wait || *wait == TlsHandshakeWait::kDone) break;
    if (monotonic_ns() >= deadline) accepted = Status(StatusCode::kTimeout, "the TLS handshake timed out");
    pollfd p{pair.reader.get(), static_cast<short>(*wait == TlsHandshakeWait::kWantRead ? POLLIN : POLLOUT), 0};
    (void)::poll(&p, 1, 100);
  }
  std::vector<std::byte> server_got(up.size());
  Status received = accepted ? (*session)->recv_exact(server_got, monotonic_ns() + 10 * kSecond) : accepted;
  Status sent = received ? (*session)->send_all(down, monotonic_ns() + 10 * kSecond) : received;
  client.join();
  EXPECT_TRUE(received.is_ok()) << received.to_string();
  EXPECT_TRUE(sent.is_ok()) << sent.to_string();
  EXPECT_TRUE(client_ok);
  EXPECT_EQ(server_got, up);
  EXPECT_EQ(client_got, down);
}

// A peer that sends its ClientHello and closes before the server's answer:
// the server's first write meets a closed socket (EPIPE on a Unix socket
// pair). That must fail this set-up with a reason, not raise SIGPIPE, whose
// default action would end the whole process (the data node).
TEST(TlsRecordsTest, APeerGoneBeforeTheServersAnswerFailsTheSetUpWithoutSigpipe) {
  constexpr NodeId kNodes[] = {1};
  test::TlsDirectory dir{kNodes};
  auto server_context = TlsContext::load(1, dir.path());
  ASSERT_TRUE(server_context) << server_context.status().to_string();
  const std::vector<uint8_t> hello = test::tls_client_hello();
  ASSERT_FALSE(hello.empty());
  ASSERT_NE(::signal(SIGPIPE, SIG_DFL), SIG_ERR);  // as in a program that never set it
  SocketPair pair = socket_pair();
  ASSERT_EQ(::write(pair.writer.get(), hello.data(), hello.size()), static_cast<ssize_t>(hello.size()));
  pair.writer.reset();
  auto session = TlsSession::start_accept(**server_context, pair.reader.get());
  ASSERT_TRUE(session) << session.status().to_string();
  Result<TlsHandshakeWait> wait = TlsHandshakeWait::kWantRead;
  for (const DeadlineNs deadline = monotonic_ns() + 10 * kSecond; monotonic_ns() < deadline;) {
    wait = (*session)->advance_accept("node 2");
    if (!wait || *wait == TlsHandshakeWait::kDone) break;
    pollfd p{pair.reader.get(), static_cast<short>(*wait == TlsHandshakeWait::kWantRead ? POLLIN : POLLOUT), 0};
    (void)::poll(&p, 1, 100);
  }
  ASSERT_FALSE(wait) << "the handshake went on with a peer that had closed";
  EXPECT_NE(wait.status().to_string().find("node 2"), std::string::npos) << wait.status().to_string();
}

}  // namespace
}  // namespace fjord::tcp
