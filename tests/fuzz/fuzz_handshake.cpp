// libFuzzer target: the handshake decoders on arbitrary bytes (greeting,
// request with or without a key proof, reply). A decoded message must
// re-encode to the same bytes.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fjord/transport/handshake.h"

using namespace fjord::transport;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::byte> input(size);
  if (size) std::memcpy(input.data(), data, size);
  (void)handshake_message_bytes(input, kHandshakeRequestMagic);
  (void)handshake_message_bytes(input, kHandshakeReplyMagic);
  (void)handshake_message_bytes(input, kHandshakeGreetingMagic);
  if (auto g = decode_greeting(input); g.is_ok()) {
    if (encode_greeting(*g) != input) std::abort();
  }
  if (auto q = decode_request(input); q.is_ok()) {
    if (q->proof && !q->has_key) std::abort();
    if (encode_request(*q) != input) std::abort();
  }
  if (auto p = decode_reply(input); p.is_ok()) {
    if (p->proof && !p->accepted) std::abort();
    // Non-printable reason bytes are replaced on decode, so compare lengths.
    if (encode_reply(*p).size() != input.size()) std::abort();
  }
  return 0;
}
