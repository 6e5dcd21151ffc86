// TC: scan coordination. A scan runs on every partition of the table in
// parallel, in rounds: each partition's LDM sends up to batch_rows rows
// straight to the API and answers TC; when every partition answered, TC
// tells the API how many rows and messages the round carried. The API asks
// for the next round (ScanNextReq) or closes the scan (ScanCloseReq).
#include "fjord/base/log.h"
#include "tc_impl.h"

namespace fjord::engine {

using namespace protocol;

void TcBlock::Impl::scan_req(const Signal& s, BlockContext& c) {
  auto decoded = decode_scan_req(s);
  if (!decoded) {
    faults.refuse(s, decoded.status().message());
    bump(counters.refused_requests);
    using L = layout::ScanReq;
    if (s.word_count() > L::kScanId)
      send_out(c, api_address(s.sender_node), ScanRef{s.word(L::kApiConn), s.word(L::kScanId), ErrorCode::kBadRequest});
    return;
  }
  const ScanReq& req = *decoded;
  auto refuse = [&](ErrorCode error) {
    bump(counters.refused_requests);
    send_out(c, api_address(s.sender_node), ScanRef{req.api_conn, req.scan_id, error});
  };
  if (req.tx.value != 0 && req.tx.api_node() != s.sender_node) return refuse(ErrorCode::kBadRequest);
  const TcTable* t = table(req.table_id);
  if (!t) return refuse(ErrorCode::kNoSuchTable);
  if (t->def.version != req.table_version) return refuse(ErrorCode::kSchemaVersion);
  if (req.flags & kScanFlagOrderedIndex) {
    bool found = false;
    for (const IndexDef& index : t->def.indexes)
      found |= index.index_id == req.index_id && index.kind == IndexKind::kOrdered;
    if (!found) return refuse(ErrorCode::kNoSuchIndex);
  }
  if (req.lock != LockMode::kCommitted) return refuse(ErrorCode::kBadRequest);  // scans read committed rows
  if (c.pressure_to(s.sender_node) == transport::SendPressure::kOverload) return refuse(ErrorCode::kOverload);
  const uint32_t ref = scans.allocate();
  if (ref == kNoRecord) return refuse(ErrorCode::kTooManyScans);  // MaxNoOfConcurrentScans reached
  Scan& scan = scans[ref];
  scan.api_node = s.sender_node;
  scan.api_conn = req.api_conn;
  scan.scan_id = req.scan_id;
  scan.table = req.table_id;
  scan.partitions = t->def.partitions;
  scan.awaiting = scan.active = t->def.partitions;
  bump(counters.scans);
  ScanFragReq frag;
  frag.tc_scan = ref;
  frag.tx = req.tx;
  frag.table_id = req.table_id;
  frag.table_version = req.table_version;
  frag.index_id = req.index_id;
  frag.flags = req.flags;
  frag.lock = req.lock;
  frag.batch_rows = req.batch_rows;
  frag.api_node = s.sender_node;
  frag.api_conn = req.api_conn;
  frag.scan_id = req.scan_id;
  frag.bounds = req.bounds;
  frag.filter = req.filter;
  frag.columns = req.columns;
  for (uint32_t p = 0; p < scan.partitions; ++p) {
    scan.parts[p] = ScanPartition{false, true};
    frag.partition = p;
    send_out(c, ldm_address(c, ldm_of(p)), frag);
  }
}

void TcBlock::Impl::scan_next(const Signal& s, BlockContext& c) {
  auto m = decode_scan_next(s);
  if (!m) return;
  uint32_t ref = kNoRecord;
  for (uint32_t i = 0; i < scans.capacity() && ref == kNoRecord; ++i) {
    const uint32_t r = scans.ref_at(i);
    if (r != kNoRecord && scans[r].api_node == s.sender_node && scans[r].api_conn == m->api_conn &&
        scans[r].scan_id == m->scan_id)
      ref = r;
  }
  if (ref == kNoRecord) {
    // Finished or never started: closing it is already done; continuing is an error.
    if (s.number() == gsn::kScanCloseReq)
      send_out(c, api_address(s.sender_node), ScanConf{m->api_conn, m->scan_id, 0, 0, true});
    else
      send_out(c, api_address(s.sender_node), ScanRef{m->api_conn, m->scan_id, ErrorCode::kScanError});
    return;
  }
  Scan& scan = scans[ref];
  if (scan.awaiting > 0) {
    // A round is in progress. A close means the API gave the round up (its
    // request timeout passed): remember it, so that the round's answers
    // close the rest and free the records (NDB's SCAN_NEXTREQ close flag).
    // Ignoring it would keep them until the API disconnects. Another next
    // breaks the protocol.
    if (s.number() == gsn::kScanCloseReq)
      scan.close_requested = true;
    else
      faults.refuse(s, "a scan continued while its round runs");
    return;
  }
  if (s.number() == gsn::kScanCloseReq) scan.closing = true;
  const uint16_t number = scan.closing ? gsn::kScanFragCloseReq : gsn::kScanFragNextReq;
  scan.rows = scan.messages = 0;
  for (uint32_t p = 0; p < scan.partitions; ++p) {
    if (scan.parts[p].finished) continue;
    scan.parts[p].awaiting = true;
    ++scan.awaiting;
    const SignalOut out = encode(number, ScanFragNext{ref, p});
    c.send(ldm_address(c, ldm_of(p)), out.number, out.data());
  }
  if (scan.awaiting == 0) scan_round_done(ref, c);
}

void TcBlock::Impl::scan_frag_conf(const Signal& s, BlockContext& c) {
  if (!from_own_ldm(s, c)) return;
  auto conf = decode_scan_frag_conf(s);
  FJORD_ASSERT_MSG(conf.is_ok(), "LDM sent a malformed ScanFragConf");
  if (!scans.valid(conf->tc_scan)) return;
  Scan& scan = scans[conf->tc_scan];
  FJORD_ASSERT(conf->partition < scan.partitions);
  FJORD_ASSERT(scan.parts[conf->partition].awaiting);
  ScanPartition& part = scan.parts[conf->partition];
  part.awaiting = false;
  --scan.awaiting;
  scan.rows += conf->rows;
  scan.messages += conf->messages;
  if (conf->finished && !part.finished) {
    part.finished = true;
    --scan.active;
  }
  if (scan.awaiting == 0) scan_round_done(conf->tc_scan, c);
}

void TcBlock::Impl::scan_frag_ref(const Signal& s, BlockContext& c) {
  if (!from_own_ldm(s, c)) return;
  auto ref = decode_scan_frag_ref(s);
  FJORD_ASSERT_MSG(ref.is_ok(), "LDM sent a malformed ScanFragRef");
  if (!scans.valid(ref->tc_scan)) return;
  Scan& scan = scans[ref->tc_scan];
  FJORD_ASSERT_MSG(ref->partition < scan.partitions, "LDM refused a scan of a partition the table lacks");
  FJORD_ASSERT_MSG(scan.parts[ref->partition].awaiting, "LDM refused a scan round it was not asked for");
  ScanPartition& part = scan.parts[ref->partition];
  part.awaiting = false;
  if (!part.finished) {
    part.finished = true;
    --scan.active;
  }
  --scan.awaiting;
  if (!scan.failed) {
    scan.failed = true;
    scan.error = ref->error;
  }
  if (scan.awaiting == 0) scan_round_done(ref->tc_scan, c);
}

void TcBlock::Impl::scan_round_done(uint32_t ref, BlockContext& c) {
  Scan& scan = scans[ref];
  if (scan.active > 0 && (scan.failed || scan.api_node == kNoNode || scan.close_requested)) {
    // Close what is still open, then report the failure, or to a close that
    // came during the round, the end of the scan. rows and messages go on
    // counting the given-up round's, so that the API knows what is still
    // on its way for the scan.
    scan.closing = true;
    for (uint32_t p = 0; p < scan.partitions; ++p) {
      if (scan.parts[p].finished) continue;
      scan.parts[p].awaiting = true;
      ++scan.awaiting;
      const SignalOut out = encode(gsn::kScanFragCloseReq, ScanFragNext{ref, p});
      c.send(ldm_address(c, ldm_of(p)), out.number, out.data());
    }
    return;
  }
  const bool finished = scan.active == 0;
  if (scan.api_node != kNoNode) {
    if (scan.failed)
      send_out(c, api_address(scan.api_node), ScanRef{scan.api_conn, scan.scan_id, scan.error});
    else
      send_out(c, api_address(scan.api_node),
               ScanConf{scan.api_conn, scan.scan_id, scan.rows, scan.messages, finished});
  }
  if (finished || scan.failed) scans.release(ref);
}

void TcBlock::Impl::scans_of_node_gone(NodeId node, BlockContext& c) {
  for (uint32_t i = 0; i < scans.capacity(); ++i) {
    const uint32_t ref = scans.ref_at(i);
    if (ref == kNoRecord || scans[ref].api_node != node) continue;
    scans[ref].api_node = kNoNode;  // nobody to answer: close it quietly
    // A round in progress closes the rest when it completes; otherwise now.
    if (scans[ref].awaiting == 0) scan_round_done(ref, c);
  }
}

}  // namespace fjord::engine
