// libFuzzer target: the handshake decoders on arbitrary bytes. A decoded
// message must re-encode to the same bytes.
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
  if (auto q = decode_request(input); q.is_ok()) {
    if (encode_request(*q) != input) std::abort();
  }
  if (auto p = decode_reply(input); p.is_ok()) {
    // Non-printable reason bytes are replaced on decode, so compare lengths.
    if (encode_reply(*p).size() != input.size()) std::abort();
  }
  return 0;
}
