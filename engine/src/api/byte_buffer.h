// API internals: byte buffers that keep their storage between uses, so a
// transaction's requests and results allocate only until the largest batch
// has been seen. The thread that owns the Connection; hot path.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <span>
#include <vector>

namespace fjord::api::detail {

// Appends `bytes` after the first `used` bytes of `storage` (the rest is
// spare room), growing the storage only when the room is too small.
[[gnu::always_inline]] inline void append_bytes(std::vector<std::byte>& storage, std::size_t& used,
                                                std::span<const std::byte> bytes) {
  if (bytes.empty()) return;
  if (storage.size() - used < bytes.size()) storage.resize(std::max(storage.size() * 2, used + bytes.size()));
  std::memcpy(storage.data() + used, bytes.data(), bytes.size());
  used += bytes.size();
}

}  // namespace fjord::api::detail
