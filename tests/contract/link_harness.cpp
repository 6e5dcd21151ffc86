#include "link_harness.h"

#include <cstring>
#include <thread>

#include "builtin_transporters.h"
#include "fjord/base/clock.h"

namespace fjord::test {
namespace {

using transport::LinkConfig;
using transport::LinkTable;

class DummyFactory final : public transport::TransporterFactory {
 public:
  std::string_view name() const override { return "dummy"; }
  std::string_view description() const override { return "registered for tests; never connects"; }
  std::span<const config::ParamSpec> parameters() const override { return {}; }
  Result<std::unique_ptr<transport::Listener>> listen(NodeId, const LinkTable&) override {
    return Status(StatusCode::kUnavailable, "dummy transporter");
  }
  Result<std::unique_ptr<transport::Transporter>> connect(NodeId, const LinkConfig&, DeadlineNs) override {
    return Status(StatusCode::kUnavailable, "dummy transporter");
  }
};

std::byte payload_byte(uint64_t seq, std::size_t i) {
  return static_cast<std::byte>((seq * 131 + i * 7 + (i >> 8)) & 0xFF);
}

}  // namespace

transport::TransporterRegistry& test_registry() {
  static transport::TransporterRegistry& registry = []() -> transport::TransporterRegistry& {
    auto& r = tools::builtin_registry();
    (void)r.add(std::make_unique<DummyFactory>());
    return r;
  }();
  return registry;
}

Result<LinkTable> load_links(const std::string& config_text) {
  auto file = config::parse_text(config_text, "<test>");
  if (!file) return file.status();
  return transport::load_link_table(*file, test_registry());
}

LinkConfig client_view(const LinkConfig& link, const transport::Listener& listener) {
  LinkConfig out = link;
  if (out.port == 0) out.port = listener.port();
  return out;
}

Result<LinkPair> connect_pair(const LinkTable& server_table, NodeId server_node, const LinkConfig& client_link,
                              NodeId client_node, Status* server_status) {
  transport::TransporterFactory* factory = test_registry().find(client_link.type);
  if (!factory) return Status(StatusCode::kNotFound, "no transporter " + client_link.type);
  // The server listens with the factory of its own link type for this pair,
  // which may differ from the client's (type-mismatch tests).
  const LinkConfig* server_link = server_table.find(server_node, client_node);
  transport::TransporterFactory* server_factory =
      test_registry().find(server_link ? server_link->type : client_link.type);
  auto listener = server_factory->listen(server_node, server_table);
  if (!listener) listener = factory->listen(server_node, server_table);
  if (!listener) return listener.status();
  const LinkConfig patched = client_view(client_link, **listener);

  Result<std::unique_ptr<transport::Transporter>> client(Status(StatusCode::kInternal, "not run"));
  const DeadlineNs deadline = monotonic_ns() + 10'000'000'000ULL;
  std::thread connector([&] { client = factory->connect(client_node, patched, deadline); });
  auto server = (*listener)->accept(deadline);
  connector.join();
  if (server_status) *server_status = server ? Status::ok() : server.status();
  if (!client) return client.status();
  if (!server) return server.status();
  return LinkPair{std::move(listener).value(), std::move(server).value(), std::move(client).value()};
}

Result<LinkPair> make_pair(const Medium& medium, const std::string& extra_lines) {
  auto table = load_links(medium.section(1, 2, extra_lines));
  if (!table) return table.status();
  return connect_pair(*table, 1, *table->find(1, 2), 2);
}

std::size_t sequenced_frame_bytes(std::size_t payload_bytes, bool checksum) {
  const std::size_t sections[] = {payload_bytes};
  return frame::frame_bytes_for(3, sections, checksum);
}

std::size_t pack_sequenced(std::span<std::byte> dest, uint64_t seq, std::size_t payload_bytes, bool checksum) {
  static thread_local std::vector<std::byte> payload;
  payload.resize(payload_bytes);
  for (std::size_t i = 0; i < payload_bytes; ++i) payload[i] = payload_byte(seq, i);
  const uint32_t data[] = {static_cast<uint32_t>(seq), static_cast<uint32_t>(seq >> 32),
                           static_cast<uint32_t>(payload_bytes)};
  const std::span<const std::byte> sections[] = {payload};
  frame::SignalHeader header{kTestSignal, {2, 0}, {1, 0}, static_cast<uint32_t>(seq)};
  return frame::pack_frame(dest, header, data, sections, checksum);
}

bool send_sequenced(transport::Transporter& t, uint64_t seq, std::size_t payload_bytes) {
  const std::size_t bytes = sequenced_frame_bytes(payload_bytes, t.config().checksum);
  auto space = t.reserve(bytes);
  if (space.empty()) return false;
  const std::size_t written = pack_sequenced(space, seq, payload_bytes, t.config().checksum);
  if (written != bytes) return false;
  t.commit(written, 1);
  return t.flush() != transport::FlushStatus::kDown;
}

std::string check_sequenced(const frame::SignalView& view, uint64_t expected_seq) {
  if (view.header.signal_number != kTestSignal)
    return "wrong signal number " + std::to_string(view.header.signal_number);
  if (view.data_words != 3 || view.section_count != 1) return "wrong shape";
  const uint64_t seq = view.word(0) | (uint64_t{view.word(1)} << 32);
  if (seq != expected_seq) return "expected frame " + std::to_string(expected_seq) + ", got " + std::to_string(seq);
  const std::size_t n = view.word(2);
  if (view.sections[0].size() != n) return "payload length mismatch in frame " + std::to_string(seq);
  for (std::size_t i = 0; i < n; ++i)
    if (view.sections[0][i] != payload_byte(seq, i))
      return "payload byte " + std::to_string(i) + " corrupt in frame " + std::to_string(seq);
  if (view.header.trace != static_cast<uint32_t>(seq)) return "trace word corrupt";
  return "";
}

std::string receive_sequenced(transport::Transporter& t, uint64_t* next_seq, uint64_t count, uint64_t timeout_ns) {
  const uint64_t deadline = monotonic_ns() + timeout_ns;
  const uint64_t end = *next_seq + count;
  while (*next_seq < end) {
    transport::ReceiveBatch batch = t.receive();
    if (batch.bytes.empty()) {
      if (!t.is_up()) return "link down after " + std::to_string(*next_seq) + " frames: " + t.down_reason().to_string();
      if (monotonic_ns() > deadline) return "timed out waiting for frame " + std::to_string(*next_seq);
      std::this_thread::yield();
      continue;
    }
    frame::FrameCursor cursor(batch.bytes);
    frame::SignalView view;
    uint32_t seen = 0;
    while (cursor.next(view)) {
      if (std::string e = check_sequenced(view, *next_seq); !e.empty()) return e;
      ++*next_seq;
      ++seen;
    }
    if (seen != batch.frames)
      return "batch said " + std::to_string(batch.frames) + " frames, cursor found " + std::to_string(seen);
    t.release(batch.bytes.size());
  }
  return "";
}

std::size_t mixed_payload_bytes(uint64_t seq) {
  // Mostly small, sometimes large, occasionally the largest that fits a frame.
  const uint64_t h = (seq * 0x9E3779B97F4A7C15ULL) >> 40;
  const std::size_t max_payload = frame::kMaxFrameBytes - 24 - 16 - 8;
  switch (h % 16) {
    case 0: return max_payload;
    case 1:
    case 2: return h % 16384;
    case 3: return 0;
    default: return h % 200;
  }
}

}  // namespace fjord::test
