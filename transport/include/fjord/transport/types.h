// Small vocabulary types shared by every layer. Any thread.
#pragma once

#include <cstdint>

namespace fjord {

// Node ids follow NDB: 1..255, 0 means "none".
using NodeId = uint16_t;
inline constexpr NodeId kNoNode = 0;
inline constexpr NodeId kMaxNodeId = 255;

// A block instance address inside a node (NDB's BlockReference without the
// node, which is implied by the link a frame travels on).
struct BlockRef {
  uint16_t block = 0;
  uint16_t instance = 0;
  friend bool operator==(const BlockRef&, const BlockRef&) = default;
};

// Absolute monotonic deadline in nanoseconds (see fjord/base/clock.h).
using DeadlineNs = uint64_t;

}  // namespace fjord
