// For fuzz targets whose input is a script of steps (fuzz_shm_ring,
// fuzz_rdma_ring): reading the script's numbers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace fjord::fuzz {

// The next `bytes` (at most 8) of the input as a little-endian number; what
// is missing at the input's end reads as zero bytes.
inline uint64_t take(const uint8_t*& data, size_t& size, std::size_t bytes) {
  uint64_t v = 0;
  const std::size_t n = bytes < size ? bytes : size;
  std::memcpy(&v, data, n);
  data += n;
  size -= n;
  return v;
}

}  // namespace fjord::fuzz
