// The seed inputs of fuzz_node (included by fuzz_node.cpp, after its
// harness): requests as the API sends them to TC and DICT, and as TC and
// DICT send them to LDM and TC, each from the protocol's encoders, on the
// node's tables as fuzz_node creates them.
#pragma once

namespace {

constexpr uint8_t kToTc = 0, kToDict = 1, kToLdm = 2;

TxId fuzz_tx(NodeId node, uint32_t n) { return {uint64_t{node} << 48 | n}; }

api::Row play_row(uint64_t id) {
  return api::Row().set(0, id).set(1, "p" + std::to_string(id) + "@x").set(2, static_cast<int64_t>(id));
}

TcKeyReq key_req(OpType op, const api::Row& key, const api::Row& values, uint32_t flags, uint32_t n) {
  TcKeyReq r;
  r.api_conn = 7;
  r.tx = fuzz_tx(kFuzzApi, n);
  r.table_id = g->play.table_id;
  r.table_version = g->play.version;
  r.op = op;
  r.lock = op == OpType::kRead ? LockMode::kCommitted : LockMode::kExclusive;
  r.flags = flags;
  r.batch_ops = (flags & kFlagExecute) != 0 ? 1 : 0;
  r.key = key.entries();
  r.values = values.entries();
  return r;
}

constexpr uint32_t kOneShot = kFlagStartTx | kFlagExecute | kFlagCommit;

void api_key_seeds(const std::string& dir) {
  const api::Row key = api::Row().set(0, uint64_t{3});
  const api::Row fresh = play_row(1000), fresh_key = api::Row().set(0, uint64_t{1000});
  const api::Row change = api::Row().set(2, int64_t{-5});
  const std::pair<const char*, TcKeyReq> one_shot[] = {
      {"api_read", key_req(OpType::kRead, key, {}, kOneShot, 1)},
      {"api_insert", key_req(OpType::kInsert, fresh_key, fresh, kOneShot, 2)},
      {"api_update", key_req(OpType::kUpdate, key, change, kOneShot, 3)},
      {"api_write", key_req(OpType::kWrite, fresh_key, fresh, kOneShot, 4)},
      {"api_delete", key_req(OpType::kDelete, key, {}, kOneShot, 5)},
  };
  for (const auto& [name, req] : one_shot) {
    SeedWriter w;
    w.signal(0, encode(req), kToTc);
    write_seed(dir, name, w);
  }
  // Open, then commit or roll back by TcTxMessage.
  for (uint16_t end : {gsn::kTcCommitReq, gsn::kTcRollbackReq}) {
    SeedWriter w;
    TcKeyReq req = key_req(OpType::kUpdate, key, change, kFlagStartTx | kFlagExecute, 6);
    req.lock = LockMode::kExclusive;
    w.signal(0, encode(req), kToTc);
    w.signal(0, encode(TcTxMessage{end, req.api_conn, req.tx}), kToTc);
    write_seed(dir, end == gsn::kTcCommitReq ? "api_commit" : "api_rollback", w);
  }
  // By unique key: the email of row 3.
  SeedWriter w;
  const api::Row email = api::Row().set(1, "p3@x");
  TcKeyReq req = key_req(OpType::kRead, email, {}, kOneShot | kFlagViaUnique, 7);
  req.index_id = g->play.indexes[0].index_id;
  w.signal(0, encode(req), kToTc);
  write_seed(dir, "api_read_unique", w);
}

void api_train_seed(const std::string& dir) {
  const api::Row k3 = api::Row().set(0, uint64_t{3}), k4 = api::Row().set(0, uint64_t{4});
  const api::Row fresh = play_row(1001), change = api::Row().set(2, int64_t{9});
  const api::Row fresh_key = api::Row().set(0, uint64_t{1001});
  const TcKeyReq records[] = {key_req(OpType::kRead, k3, {}, kFlagStartTx, 8),
                              key_req(OpType::kInsert, fresh_key, fresh, 0, 8),
                              key_req(OpType::kUpdate, k4, change, kFlagExecute | kFlagCommit, 8)};
  std::vector<std::byte> bytes;
  uint32_t index = 0;
  for (TcKeyReq r : records) {
    r.op_index = index++;
    r.batch_ops = (r.flags & kFlagExecute) != 0 ? 3 : 0;
    const std::size_t at = bytes.size();
    bytes.resize(at + tc_key_train_record_bytes(r));
    (void)put_tc_key_train_record(std::span(bytes).subspan(at), r);
  }
  SeedWriter w;
  w.signal(0, encode(TcKeyTrain{7, records[0].tx, 3, bytes}), kToTc);
  write_seed(dir, "api_train", w);
}

void api_scan_and_schema_seeds(const std::string& dir) {
  ScanReq scan;
  scan.api_conn = 9;
  scan.tx = fuzz_tx(kFuzzApi, 20);
  scan.scan_id = 1;
  scan.table_id = g->play.table_id;
  scan.table_version = g->play.version;
  scan.batch_rows = 4;
  SeedWriter w;
  w.signal(0, encode(scan), kToTc);
  w.signal(0, encode(gsn::kScanNextReq, ScanNext{9, 1}), kToTc);
  w.signal(0, encode(gsn::kScanCloseReq, ScanNext{9, 1}), kToTc);
  write_seed(dir, "api_scan", w);
  scan.flags = kScanFlagOrderedIndex;
  scan.index_id = g->play.indexes[1].index_id;
  scan.lock = LockMode::kShared;
  SeedWriter o;
  o.signal(0, encode(scan), kToTc);
  write_seed(dir, "api_scan_ordered", o);

  const std::string name = kPlayName;
  const std::vector<std::byte> table = encode_table(table_shape("fuzz_new0"));
  SeedWriter s;
  s.signal(0, encode(ApiRegReq{1}), kToDict);
  s.signal(0, encode(SchemaMessage{gsn::kGetTableReq, 2, std::as_bytes(std::span(name))}), kToDict);
  s.signal(0, encode(SchemaMessage{gsn::kCreateTableReq, 3, table}), kToDict);
  const std::string drop = "fuzz_new0";
  s.signal(0, encode(SchemaMessage{gsn::kDropTableReq, 4, std::as_bytes(std::span(drop))}), kToDict);
  write_seed(dir, "api_schema", s);
}

// An LqhKeyReq on the play table as TC routes it.
LqhKeyReq lqh_req(OpType op, const api::Row& key, const api::Row& values, uint32_t n) {
  LqhKeyReq r;
  r.tc_op = n;
  r.tx = fuzz_tx(kFuzzData, n);
  r.table_id = g->play.table_id;
  r.table_version = g->play.version;
  r.op = op;
  r.lock = op == OpType::kRead ? LockMode::kShared : LockMode::kExclusive;
  r.result_to = ResultTo::kTc;
  r.api_node = kFuzzData;
  r.key = key.entries();
  r.values = values.entries();
  std::byte encoded[kMaxKeyBytes];
  const auto length = encode_key_section(KeyCodec::for_primary_key(g->play), r.key, encoded);
  if (!length) fail("seed key: " + length.status().message());
  const uint64_t hash = hash_key(encoded, length.value());
  r.key_hash = static_cast<uint32_t>(hash);
  r.partition = partition_of(hash, g->play.partitions);
  return r;
}

void data_key_seeds(const std::string& dir) {
  const api::Row key = api::Row().set(0, uint64_t{5});
  const api::Row fresh = play_row(2000), change = api::Row().set(2, int64_t{11});
  const api::Row fresh_key = api::Row().set(0, uint64_t{2000});
  struct {
    const char* name;
    LqhKeyReq req;
    uint16_t end;
  } const seeds[] = {
      {"data_lqh_read", lqh_req(OpType::kRead, key, {}, 1), gsn::kLqhAbortReq},
      {"data_lqh_insert", lqh_req(OpType::kInsert, fresh_key, fresh, 2), gsn::kLqhCommitReq},
      {"data_lqh_update", lqh_req(OpType::kUpdate, key, change, 3), gsn::kLqhAbortReq},
      {"data_lqh_delete", lqh_req(OpType::kDelete, key, {}, 4), gsn::kLqhCommitReq},
  };
  for (const auto& s : seeds) {
    SeedWriter w;
    w.signal(1, encode(s.req), kToLdm);
    w.signal(1, encode(s.end, LqhTxReq{s.req.tx, 0}), kToLdm);
    write_seed(dir, s.name, w);
  }
  // Answers TC never asked for.
  SeedWriter w;
  w.signal(1, encode(LqhKeyConf{5, fuzz_tx(kFuzzData, 9), false, {}, {}, {}}), kToTc);
  w.signal(1, encode(LqhKeyRef{5, fuzz_tx(kFuzzData, 9), ErrorCode::kNoSuchRow}), kToTc);
  w.signal(1, encode(gsn::kLqhCommitConf, LqhTxConf{fuzz_tx(kFuzzData, 9), 0, 1}), kToTc);
  w.signal(1, encode(ScanFragConf{3, 0, 0, 0, true}), kToTc);
  w.signal(1, encode(ScanFragRef{3, 0, ErrorCode::kScanError}), kToTc);
  w.signal(1, encode(SchemaInstallConf{1}), kToDict);
  write_seed(dir, "data_stray_answers", w);
  // TC's own timer signal (runtime_signals::kFirstUser), from node 2.
  SeedWriter timer;
  SignalOut tick;
  tick.number = runtime_signals::kFirstUser;
  for (int i = 0; i < 8; ++i) timer.raw(tick, kToTc);
  write_seed(dir, "data_tc_timer", timer);
  // A transaction id of all ones, and results sent to this very node.
  SeedWriter odd;
  LqhKeyReq all_ones = lqh_req(OpType::kInsert, fresh_key, fresh, 5);
  all_ones.tx = TxId{UINT64_MAX};
  odd.signal(1, encode(all_ones), kToLdm);
  LqhKeyReq to_self = lqh_req(OpType::kRead, key, {}, 6);
  to_self.lock = LockMode::kCommitted;
  to_self.result_to = ResultTo::kApi;
  to_self.api_node = kNode;
  odd.signal(1, encode(to_self), kToLdm);
  write_seed(dir, "data_lqh_odd_addresses", odd);
}

void data_scan_and_schema_seeds(const std::string& dir) {
  ScanFragReq scan;
  scan.tc_scan = 1;
  scan.tx = fuzz_tx(kFuzzData, 30);
  scan.table_id = g->play.table_id;
  scan.table_version = g->play.version;
  scan.batch_rows = 4;
  scan.api_node = kFuzzData;
  scan.api_conn = 3;
  scan.scan_id = 1;
  SeedWriter w;
  w.signal(1, encode(scan), kToLdm);
  w.signal(1, encode(gsn::kScanFragNextReq, ScanFragNext{1, 0}), kToLdm);
  w.signal(1, encode(gsn::kScanFragCloseReq, ScanFragNext{1, 0}), kToLdm);
  write_seed(dir, "data_scan_frag", w);

  TableDef t = table_shape("fuzz_installed");
  t.table_id = kFirstInstallId;
  t.version = 60;
  t.indexes.clear();
  const std::vector<std::byte> bytes = encode_table(t);
  SeedWriter s;
  for (uint8_t to : {kToTc, kToLdm}) s.signal(1, encode(SchemaInstall{1, kFirstInstallId, false, bytes}), to);
  for (uint8_t to : {kToTc, kToLdm}) s.signal(1, encode(SchemaInstall{2, kFirstInstallId, true, {}}), to);
  write_seed(dir, "data_schema_install", s);
  SeedWriter bad;
  bad.signal(1, encode(SchemaInstall{3, kFirstInstallId + 1, false, {}}), kToTc);
  bad.signal(1, encode(SchemaInstall{3, kFirstInstallId + 1, false, {}}), kToLdm);
  write_seed(dir, "data_schema_install_empty", bad);
}

void write_seeds(const std::string& dir) {
  api_key_seeds(dir);
  api_train_seed(dir);
  api_scan_and_schema_seeds(dir);
  data_key_seeds(dir);
  data_scan_and_schema_seeds(dir);
}

}  // namespace
