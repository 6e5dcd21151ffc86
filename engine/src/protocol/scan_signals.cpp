// Encoders and validating decoders of the scan signals (API <-> TC <-> LDM).
#include <cstring>
#include <string>

#include "fjord/engine/protocol.h"
#include "signal_codec.h"

namespace fjord::engine::protocol {
using namespace detail;  // this library's own helpers (signal_codec.h)

// ---- scans --------------------------------------------------------------------------

SignalOut encode(const ScanReq& m) {
  using L = layout::ScanReq;
  return Out<L>(gsn::kScanReq)
      .w(L::kApiConn, m.api_conn)
      .tx(m.tx)
      .w(L::kScanId, m.scan_id)
      .w(L::kTableId, m.table_id)
      .w(L::kTableVersion, m.table_version)
      .w(L::kIndexId, m.index_id)
      .w(L::kFlags, m.flags)
      .w(L::kLock, static_cast<uint32_t>(m.lock))
      .w(L::kBatchRows, m.batch_rows)
      .section(L::kBounds, m.bounds)
      .section(L::kFilter, m.filter)
      .section(L::kColumns, m.columns)
      .done();
}

namespace {
Status check_scan_common(uint16_t number, uint32_t flags, uint32_t lock, uint32_t batch_rows,
                         std::span<const std::byte> columns) {
  if ((flags & ~kKnownScanFlags) != 0) return bad(number, "unknown scan flags " + std::to_string(flags));
  if (!in_range(lock, LockMode::kCommitted, LockMode::kExclusive))
    return bad(number, "lock mode " + std::to_string(lock));
  if (batch_rows == 0 || batch_rows > kMaxScanBatchRows)
    return bad(number,
               "batch of " + std::to_string(batch_rows) + " rows; accepted 1.." + std::to_string(kMaxScanBatchRows));
  if (columns.size() % 2 != 0) return bad(number, "column list of odd length");
  return Status::ok();
}
}  // namespace

Result<ScanReq> decode_scan_req(const Signal& s) {
  using L = layout::ScanReq;
  if (Status st = shape<L>(s, gsn::kScanReq); !st) return st;
  ScanReq m;
  m.api_conn = s.word(L::kApiConn);
  m.tx = tx_of<L>(s);
  m.scan_id = s.word(L::kScanId);
  m.table_id = s.word(L::kTableId);
  m.table_version = s.word(L::kTableVersion);
  m.index_id = s.word(L::kIndexId);
  m.flags = s.word(L::kFlags);
  m.batch_rows = s.word(L::kBatchRows);
  m.bounds = section_of<L>(s, L::kBounds);
  m.filter = section_of<L>(s, L::kFilter);
  m.columns = section_of<L>(s, L::kColumns);
  const uint32_t lock = s.word(L::kLock);
  if (Status st = check_scan_common(gsn::kScanReq, m.flags, lock, m.batch_rows, m.columns); !st) return st;
  m.lock = static_cast<LockMode>(lock);
  if (!(m.flags & kScanFlagOrderedIndex) && !m.bounds.empty()) return bad(gsn::kScanReq, "bounds on a table scan");
  return m;
}

SignalOut encode(const ScanFragReq& m) {
  using L = layout::ScanFragReq;
  return Out<L>(gsn::kScanFragReq)
      .w(L::kTcScan, m.tc_scan)
      .tx(m.tx)
      .w(L::kTableId, m.table_id)
      .w(L::kTableVersion, m.table_version)
      .w(L::kIndexId, m.index_id)
      .w(L::kFlags, m.flags)
      .w(L::kLock, static_cast<uint32_t>(m.lock))
      .w(L::kPartition, m.partition)
      .w(L::kBatchRows, m.batch_rows)
      .w(L::kApiNode, m.api_node)
      .w(L::kApiConn, m.api_conn)
      .w(L::kScanId, m.scan_id)
      .section(L::kBounds, m.bounds)
      .section(L::kFilter, m.filter)
      .section(L::kColumns, m.columns)
      .done();
}

Result<ScanFragReq> decode_scan_frag_req(const Signal& s) {
  using L = layout::ScanFragReq;
  if (Status st = shape<L>(s, gsn::kScanFragReq); !st) return st;
  ScanFragReq m;
  m.tc_scan = s.word(L::kTcScan);
  m.tx = tx_of<L>(s);
  m.table_id = s.word(L::kTableId);
  m.table_version = s.word(L::kTableVersion);
  m.index_id = s.word(L::kIndexId);
  m.flags = s.word(L::kFlags);
  m.partition = s.word(L::kPartition);
  m.batch_rows = s.word(L::kBatchRows);
  const uint32_t api_node = s.word(L::kApiNode);
  if (Status st = check_node(gsn::kScanFragReq, api_node); !st) return st;
  m.api_node = static_cast<NodeId>(api_node);
  m.api_conn = s.word(L::kApiConn);
  m.scan_id = s.word(L::kScanId);
  m.bounds = section_of<L>(s, L::kBounds);
  m.filter = section_of<L>(s, L::kFilter);
  m.columns = section_of<L>(s, L::kColumns);
  const uint32_t lock = s.word(L::kLock);
  if (Status st = check_scan_common(gsn::kScanFragReq, m.flags, lock, m.batch_rows, m.columns); !st) return st;
  m.lock = static_cast<LockMode>(lock);
  return m;
}

SignalOut encode(uint16_t number, const ScanFragNext& m) {
  FJORD_ASSERT(number == gsn::kScanFragNextReq || number == gsn::kScanFragCloseReq);
  using L = layout::ScanFragNext;
  return Out<L>(number).w(L::kTcScan, m.tc_scan).w(L::kPartition, m.partition).done();
}

Result<ScanFragNext> decode_scan_frag_next(const Signal& s) {
  using L = layout::ScanFragNext;
  const uint16_t n = s.number();
  if (n != gsn::kScanFragNextReq && n != gsn::kScanFragCloseReq) return bad(n, "not a scan continue/close");
  if (Status st = shape<L>(s, n); !st) return st;
  return ScanFragNext{s.word(L::kTcScan), s.word(L::kPartition)};
}

SignalOut encode(const ScanFragConf& m) {
  using L = layout::ScanFragConf;
  return Out<L>(gsn::kScanFragConf)
      .w(L::kTcScan, m.tc_scan)
      .w(L::kPartition, m.partition)
      .w(L::kRows, m.rows)
      .w(L::kMessages, m.messages)
      .w(L::kFinished, m.finished ? 1 : 0)
      .done();
}

Result<ScanFragConf> decode_scan_frag_conf(const Signal& s) {
  using L = layout::ScanFragConf;
  if (Status st = shape<L>(s, gsn::kScanFragConf); !st) return st;
  const uint32_t finished = s.word(L::kFinished);
  if (finished > 1) return bad(gsn::kScanFragConf, "finished flag " + std::to_string(finished));
  return ScanFragConf{s.word(L::kTcScan), s.word(L::kPartition), s.word(L::kRows), s.word(L::kMessages), finished == 1};
}

SignalOut encode(const ScanFragRef& m) {
  using L = layout::ScanFragRef;
  return Out<L>(gsn::kScanFragRef)
      .w(L::kTcScan, m.tc_scan)
      .w(L::kPartition, m.partition)
      .w(L::kError, static_cast<uint32_t>(m.error))
      .done();
}

Result<ScanFragRef> decode_scan_frag_ref(const Signal& s) {
  using L = layout::ScanFragRef;
  if (Status st = shape<L>(s, gsn::kScanFragRef); !st) return st;
  if (Status st = check_error_code(gsn::kScanFragRef, s.word(L::kError)); !st) return st;
  return ScanFragRef{s.word(L::kTcScan), s.word(L::kPartition), static_cast<ErrorCode>(s.word(L::kError))};
}

SignalOut encode(const ScanRows& m) {
  using L = layout::ScanRows;
  return Out<L>(gsn::kScanRows)
      .w(L::kApiConn, m.api_conn)
      .w(L::kScanId, m.scan_id)
      .w(L::kRows, m.rows)
      .section(L::kData, m.data)
      .done();
}

Result<ScanRows> decode_scan_rows(const Signal& s) {
  using L = layout::ScanRows;
  if (Status st = shape<L>(s, gsn::kScanRows); !st) return st;
  ScanRows m{s.word(L::kApiConn), s.word(L::kScanId), s.word(L::kRows), section_of<L>(s, L::kData)};
  // Each row: u32 length then that many bytes of value entries.
  std::span<const std::byte> rest = m.data;
  for (uint32_t i = 0; i < m.rows; ++i) {
    uint32_t len;
    if (rest.size() < 4) return bad(gsn::kScanRows, "row " + std::to_string(i) + " missing");
    std::memcpy(&len, rest.data(), 4);
    if (len > rest.size() - 4) return bad(gsn::kScanRows, "row " + std::to_string(i) + " longer than its section");
    rest = rest.subspan(4 + len);
  }
  if (!rest.empty()) return bad(gsn::kScanRows, "bytes after the last row");
  return m;
}

SignalOut encode(const ScanConf& m) {
  using L = layout::ScanConf;
  return Out<L>(gsn::kScanConf)
      .w(L::kApiConn, m.api_conn)
      .w(L::kScanId, m.scan_id)
      .w(L::kRows, m.rows)
      .w(L::kMessages, m.messages)
      .w(L::kFinished, m.finished ? 1 : 0)
      .done();
}

Result<ScanConf> decode_scan_conf(const Signal& s) {
  using L = layout::ScanConf;
  if (Status st = shape<L>(s, gsn::kScanConf); !st) return st;
  const uint32_t finished = s.word(L::kFinished);
  if (finished > 1) return bad(gsn::kScanConf, "finished flag " + std::to_string(finished));
  return ScanConf{s.word(L::kApiConn), s.word(L::kScanId), s.word(L::kRows), s.word(L::kMessages), finished == 1};
}

SignalOut encode(const ScanRef& m) {
  using L = layout::ScanRef;
  return Out<L>(gsn::kScanRef)
      .w(L::kApiConn, m.api_conn)
      .w(L::kScanId, m.scan_id)
      .w(L::kError, static_cast<uint32_t>(m.error))
      .done();
}

Result<ScanRef> decode_scan_ref(const Signal& s) {
  using L = layout::ScanRef;
  if (Status st = shape<L>(s, gsn::kScanRef); !st) return st;
  if (Status st = check_error_code(gsn::kScanRef, s.word(L::kError)); !st) return st;
  return ScanRef{s.word(L::kApiConn), s.word(L::kScanId), static_cast<ErrorCode>(s.word(L::kError))};
}

SignalOut encode(uint16_t number, const ScanNext& m) {
  FJORD_ASSERT(number == gsn::kScanNextReq || number == gsn::kScanCloseReq);
  using L = layout::ScanNext;
  return Out<L>(number).w(L::kApiConn, m.api_conn).w(L::kScanId, m.scan_id).done();
}

Result<ScanNext> decode_scan_next(const Signal& s) {
  using L = layout::ScanNext;
  const uint16_t n = s.number();
  if (n != gsn::kScanNextReq && n != gsn::kScanCloseReq) return bad(n, "not a scan next/close request");
  if (Status st = shape<L>(s, n); !st) return st;
  return ScanNext{s.word(L::kApiConn), s.word(L::kScanId)};
}

}  // namespace fjord::engine::protocol
