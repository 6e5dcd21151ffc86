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
#include "fjord/base/tuning.h"
#include "fjord/transport/registry.h"

namespace fjord::shm {

// Tunables of the data path (why each has its value: fjord/base/tuning.h).
// Empty receive polls between two life-line checks while busy polling.
inline constexpr uint32_t kLifeLineEmptyPolls = tuning::kShmLifeLineEmptyPolls;
// Refused reservations (peer ring full) between two life-line checks.
inline constexpr uint32_t kLifeLineFullReserves = tuning::kShmLifeLineFullReserves;
// Longest futex sleep before the life line is checked again.
inline constexpr uint64_t kSleepSliceNs = tuning::kShmSleepSliceNs;

Status register_shm_transporter(transport::TransporterRegistry& registry);

}  // namespace fjord::shm
