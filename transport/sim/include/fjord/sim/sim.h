// The simulated transporter: a deterministic, in-process link for tests.
//
// Both ends live in one process and rendezvous by the link's SimEndpoint in
// a process-wide table; the handshake runs check_request() on an in-memory
// HandshakeRequest, so rejections read exactly as on real media. Data moves
// through a mirrored ring per direction (zero copy, as SHM). Faults are
// injected at the flush, from a seeded PRNG, so the same Seed replays the
// same events: batches held back for up to DelayPolls receive() polls,
// flushes that move only part of the committed bytes (ShortWriteChance %),
// and links that drop (DisconnectChance per million flushes), with a down
// reason that names the seed. docs/sim.md has the details.
//
// Programs call register_sim_transporter() once at start-up (single
// thread). Not on the hot path.
#pragma once

#include "fjord/base/status.h"
#include "fjord/transport/registry.h"

namespace fjord::sim {

Status register_sim_transporter(transport::TransporterRegistry& registry);

}  // namespace fjord::sim
