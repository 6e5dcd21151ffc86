// The access methods of NDB's testReadPerf, measured through the
// API against the access table (access_table.h), in microseconds per row:
//
//   serial pk      one primary-key read per execute(Commit): start, read, execute, close
//   batched pk     K primary-key reads of distinct random rows defined, then one execute(Commit)
//   serial uk      one read through the unique index per execute(Commit)
//   batched uk     K unique-index reads, one execute(Commit)
//   indexed eq-bound  an ordered-index scan with lower = upper = x (inclusive), returning the one
//                  row: the set-up cost of a range scan (NDB's "scans returning a single record")
//   index range    an ordered-index scan over [x, x+K-1], returning K rows
//   full scan      a scan of the whole table
//   serial insert  one insert by primary key of a row beyond the loaded ones per execute(Commit); an
//                  untimed delete after each sample leaves the table as loaded
//   serial update  one update by primary key of a random row per execute(Commit), its filler
//                  written with the bytes it holds (so reads still check it)
//
// Each sample is one execute or one whole scan (open, read every row,
// close), timed with two clock reads around it; its time divided by the rows
// it returned is recorded in a Histogram (µs per row). Keys are uniformly
// random (xorshift, seeded); every returned row is checked (id, unique key,
// filler), and a missing or wrong row fails the method. A warm-up of
// discarded samples comes first. Reads return all four columns.
//
// Hot loops on the caller's (pinned) thread: the keys, rows and scan specs
// are built once, so a sample allocates nothing here (the API's own buffers
// are reused after their first growth).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "access_table.h"
#include "fjord/api/api.h"
#include "fjord/base/histogram.h"
#include "machine.h"
#include "progress.h"

namespace fjord::bench {

enum class AccessMethod : uint8_t {
  kSerialPk,
  kBatchedPk,
  kSerialUk,
  kBatchedUk,
  kIndexedEqBound,
  kIndexRange,
  kFullScan,
  kSerialInsert,
  kSerialUpdate,
};
inline constexpr std::array<AccessMethod, 9> kAccessMethods = {
    AccessMethod::kSerialPk,  AccessMethod::kBatchedPk,      AccessMethod::kSerialUk,
    AccessMethod::kBatchedUk, AccessMethod::kIndexedEqBound, AccessMethod::kIndexRange,
    AccessMethod::kFullScan,  AccessMethod::kSerialInsert,   AccessMethod::kSerialUpdate};

// "serial_pk", "batched_pk", ... (JSON and plot keys).
const char* access_method_key(AccessMethod method) noexcept;
// NDB's row names: "Serial pk access", ..., and ours for the full scan.
const char* access_method_label(AccessMethod method) noexcept;

// The reference figures printed beside ours: NDB's access-method table of
// 2004 from the MySQL Cluster manual's SCI Sockets page, µs per row over
// TCP/IP sockets and over SCI sockets. None for the writes, nor for the full scan (the page
// describes it but gives no figure).
inline constexpr const char* kReferenceSource = "MySQL Cluster manual, SCI Sockets page";
inline constexpr const char* kReferenceConditions =
    "2 data nodes on 2 dual-CPU AMD MP1900+ machines, batches of 20, TCP/IP sockets and SCI sockets";
struct ReferenceFigure {
  bool known = false;
  double tcp_us = 0;
  double sci_us = 0;
};
ReferenceFigure reference_figure(AccessMethod method) noexcept;

struct AccessPlan {
  uint64_t iterations = 10'000;  // samples per method (full scan: full_scans)
  uint64_t warmup = 1'000;
  uint64_t full_scans = 5;
  uint32_t batch = 20;                      // K
  uint64_t seed = 0x5eed;                   // key order
  uint64_t timeout_ns = 30'000'000'000ULL;  // one method gives up after this
};

struct MethodResult {
  AccessMethod method = AccessMethod::kSerialPk;
  Status status;         // why it failed (after some samples, maybe)
  uint64_t samples = 0;  // measured executes or scans
  uint64_t rows = 0;     // rows returned and checked in them
  uint32_t rows_per_sample = 0;
  uint64_t elapsed_ns = 0;
  Histogram per_row_ns;  // one value per sample: its time / its rows
  CpuUsage usage;        // of this thread while measuring
};

// Measures one method over `connection`.
MethodResult measure_access_method(api::Session& connection, const AccessTable& table, AccessMethod method,
                                   const AccessPlan& plan, Progress& progress);

// The rows a sample of `method` returns.
uint64_t rows_per_sample(AccessMethod method, uint32_t batch, uint64_t table_rows) noexcept;

}  // namespace fjord::bench
