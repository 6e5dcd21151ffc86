// The hot-path knobs of the data node runtime, the rings and the
// transporters, in one place, each with why it has its value.
//
// A knob here trades latency, throughput and memory; changing one changes
// speed, never meaning. Protocol and format limits (frame sizes, layout
// versions, envelope widths) are not knobs and live with their formats.
// The static_asserts at the end tie related limits together.
//
// Any thread, any layer; compile-time constants only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>

#include "fjord/base/cache.h"

namespace fjord::tuning {

// ---- rings: the hot window (fjord/base/hot_window.h) ----------------------

// A job buffer producer goes back to its ring's start this far into a lap
// while the consumer keeps up: both cores then reuse lines still in their
// caches (a whole 1 MB lap would have left them) and the window stays well
// inside a core's L2.
inline constexpr std::size_t kJobBufferHotWindowBytes = 64 << 10;
// The SHM ring's window: larger than the job buffer's because one SHM batch
// carries many frames (up to a whole peer flush), so a window must hold a
// few of the largest batches.
inline constexpr std::size_t kShmHotWindowBytes = 128 << 10;
// The TCP rings' window: the send and receive rings are private and go back
// only when empty, so a window need hold only what one send()/recv() moves.
inline constexpr std::size_t kTcpHotWindowBytes = 64 << 10;
// A ring under this many windows never goes back early: the gap it leaves
// would take a large share of its capacity from a consumer that falls behind.
inline constexpr uint64_t kHotWindowMinLaps = 4;
// The producer goes back only while at most window / kHotWindowSlackDivisor
// bytes are unread: then everything unread lies past the lap's first bytes,
// so the start of the ring it goes back to is free.
inline constexpr uint64_t kHotWindowSlackDivisor = 4;

// ---- the SHM ring (fjord/shm/spsc_ring.h) ----------------------------------

// Bytes past the next envelope whose lines the producer takes ahead of use
// (one store per line): two lines cover the next small message; more only
// adds stores to every publish.
inline constexpr std::size_t kShmZeroAheadBytes = 2 * kCacheLineBytes;
// Lines of a newly seen batch the consumer asks for at once: the stream
// prefetcher does not fetch lines held by the other core in time, and 64
// lines cover the answer to a batch of 20 reads of 100-byte rows.
inline constexpr std::size_t kShmPrefetchBatchBytes = 64 * kCacheLineBytes;
// Empty receive polls between two life-line checks while busy polling: a
// poll(2) costs far more than an empty poll, so this keeps the check under
// 1% of a polling thread while noticing a SIGKILLed peer within about a
// millisecond of polling.
inline constexpr uint32_t kShmLifeLineEmptyPolls = 4096;
// Refused reservations (peer ring full) between two life-line checks: a
// dead reader never frees space, so a pure sender notices death this way.
inline constexpr uint32_t kShmLifeLineFullReserves = 1024;
// Longest futex sleep before the life line is checked again: bounds how long
// a sleeping receiver takes to notice a SIGKILLed peer (no one wakes the
// futex then); NDB's receive threads wake every 10 ms too.
inline constexpr uint64_t kShmSleepSliceNs = 10'000'000;

// ---- the data node runtime (engine/src/runtime) ------------------------------

// Default bytes of the job buffer between two threads: room for thousands
// of signals, so a burst spills only when a consumer stalls.
inline constexpr std::size_t kJobBufferBytes = 1 << 20;
// Default bytes of a thread's queue to itself: a batch sent within one
// thread (TC -> LDM -> TC) runs from it in the same loop, so bursts are
// larger than between threads.
inline constexpr std::size_t kLocalQueueBytes = 4 << 20;
// The smallest job buffer: one window, so any buffer holds the largest frame
// many times over.
inline constexpr std::size_t kJobBufferMinBytes = 64 << 10;
// Default bytes of a thread's spill (signals whose destination had no room).
// Executing stops at a quarter full, so this bounds one batch's output.
inline constexpr std::size_t kSpillBytes = 4 << 20;
// Default signals executed per loop before sending: large enough that a
// loop's fixed cost (clock read, flushes, wake-ups) is shared by many
// signals, small enough that replies leave without waiting long.
inline constexpr uint32_t kBatchSignals = 256;
// Signals per batch for each SchedulerResponsiveness level 0..10 (NDB's
// balance of throughput against response time): the default level 5 is
// kBatchSignals; each level up sends sooner, each level down shares a
// loop's fixed cost among more signals.
inline constexpr uint32_t kBatchSignalsByResponsiveness[] = {1024, 768, 512, 384, 320, 256, 192, 128, 96, 64, 32};
inline constexpr uint32_t kDefaultResponsiveness = 5;
// Default fill (percent) of a job buffer above which receive threads stop
// reading a link: leaves room for the node's own traffic.
inline constexpr uint32_t kCongestionPercent = 60;
// Default pending delayed signals per thread (the timer heap's fixed size).
inline constexpr uint32_t kTimerCapacity = 4096;
// Frames one link poll moves into job buffers at most: other links and the
// thread's own steps get their turn.
inline constexpr uint32_t kMaxFramesPerLinkPoll = 512;
// Longest sleep of an idle thread: it wakes at least this often to see a stop.
inline constexpr uint64_t kMaxSleepNs = 100'000'000;
// An idle thread's spin: a pause every kSpinPollsPerPause polls (kind to an
// SMT sibling), a clock read every kSpinPollsPerClockRead (a clock read
// costs several polls of every input), its poll count published every
// kSpinPollsPerPublish (a spin phase may last long). Powers of two.
inline constexpr uint64_t kSpinPollsPerPause = 8;
inline constexpr uint64_t kSpinPollsPerClockRead = 64;
inline constexpr uint64_t kSpinPollsPerPublish = 4096;
// Signals a thread decodes ahead for a block that prefetches (Block::prefetch,
// the LDM's key lookups): enough misses in flight to hide one memory
// latency behind the others, few enough that stage 0's lines are still in
// L1 when stage 1 reads them. TC packs a window's notes in 3 bits.
inline constexpr uint32_t kPrefetchWindow = 8;

// ---- how the knobs relate ----------------------------------------------------

static_assert(kHotWindowSlackDivisor >= 2, "going back needs the lap's first bytes free");
static_assert(kJobBufferBytes >= kHotWindowMinLaps * kJobBufferHotWindowBytes,
              "a default job buffer keeps to its hot window");
static_assert(kLocalQueueBytes >= kJobBufferBytes, "a thread's queue to itself takes its larger bursts");
static_assert(kJobBufferMinBytes >= kJobBufferHotWindowBytes / kHotWindowSlackDivisor);
static_assert(kShmHotWindowBytes % kCacheLineBytes == 0, "SHM batches start on cache lines");
static_assert(kShmZeroAheadBytes % kCacheLineBytes == 0, "zeroed ahead by whole lines");
static_assert(kShmPrefetchBatchBytes % kCacheLineBytes == 0, "prefetched by whole lines");
static_assert(kShmPrefetchBatchBytes <= kShmHotWindowBytes / kHotWindowSlackDivisor);
static_assert(kCongestionPercent > 0);
static_assert(kCongestionPercent < 100, "receive threads leave room for local traffic");
static_assert((kSpinPollsPerPause & (kSpinPollsPerPause - 1)) == 0, "a mask, not a division");
static_assert((kSpinPollsPerClockRead & (kSpinPollsPerClockRead - 1)) == 0, "a mask, not a division");
static_assert((kSpinPollsPerPublish & (kSpinPollsPerPublish - 1)) == 0, "a mask, not a division");
static_assert(kSpinPollsPerPause <= kSpinPollsPerClockRead);
static_assert(kSpinPollsPerClockRead <= kSpinPollsPerPublish);
static_assert(kPrefetchWindow >= 2, "a window overlaps at least two lookups");
static_assert(kPrefetchWindow <= kBatchSignals, "a window lies within one batch");
static_assert(kBatchSignalsByResponsiveness[kDefaultResponsiveness] == kBatchSignals, "level 5 is the default");
static_assert(kBatchSignalsByResponsiveness[10] >= kPrefetchWindow, "a window lies within the smallest batch");
static_assert(std::size(kBatchSignalsByResponsiveness) == 11, "NDB's levels 0..10");

}  // namespace fjord::tuning
