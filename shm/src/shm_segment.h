// The shared-memory segment of one SHM link (internal header).
//
// One memfd holds everything the two processes share:
//
//   offset            size         contents
//   0                 1 page       SegmentHeader: identity, both rings' read
//                                  indices and wake-up words, both sides'
//                                  "closed" words
//   page              ring_bytes   ring 0 data: client -> server
//   page + ring_bytes ring_bytes   ring 1 data: server -> client
//
// Each ring's data is mapped twice back to back (MirroredMap) so spans never
// wrap. Every field that one side writes and the other reads sits on its own
// cache line; docs/shm.md draws the layout.
//
// The server creates the segment (memfd, mode 0600, size sealed so the peer
// cannot shrink it under us and make us fault) and passes the fd over the
// Unix socket; the client attaches and checks size, seals and identity.
// After mapping, both sides close the fd: the memory lives exactly as long
// as a mapping does, and no name exists anywhere in the filesystem.
//
// Slow path (creation, mapping), by the thread setting the link up; the
// mapped memory is used on the hot path by the link's sender and receiver.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "fjord/base/cache.h"
#include "fjord/base/fd.h"
#include "fjord/base/mirrored_map.h"
#include "fjord/base/status.h"
#include "fjord/shm/spsc_ring.h"
#include "fjord/shm/wakeup.h"

namespace fjord::shm {

inline constexpr uint64_t kSegmentMagic = 0x4745'534D'4853'4A46;  // "FJSHMSEG"
// 2: batches with envelopes (fjord/shm/spsc_ring.h), no write index.
// 3: and gaps (a producer goes back to the ring's start while its consumer keeps up).
inline constexpr uint32_t kLayoutVersion = 3;
inline constexpr std::size_t kCloseReasonBytes = 192;

// Ring i is written by side i (client = 0, server = 1) and read by the other.
enum Side : uint8_t { kClientSide = 0, kServerSide = 1 };

struct RingShared {
  SpscRingIndices indices;   // the read index line (consumer)
  WakeupWord reader_wakeup;  // the consumer's sleep word, on its own line
};

// Written by one side only, once, when it takes the link down.
struct SideShared {
  // 0 while up; 1 after an orderly close. Store-release after `reason` is
  // written (pairs with the peer's load-acquire before reading it).
  alignas(kCacheLineBytes) std::atomic<uint32_t> closed{0};
  char reason[kCloseReasonBytes] = {};  // NUL-terminated
};

struct SegmentHeader {
  // Identity, written by the server before the fd is passed; read-only after.
  uint64_t magic = kSegmentMagic;
  uint32_t layout_version = kLayoutVersion;
  uint32_t header_bytes = 0;
  uint64_t ring_bytes = 0;
  RingShared rings[2];  // indexed by the writing Side
  SideShared sides[2];  // indexed by Side
};
static_assert(alignof(SegmentHeader) == kCacheLineBytes);
static_assert(sizeof(SegmentHeader) <= 4096, "the header must fit the first page");

class Segment {
 public:
  Segment() = default;
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();

  // Server: a fresh segment with two rings of ring_bytes (a multiple of the
  // page size), memory allocated up front so the hot path never faults it in.
  static Result<Segment> create(std::size_t ring_bytes);
  // Client: maps a segment received from the server and checks it.
  static Result<Segment> attach(UniqueFd memfd, std::size_t ring_bytes);

  int memfd() const { return memfd_.get(); }
  // Drops the fd once it has been passed on; the mappings keep the memory.
  void close_memfd() { memfd_.reset(); }

  SegmentHeader& header() const { return *header_; }
  std::byte* ring_data(Side writer) const { return rings_[writer].data(); }
  std::size_t ring_bytes() const { return rings_[0].size(); }

 private:
  Status map_all(std::size_t ring_bytes);

  UniqueFd memfd_;
  SegmentHeader* header_ = nullptr;  // one page, munmap'ed in the destructor
  MirroredMap rings_[2];
};

}  // namespace fjord::shm
