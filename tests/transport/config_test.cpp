// Config file parsing and the link table: every error names file, line, key
// and the accepted range.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include "builtin_transporters.h"
#include "fjord/base/clock.h"
#include "fjord/base/fd.h"
#include "fjord/transport/config_file.h"
#include "fjord/transport/ip_address.h"
#include "fjord/transport/link_config.h"
#include "fjord/transport/registry.h"
#include "fjord/transport/transporter.h"

namespace fjord::transport {
namespace {

Result<LinkTable> load(const std::string& text, std::span<const NodeAddress> nodes = {}) {
  auto file = config::parse_text(text, "cluster.ini");
  if (!file) return file.status();
  return load_link_table(*file, tools::builtin_registry(), nodes);
}

std::string error_of(const std::string& text) {
  auto r = load(text);
  return r.is_ok() ? std::string("no error") : r.status().message();
}

TEST(ConfigFileTest, ParsesSectionsCommentsAndBothSeparators) {
  auto f = config::parse_text(
      "# top\n[TCP  Default]\nSendBufferMemory = 4M ; trailing\n\n[tcp]\nNodeId1: 1\nNodeId2=2\n", "x.ini");
  ASSERT_TRUE(f) << f.status().to_string();
  ASSERT_EQ(f->sections.size(), 2u);
  EXPECT_EQ(f->sections[0].name, "tcp default");
  EXPECT_EQ(f->sections[0].entries[0].value, "4M");
  EXPECT_EQ(f->sections[1].entries[0].key, "NodeId1");
  EXPECT_EQ(f->sections[1].entries[0].line, 6);
}

TEST(ConfigFileTest, SyntaxErrorsNameTheLine) {
  auto a = config::parse_text("[tcp]\nNodeId1 1\n", "c.ini");
  ASSERT_FALSE(a);
  EXPECT_EQ(a.status().message(), "c.ini:2: expected key=value, got 'NodeId1 1'");
  auto b = config::parse_text("NodeId1=1\n", "c.ini");
  EXPECT_EQ(b.status().message(), "c.ini:1: 'NodeId1' appears before any [section]");
  auto c = config::parse_text("[tcp\n", "c.ini");
  EXPECT_EQ(c.status().message(), "c.ini:1: section header must end with ']': [tcp");
  auto d = config::parse_text("[tcp]\nNode Id=1\n", "c.ini");
  EXPECT_EQ(d.status().message(), "c.ini:2: malformed key 'Node Id'");
}

TEST(ConfigFileTest, ValuesParseWithSuffixesAndBooleans) {
  EXPECT_EQ(*config::parse_bytes("2M"), 2u << 20);
  EXPECT_EQ(*config::parse_bytes("64k"), 64u << 10);
  EXPECT_EQ(*config::parse_bytes("1G"), 1u << 30);
  EXPECT_EQ(*config::parse_bytes("100"), 100u);
  EXPECT_FALSE(config::parse_bytes("2X"));
  EXPECT_FALSE(config::parse_bytes("M"));
  EXPECT_FALSE(config::parse_uint("99999999999999999999"));
  EXPECT_FALSE(config::parse_uint("-1"));
  EXPECT_TRUE(*config::parse_bool("Yes"));
  EXPECT_FALSE(*config::parse_bool("0"));
  EXPECT_FALSE(config::parse_bool("maybe"));
  EXPECT_EQ(config::format_bytes(2u << 20), "2M");
  EXPECT_EQ(config::format_bytes(1000), "1000");
}

TEST(LinkConfigTest, LoadsALinkWithDefaultsApplied) {
  auto t = load("[tcp default]\nSendBufferMemory=4M\n[tcp]\nNodeId1=2\nNodeId2=1\nPortNumber=1186\nChecksum=1\n");
  ASSERT_TRUE(t) << t.status().to_string();
  const LinkConfig* l = t->find(1, 2);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->type, "tcp");
  EXPECT_EQ(l->server_node, 1);  // the lower id without node definitions
  EXPECT_EQ(l->send_buffer_bytes, 4u << 20);
  EXPECT_EQ(l->overload_bytes, (4u << 20) / 10 * 8);
  EXPECT_EQ(l->slowdown_bytes, (4u << 20) / 10 * 6);
  EXPECT_TRUE(l->checksum);
  EXPECT_EQ(l->port, 1186);
  EXPECT_EQ(l->host1, "localhost");
  EXPECT_EQ(l->origin, "cluster.ini:3");
  EXPECT_EQ(l->params.origin("SendBufferMemory"), "cluster.ini:2");
}

TEST(LinkConfigTest, NodeDirectoryFillsHostsPortsAndServer) {
  const NodeAddress nodes[] = {{1, "api-host", 0, false}, {2, "data-host", 11860, true}};
  auto t = load("[tcp]\nNodeId1=1\nNodeId2=2\n", nodes);
  ASSERT_TRUE(t) << t.status().to_string();
  const LinkConfig* l = t->find(1, 2);
  EXPECT_EQ(l->server_node, 2);  // the data node serves API nodes
  EXPECT_EQ(l->host1, "api-host");
  EXPECT_EQ(l->host2, "data-host");
  EXPECT_EQ(l->port, 11860);
  auto missing = load("[tcp]\nNodeId1=1\nNodeId2=3\n", nodes);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().message(),
            "cluster.ini:1: [tcp]: node 3 is not defined by any [ndbd], [api] or [mgm] section");
}

// A section without PortNumber means one port for both ends, whatever the
// transporter: the server node's ServerPort, else kDefaultLinkPort; never 0
// (the listener would take any free port and the client would have none).
TEST(LinkConfigTest, ASectionWithoutPortNumberGivesBothEndsOnePort) {
  for (const TransporterFactory* factory : tools::builtin_registry().all()) {
    const std::string type(factory->name());
    SCOPED_TRACE(type);
    auto bare = load("[" + type + "]\nNodeId1=1\nNodeId2=2\n");
    ASSERT_TRUE(bare) << bare.status().to_string();
    EXPECT_EQ(bare->find(1, 2)->port, kDefaultLinkPort);
    // An API node serving the link has no ServerPort: the default again.
    const NodeAddress apis[] = {{1, "a", 0, false}, {2, "b", 0, false}};
    auto api_server = load("[" + type + "]\nNodeId1=1\nNodeId2=2\n", apis);
    ASSERT_TRUE(api_server) << api_server.status().to_string();
    EXPECT_EQ(api_server->find(1, 2)->port, kDefaultLinkPort);
    const NodeAddress data[] = {{1, "a", 0, false}, {2, "b", 12000, true}};
    auto data_server = load("[" + type + "]\nNodeId1=1\nNodeId2=2\n", data);
    ASSERT_TRUE(data_server) << data_server.status().to_string();
    EXPECT_EQ(data_server->find(1, 2)->port, 12000);
    auto explicit_zero = load("[" + type + "]\nNodeId1=1\nNodeId2=2\nPortNumber=0\n", data);
    ASSERT_TRUE(explicit_zero) << explicit_zero.status().to_string();
    EXPECT_EQ(explicit_zero->find(1, 2)->port, 0);
  }
}

// What the listener binds is what the client dials: a tcp link without
// PortNumber between two processes' views of one file meets on the server
// node's ServerPort.
TEST(LinkConfigTest, TheListenerBindsThePortTheClientDials) {
  TransporterFactory* tcp = tools::builtin_registry().find("tcp");
  ASSERT_NE(tcp, nullptr);
  // A port free right now, for the server node's ServerPort.
  UniqueFd probe(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof any;
  ASSERT_EQ(::bind(probe.get(), reinterpret_cast<sockaddr*>(&any), len), 0);
  ASSERT_EQ(::getsockname(probe.get(), reinterpret_cast<sockaddr*>(&any), &len), 0);
  const uint16_t port = ntohs(any.sin_port);
  probe.reset();
  const NodeAddress nodes[] = {{1, "127.0.0.1", port, true}, {2, "127.0.0.1", 0, false}};
  auto table = load("[tcp]\nNodeId1=1\nNodeId2=2\n", nodes);
  ASSERT_TRUE(table) << table.status().to_string();
  auto listener = tcp->listen(1, *table);
  ASSERT_TRUE(listener) << listener.status().to_string();
  EXPECT_EQ((*listener)->port(), port);
  const DeadlineNs deadline = monotonic_ns() + 10'000'000'000ULL;
  Result<std::unique_ptr<Transporter>> client(Status(StatusCode::kInternal, "not run"));
  std::thread connector([&] { client = tcp->connect(2, *table->find(1, 2), deadline); });
  auto server = (*listener)->accept(deadline);
  connector.join();
  ASSERT_TRUE(client) << client.status().to_string();
  ASSERT_TRUE(server) << server.status().to_string();
  EXPECT_EQ((*server)->remote_node(), 2);
  EXPECT_EQ((*client)->remote_node(), 1);
}

// PortNumber=0 (any free port) cannot be dialled: the client says why and
// what to write instead.
TEST(LinkConfigTest, DiallingPortNumberZeroSaysWhatToWrite) {
  auto table = load("[tcp]\nNodeId1=1\nNodeId2=2\nHostName1=127.0.0.1\nHostName2=127.0.0.1\nPortNumber=0\n");
  ASSERT_TRUE(table) << table.status().to_string();
  auto client = tools::builtin_registry().find("tcp")->connect(2, *table->find(1, 2), monotonic_ns() + 1'000'000'000);
  ASSERT_FALSE(client);
  EXPECT_EQ(client.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client.status().message(),
            "tcp link 1-2 (cluster.ini:1) has PortNumber=0: its server listens on any free port, which this end "
            "cannot know; give both ends the same PortNumber, or leave it out for the server node's ServerPort "
            "(else 11860)");
}

TEST(LinkConfigTest, ErrorsNameFileLineKeyAndRange) {
  EXPECT_EQ(error_of("[tcp]\nNodeId1=1\nNodeId2=300\n"),
            "cluster.ini:3: [tcp] NodeId2: value 300 out of range; accepted 1..255");
  EXPECT_EQ(error_of("[tcp]\nNodeId1=1\nNodeId2=2\nSendBufferMemory=1K\n"),
            "cluster.ini:4: [tcp] SendBufferMemory: value 1K out of range; accepted 64K..1G bytes");
  EXPECT_EQ(error_of("[tcp]\nNodeId1=1\nNodeId2=2\nSendBufferMemory=lots\n"),
            "cluster.ini:4: [tcp] SendBufferMemory: 'lots' is not a size (an integer with optional K, M or G); "
            "accepted 64K..1G bytes");
  // The value is quoted as written, its unit included.
  EXPECT_EQ(error_of("[tcp]\nNodeId1=1\nNodeId2=2\nSendBufferMemory=-5M\n"),
            "cluster.ini:4: [tcp] SendBufferMemory: '-5M' is not a size (an integer with optional K, M or G); "
            "accepted 64K..1G bytes");
  EXPECT_EQ(error_of("[tcp]\nNodeId1=1\nNodeId2=2\nSendBufferMemory=99999999999G\n"),
            "cluster.ini:4: [tcp] SendBufferMemory: '99999999999G' is too large; accepted 64K..1G bytes");
  EXPECT_EQ(error_of("[tcp]\nNodeId1=1\n"), "cluster.ini:1: [tcp] missing required key NodeId2 (1..255)");
  EXPECT_EQ(error_of("[tcp]\nNodeId1=1\nNodeId2=1\n"), "cluster.ini:1: [tcp]: NodeId1 and NodeId2 are both 1");
  EXPECT_EQ(error_of("[tcp]\nNodeId1=1\nNodeId2=2\nNodeIdServer=3\n"),
            "cluster.ini:1: [tcp]: NodeIdServer=3 is neither NodeId1 (1) nor NodeId2 (2)");
  EXPECT_EQ(error_of("[tcp]\nNodeId1=1\nNodeId2=2\nChecksum=sometimes\n"),
            "cluster.ini:4: [tcp] Checksum: 'sometimes' is not a boolean (1/0, true/false, yes/no)");
  EXPECT_EQ(error_of("[tcp]\nNodeId1=1\nNodeId2=2\nNodeId2=3\n"),
            "cluster.ini:4: [tcp] NodeId2: given twice (first at line 3)");
  EXPECT_EQ(error_of("[tcp]\nNodeId1=1\nNodeId2=2\nOverloadLimit=3M\n"),
            "cluster.ini:1: [tcp]: OverloadLimit=3M exceeds SendBufferMemory=2M");
  EXPECT_EQ(error_of("[tcp]\nNodeId1=1\nNodeId2=2\nSendBufMem=1M\n"),
            "cluster.ini:4: [tcp] SendBufMem: unknown key; did you mean SendBufferMemory?");
  EXPECT_EQ(error_of("[tcp]\nNodeId1=1\nNodeId2=2\n[tcp]\nNodeId1=2\nNodeId2=1\n"),
            "cluster.ini:4: [tcp]: nodes 2 and 1 already have a tcp link at cluster.ini:1");
}

TEST(LinkConfigTest, TransporterSpecificKeysAreOnlyAcceptedInTheirSection) {
  auto ok = load("[tcp]\nNodeId1=1\nNodeId2=2\nReceiveBufferMemory=1M\n");
  ASSERT_TRUE(ok) << ok.status().to_string();
  EXPECT_EQ(ok->find(1, 2)->params.get_uint("ReceiveBufferMemory"), 1u << 20);
  EXPECT_NE(error_of("[tcp]\nNodeId1=1\nNodeId2=2\nShmSize=1M\n").find("ShmSize: unknown key"), std::string::npos);
}

TEST(LinkConfigTest, NonLinkSectionsAreLeftToTheCaller) {
  auto t = load("[ndbd]\nNodeId=2\n[tcp]\nNodeId1=1\nNodeId2=2\n");
  ASSERT_TRUE(t) << t.status().to_string();
  EXPECT_EQ(t->all().size(), 1u);
  EXPECT_TRUE(is_link_section("tcp default", tools::builtin_registry()));
  EXPECT_FALSE(is_link_section("ndbd", tools::builtin_registry()));
}

TEST(ConfigFileTest, AByteOrderMarkIsSkipped) {
  auto f = config::parse_text("\xEF\xBB\xBF[tcp]\nNodeId1=1\nNodeId2=2\n", "bom.ini");
  ASSERT_TRUE(f) << f.status().to_string();
  ASSERT_EQ(f->sections.size(), 1u);
  EXPECT_EQ(f->sections[0].name, "tcp");
  EXPECT_EQ(f->sections[0].line, 1);
}

TEST(ConfigFileTest, EverySyntaxErrorIsReportedInOneRun) {
  auto f = config::parse_text("[tcp]\nNodeId1 1\n[tcp\nNodeId1=2\n[tcp]\nNode Id=1\n", "c.ini");
  ASSERT_FALSE(f);
  // The entry after the malformed header belongs to no section: no error of its own.
  EXPECT_EQ(f.status().message(),
            "c.ini:2: expected key=value, got 'NodeId1 1'\n"
            "c.ini:3: section header must end with ']': [tcp\n"
            "c.ini:6: malformed key 'Node Id'");
}

TEST(LinkConfigTest, EverySchemaErrorIsReportedInOneRun) {
  EXPECT_EQ(error_of("[tcp]\nNodeId1=1\nNodeId2=300\nSendBufferMemory=lots\nBogus=1\n"
                     "[tcp]\nNodeId1=3\nNodeId2=4\nChecksum=sometimes\n"),
            "cluster.ini:3: [tcp] NodeId2: value 300 out of range; accepted 1..255\n"
            "cluster.ini:4: [tcp] SendBufferMemory: 'lots' is not a size (an integer with optional K, M or G); "
            "accepted 64K..1G bytes\n"
            "cluster.ini:5: [tcp] Bogus: unknown key (neither Fjord's nor NDB's name for a parameter of this section)\n"
            "cluster.ini:9: [tcp] Checksum: 'sometimes' is not a boolean (1/0, true/false, yes/no)");
  // A syntax error and a schema error of one file, through one Diagnostics.
  config::Diagnostics diagnostics;
  const config::File file = config::parse_text("[tcp]\nNodeId1=1\nNodeId2=2\nOops\nShmSize=1M\n", "c.ini", diagnostics);
  (void)load_link_table(file, tools::builtin_registry(), {}, diagnostics);
  EXPECT_EQ(diagnostics.errors(),
            (std::vector<std::string>{"c.ini:4: expected key=value, got 'Oops'",
                                      "c.ini:5: [tcp] ShmSize: unknown key (neither Fjord's nor NDB's name for a "
                                      "parameter of this section)"}));
}

TEST(LinkConfigTest, ManyErrorsAreCountedNotAllPrinted) {
  std::string text = "[tcp]\nNodeId1=1\nNodeId2=2\n";
  for (int i = 0; i < 1000; ++i) text += "Unknown" + std::to_string(i) + "=1\n";
  const std::string message = error_of(text);
  EXPECT_LT(message.size(), 3000u);
  EXPECT_NE(message.find("... and 980 more errors"), std::string::npos) << message;
}

TEST(LinkConfigTest, AnNdbParameterIsAcceptedWithOneWarning) {
  auto t = load(
      "[tcp default]\nTcpSpinTime=100\n[tcp]\nNodeId1=1\nNodeId2=2\nSendSignalId=1\n"
      "[tcp]\nNodeId1=1\nNodeId2=3\n[shm]\nNodeId1=2\nNodeId2=3\nSigNum=10\n");
  ASSERT_TRUE(t) << t.status().to_string();
  EXPECT_EQ(t->all().size(), 3u);
  // The default section's key applies to two links and is named once.
  EXPECT_EQ(t->warnings(),
            (std::vector<std::string>{
                "cluster.ini:2: [tcp default] TcpSpinTime: an NDB parameter Fjord does not implement; it has no "
                "effect here",
                "cluster.ini:6: [tcp] SendSignalId: an NDB parameter Fjord does not implement; it has no effect here",
                "cluster.ini:13: [shm] SigNum: an NDB parameter Fjord does not implement; it has no effect here"}));
  // An NDB name of another kind of link is still unknown here.
  EXPECT_EQ(error_of("[tcp]\nNodeId1=1\nNodeId2=2\nSigNum=10\n"),
            "cluster.ini:4: [tcp] SigNum: unknown key (neither Fjord's nor NDB's name for a parameter of this "
            "section)");
}

TEST(LinkConfigTest, AnUnknownKeyNamesTheClosestKnownKey) {
  EXPECT_EQ(error_of("[tcp]\nNodeId1=1\nNodeId2=2\nSendBuferMemory=1M\n"),
            "cluster.ini:4: [tcp] SendBuferMemory: unknown key; did you mean SendBufferMemory?");
  // NDB's names are candidates too.
  EXPECT_EQ(error_of("[tcp]\nNodeId1=1\nNodeId2=2\nTCP_MAXSEG=1\n"),
            "cluster.ini:4: [tcp] TCP_MAXSEG: unknown key; did you mean TCP_MAXSEG_SIZE?");
  EXPECT_EQ(error_of("[shm]\nNodeId1=1\nNodeId2=2\nshmspintme=5\n"),
            "cluster.ini:4: [shm] shmspintme: unknown key; did you mean ShmSpintime?");
}

TEST(LinkConfigTest, AKeyGivenTwiceInADefaultSectionIsRefused) {
  EXPECT_EQ(error_of("[tcp default]\nSendBufferMemory=4M\nSendBufferMemory=8M\n[tcp]\nNodeId1=1\nNodeId2=2\n"),
            "cluster.ini:3: [tcp default] SendBufferMemory: given twice (first at line 2)");
  // A default section is checked even where no section of its kind exists.
  EXPECT_EQ(error_of("[shm default]\nShmSize=1X\n[tcp]\nNodeId1=1\nNodeId2=2\n"),
            "cluster.ini:2: [shm default] ShmSize: '1X' is not a size (an integer with optional K, M or G); "
            "accepted 64K..1G bytes");
}

TEST(ConfigFileTest, ALongLineGivesAShortError) {
  const std::string line(1 << 20, 'x');
  auto f = config::parse_text("[tcp]\nNodeId1=" + line + "\n", "c.ini");
  ASSERT_FALSE(f);
  EXPECT_EQ(f.status().message(), "c.ini:2: line longer than 8192 bytes");
  auto g = config::parse_text(line, "c.ini");
  ASSERT_FALSE(g);
  EXPECT_EQ(g.status().message(), "c.ini:1: line longer than 8192 bytes");
}

TEST(ConfigFileTest, ABadValueIsQuotedByAShortPrefix) {
  const std::string value = "z" + std::string(5000, '7');
  const std::string message = error_of("[tcp]\nNodeId1=1\nNodeId2=" + value + "\n");
  EXPECT_EQ(message, "cluster.ini:3: [tcp] NodeId2: '" + value.substr(0, config::kQuoteMaxChars) +
                         "...' is not an unsigned integer; accepted 1..255");
  const std::string key(100, 'k');
  auto f = config::parse_text("[tcp]\n" + key + "=1\n", "c.ini");
  ASSERT_FALSE(f);
  EXPECT_EQ(f.status().message(),
            "c.ini:2: key longer than 64 characters: '" + key.substr(0, config::kQuoteMaxChars) + "...'");
}

// A temporary path removed at the end of the test, pass or fail.
class TempPath {
 public:
  explicit TempPath(const std::string& name)
      : path_(::testing::TempDir() + "/fjord_config_" + std::to_string(::getpid()) + "_" + name) {}
  ~TempPath() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(ConfigFileTest, ReadingIsBounded) {
  auto zero = config::read_file("/dev/zero");
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.status().message(), "/dev/zero: not a regular file");
  TempPath fifo("fifo");
  ASSERT_EQ(::mkfifo(fifo.path().c_str(), 0600), 0);
  auto from_fifo = config::read_file(fifo.path());  // no writer: must not wait for one
  ASSERT_FALSE(from_fifo);
  EXPECT_EQ(from_fifo.status().message(), fifo.path() + ": not a regular file");
  TempPath big("big.ini");
  {
    std::ofstream out(big.path());
    out << "[tcp]\n";
    for (int i = 0; i < 200000; ++i) out << "# a comment line\n";
  }
  auto too_big = config::read_file(big.path());
  ASSERT_FALSE(too_big);
  EXPECT_EQ(too_big.status().message(), big.path() + ": larger than 1M bytes; not a config file");
  auto missing = config::read_file(big.path() + ".none");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace fjord::transport
