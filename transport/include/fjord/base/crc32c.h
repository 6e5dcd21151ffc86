// CRC-32C (Castagnoli), table-driven and portable (no SSE4.2 requirement, so
// binaries also run in the emulated RDMA guest). Used for the optional frame
// checksum. Any thread; pure function.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fjord {

uint32_t crc32c(const void* data, std::size_t bytes, uint32_t seed = 0) noexcept;

}  // namespace fjord
