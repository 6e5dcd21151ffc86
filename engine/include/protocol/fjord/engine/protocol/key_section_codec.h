// The key section codec: turns the key values of a request (a section of
// value entries, as the API sends them) into the key's order-preserving
// encoding (KeyCodec), which TC hashes to route and LDM looks up.
//
// The section may come from a peer: every entry is checked, and an error
// names the column at fault. Pure functions; any thread. Hot path: every
// key operation's key passes through encode_key_section in TC and in LDM;
// keys of NOT NULL integer columns (most keys) take an inline fast path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "fjord/base/status.h"
#include "fjord/engine/key_codec.h"

namespace fjord::engine::protocol {

// Encodes the key values of a key section (entries naming exactly the
// codec's columns by table position, in any order, each once, none NULL
// unless nullable) into `out` (at least codec.max_encoded_bytes()). Errors
// name the column at fault.
Result<uint32_t> encode_key_section(const KeyCodec& codec, std::span<const std::byte> section,
                                    std::span<std::byte> out);
// Its two paths. The fast one: a key of NOT NULL integer columns (most
// keys) in a well-formed section, each entry straight to its place (false:
// anything else, which the general path then encodes or names).
bool encode_integer_key_section(const KeyCodec& codec, std::span<const std::byte> section, std::span<std::byte> out);
inline bool encode_integer_key_fast(const KeyCodec& codec, std::span<const std::byte> section,
                                    std::span<std::byte> out) {
  return codec.integer_key() && out.size() >= codec.max_encoded_bytes() &&
         encode_integer_key_section(codec, section, out);
}
Result<uint32_t> encode_key_section_general(const KeyCodec& codec, std::span<const std::byte> section,
                                            std::span<std::byte> out);
// encode_key_section for a caller that needs no error message, inline and
// without a Result on the fast path: every TC routes each key through it.
// Forced inline: GCC's inliner declines it in TC's train stages, which
// route every key of a train.
[[gnu::always_inline]] inline bool encode_key_section(const KeyCodec& codec, std::span<const std::byte> section,
                                                      std::span<std::byte> out, uint32_t& length) {
  if (encode_integer_key_fast(codec, section, out)) {
    length = codec.max_encoded_bytes();
    return true;
  }
  const Result<uint32_t> encoded = encode_key_section_general(codec, section, out);
  if (!encoded.is_ok()) return false;
  length = encoded.value();
  return true;
}

}  // namespace fjord::engine::protocol
