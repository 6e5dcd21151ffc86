// Streaming over one connected link: the driver packs messages as fast as the
// link accepts them (batches of frames per flush), the responder copies each
// payload out and checks the sequence; at the end the responder reports what
// it received, and the driver times first send to that report.
//
// The driver thread owns the transporter while this runs. Hot path: the send
// loop allocates nothing.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fjord/base/status.h"
#include "fjord/transport/transporter.h"
#include "options.h"
#include "progress.h"
#include "wire.h"

namespace fjord::bench {

struct StreamParams {
  std::size_t payload_bytes = 4096;
  uint64_t messages = 100'000;
  uint64_t warmup = 10'000;  // a first, discarded stream of this many messages
  uint32_t batch = 32;       // frames packed per reserve/commit/flush
  PollMode poll = PollMode::kBusy;
  uint64_t timeout_ns = 10'000'000'000ULL;  // without progress
};

struct StreamResult {
  uint64_t messages = 0;
  std::size_t payload_bytes = 0;  // per message
  std::size_t frame_bytes = 0;    // per message, on the wire
  uint64_t elapsed_ns = 0;        // first reserve to the responder's report
  uint64_t full_waits = 0;        // reserve() found the send memory full (back-pressure)
  StreamReport report;            // what the responder counted
};

// Errors: the link went down, no progress within timeout_ns, or the
// responder's count differs from what was sent (the message says which).
Result<StreamResult> run_stream(transport::Transporter& t, const StreamParams& params, Progress& progress);

}  // namespace fjord::bench
