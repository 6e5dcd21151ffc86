// The shared-memory transporter: links between processes on one host
// through two one-way rings in a memfd segment, with futex/eventfd wake-up
// and a Unix-socket life line (docs/shm.md).
//
// Programs call register_shm_transporter() once at start-up (single thread);
// everything else goes through the registry and the Transporter contract.
// Not on the hot path.
#pragma once

#include <cstdint>

#include "fjord/base/status.h"
#include "fjord/transport/registry.h"

namespace fjord::shm {

// Tunables of the data path, each with why it has its value.

// Empty receive polls between two life-line checks while busy polling: a
// poll(2) costs ~0.5 us, an empty poll ~20-50 ns, so this keeps the check
// under 1% of a polling thread while noticing a SIGKILLed peer within about
// a millisecond of polling.
inline constexpr uint32_t kLifeLineEmptyPolls = 4096;
// Refused reservations (peer ring full) between two life-line checks: a
// dead reader never frees space, so a pure sender notices death this way.
inline constexpr uint32_t kLifeLineFullReserves = 1024;
// Longest futex sleep before the life line is checked again: bounds how long
// a sleeping receiver takes to notice a SIGKILLed peer (no one wakes the
// futex then); NDB's receive threads wake every 10 ms too.
inline constexpr uint64_t kSleepSliceNs = 10'000'000;

Status register_shm_transporter(transport::TransporterRegistry& registry);

}  // namespace fjord::shm
