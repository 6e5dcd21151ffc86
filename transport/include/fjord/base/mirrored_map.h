// A region of a file mapped twice, back to back, so that a ring buffer over
// it can hand out contiguous spans that cross the end: byte i and byte
// i + size are the same memory. Used by the TCP send/receive rings (private
// memfd) and the SHM rings (shared memfd). size must be a multiple of the
// page size; offset too.
//
// Slow path (mapping); the memory itself is used on the hot path.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fjord/base/fd.h"
#include "fjord/base/status.h"

namespace fjord {

class MirroredMap {
 public:
  MirroredMap() = default;
  MirroredMap(const MirroredMap&) = delete;
  MirroredMap& operator=(const MirroredMap&) = delete;
  MirroredMap(MirroredMap&& other) noexcept;
  MirroredMap& operator=(MirroredMap&& other) noexcept;
  ~MirroredMap();

  // Maps [offset, offset+size) of fd twice, shared (writes reach the file).
  static Result<MirroredMap> map(int fd, uint64_t offset, std::size_t size);
  // An anonymous private buffer of `size` bytes (a fresh memfd, closed after
  // mapping), mirrored the same way.
  static Result<MirroredMap> anonymous(std::size_t size, const char* name);

  std::byte* data() const { return base_; }
  std::size_t size() const { return size_; }

 private:
  std::byte* base_ = nullptr;
  std::size_t size_ = 0;
};

std::size_t page_size();
// Rounds up to a multiple of the page size.
std::size_t round_up_to_pages(std::size_t bytes);

}  // namespace fjord
