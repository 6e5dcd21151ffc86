// What the two ends of an RDMA link put in each other's memory, and the
// bytes they exchange at set-up (internal header; docs/rdma.md draws it).
//
// Each end owns three registered regions:
//   receive ring  ring_bytes, written by the peer with RDMA WRITE, read here;
//   send ring     ring_bytes, the mirror of the peer's receive ring: frames
//                 are packed at the offset where they will land remotely;
//   control       the credit block the peer writes, our send stream's posted
//                 end that the peer reads before it sleeps, staging slots
//                 that are the source of our small writes, doorbell slots
//                 for iWARP wake-ups, and the bootstrap buffer (handshake).
//
// Pure layout and codecs: any thread, no allocation. The codecs read bytes
// from the peer and never read past their input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>

#include "fjord/transport/frame.h"
#include "fjord/transport/handshake.h"

namespace fjord::rdma::wire {

// The ring carries records, one per flush:
//
//   offset   size  field
//   0        4     frame_bytes   whole frames that follow, multiple of 8, > 0
//   4        4     seq_lo        low 32 bits of the record number (1, 2, ...)
//   8        n     frames        as frame.h defines them
//   8+n      8     trailer       record number ^ kTrailerMagic
//
// The whole record is one RDMA WRITE (two at the ring's wrap), so its
// trailer is the last thing placed: a receiver that reads the header with
// the expected number and then the matching trailer has the whole record
// (the in-order placement that perftest's ib_write_lat relies on too).
// Records start 8-aligned; a record never exceeds the ring.
struct RecordHeader {
  uint32_t frame_bytes;
  uint32_t seq_lo;
};
static_assert(sizeof(RecordHeader) == 8);
inline constexpr std::size_t kRecordHeaderBytes = 8;
inline constexpr std::size_t kRecordTrailerBytes = 8;
inline constexpr uint64_t kTrailerMagic = 0x9E37'79B9'7F4A'7C15ULL;

// One aligned 8-byte word of memory the peer's NIC may be writing (never
// split; acquire: what the word says is placed is visible after it).
inline uint64_t load_ring_word(const std::byte* at) {
  return __atomic_load_n(reinterpret_cast<const uint64_t*>(at), __ATOMIC_ACQUIRE);
}

// A record wholly placed in the receive ring: where its frames start (a
// stream offset) and how many bytes of them it carries.
struct PlacedRecord {
  uint64_t frames_at = 0;
  uint64_t length = 0;
};

// The record numbered `seq` at stream offset `at` (8-aligned) of a receive
// ring of `ring_bytes` (a multiple of 8) that the peer writes, once all of
// it is there: a header with that number and a length that can be right,
// and after the frames the matching trailer. Otherwise nullopt, which only
// means "not yet": a header still being placed may be torn or a lap old,
// so no value of its words is an error (the frames' own scan, frame.h,
// finds faults). `ring` is mapped twice in a row, so the record's bytes are
// contiguous from ring + at % ring_bytes, and nothing past ring + 2 *
// ring_bytes is read.
inline std::optional<PlacedRecord> placed_record(const std::byte* ring, uint64_t ring_bytes, uint64_t at,
                                                 uint64_t seq) {
  const uint64_t header_word = load_ring_word(ring + at % ring_bytes);
  RecordHeader header;
  std::memcpy(&header, &header_word, sizeof header);
  if (header.seq_lo != static_cast<uint32_t>(seq)) return std::nullopt;
  const uint64_t length = header.frame_bytes;
  if (length == 0 || length % frame::kFrameAlign != 0 || length + kRecordHeaderBytes + kRecordTrailerBytes > ring_bytes)
    return std::nullopt;
  const uint64_t trailer = load_ring_word(ring + (at + kRecordHeaderBytes + length) % ring_bytes);
  if (trailer != (seq ^ kTrailerMagic)) return std::nullopt;
  return PlacedRecord{at + kRecordHeaderBytes, length};
}

// The credit block the peer writes into our control region with one RDMA
// WRITE: how many bytes of our send stream it released (ring positions,
// record headers and trailers included), how many receive work requests it
// has posted in total, and how many times it announced that it is about to
// sleep. `check` lets the reader reject a torn read (an RDMA WRITE is not
// atomic with respect to the CPU): a block is taken only when
// check == released ^ reposted ^ sleep_seq ^ kCreditMagic.
struct CreditBlock {
  uint64_t released_bytes;
  uint64_t reposted_receives;
  uint64_t sleep_seq;
  uint64_t check;
};
static_assert(sizeof(CreditBlock) == 32);
inline constexpr uint64_t kCreditMagic = 0x464A'4352'4544'4954ULL;  // "FJCREDIT"

inline CreditBlock make_credit(uint64_t released, uint64_t reposted, uint64_t sleep_seq) {
  return {released, reposted, sleep_seq, released ^ reposted ^ sleep_seq ^ kCreditMagic};
}

// Control region layout (offsets in bytes).
inline constexpr std::size_t kCreditOffset = 0;       // CreditBlock, written by the peer
inline constexpr std::size_t kPostedEndOffset = 32;   // u64 our send stream end, read by the peer (RDMA READ)
inline constexpr std::size_t kReadTargetOffset = 40;  // u64 where our RDMA READ of the peer's posted end lands
inline constexpr std::size_t kStagingOffset = 64;
inline constexpr std::size_t kStagingSlotBytes = 32;  // one CreditBlock or one doorbell
inline constexpr std::size_t kDoorbellSlotBytes = 8;  // iWARP wake-up SEND payload
inline constexpr std::size_t kBootstrapBytes = transport::kMaxHandshakeBytes;

struct ControlLayout {
  std::size_t staging = kStagingOffset;  // queue_depth slots of kStagingSlotBytes
  std::size_t doorbells = 0;             // queue_depth slots of kDoorbellSlotBytes
  std::size_t bootstrap = 0;             // kBootstrapBytes
  std::size_t total = 0;
};

inline ControlLayout control_layout(uint32_t queue_depth) {
  ControlLayout l;
  l.doorbells = l.staging + queue_depth * kStagingSlotBytes;
  l.bootstrap = l.doorbells + queue_depth * kDoorbellSlotBytes;
  l.total = l.bootstrap + kBootstrapBytes;
  return l;
}

// Where one end's regions are, sent in the handshake's extra bytes (request
// in the rdma_cm private data, reply in the bootstrap SEND). Little-endian.
struct RingInfo {
  uint64_t ring_addr = 0;
  uint32_t ring_rkey = 0;
  uint32_t ring_bytes = 0;
  uint64_t control_addr = 0;
  uint32_t control_rkey = 0;
  uint32_t queue_depth = 0;  // receive work requests this end keeps posted
};
inline constexpr std::size_t kRingInfoBytes = 32;

inline void encode_ring_info(const RingInfo& info, std::span<std::byte, kRingInfoBytes> out) {
  std::byte* p = out.data();
  const auto put = [&p](const void* v, std::size_t n) {
    std::memcpy(p, v, n);
    p += n;
  };
  put(&info.ring_addr, 8);
  put(&info.ring_rkey, 4);
  put(&info.ring_bytes, 4);
  put(&info.control_addr, 8);
  put(&info.control_rkey, 4);
  put(&info.queue_depth, 4);
}

inline std::optional<RingInfo> decode_ring_info(std::span<const std::byte> in) {
  if (in.size() != kRingInfoBytes) return std::nullopt;
  RingInfo info;
  const std::byte* p = in.data();
  const auto get = [&p](void* v, std::size_t n) {
    std::memcpy(v, p, n);
    p += n;
  };
  get(&info.ring_addr, 8);
  get(&info.ring_rkey, 4);
  get(&info.ring_bytes, 4);
  get(&info.control_addr, 8);
  get(&info.control_rkey, 4);
  get(&info.queue_depth, 4);
  return info;
}

// rdma_cm private data on connect is 56 bytes on InfiniBand/RoCE (the CM's
// 92 minus rdma_cm's own header); the request with its RingInfo must fit.
inline constexpr std::size_t kConnectPrivateDataBytes = 56;

}  // namespace fjord::rdma::wire
