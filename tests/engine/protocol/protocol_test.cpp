// The engine protocol: every message round-trips, and malformed ones are
// refused with a message naming what is wrong.
#include "fjord/engine/protocol.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

namespace fjord::engine::protocol {
namespace {

// Packs a SignalOut into a frame and decodes it back into a Signal, as a
// receiving block would see it.
struct Wire {
  std::vector<std::byte> buffer = std::vector<std::byte>(frame::kMaxFrameBytes);
  Signal signal;
  const Signal& carry(const SignalOut& out, NodeId from = 7) {
    const std::size_t n =
        frame::pack_frame(buffer, {out.number, {2, 0}, {10, 0}, 0}, out.data(), out.section_list(), false);
    EXPECT_GT(n, 0u);
    signal.sender_node = from;
    frame::decode_validated({buffer.data(), n}, signal.view);
    return signal;
  }
  // A signal with arbitrary words and sections.
  const Signal& raw(uint16_t number, std::vector<uint32_t> words, std::vector<std::vector<std::byte>> sections = {}) {
    std::vector<std::span<const std::byte>> spans(sections.begin(), sections.end());
    const std::size_t n = frame::pack_frame(buffer, {number, {2, 0}, {10, 0}, 0}, words, spans, false);
    EXPECT_GT(n, 0u);
    frame::decode_validated({buffer.data(), n}, signal.view);
    return signal;
  }
};

std::vector<std::byte> values_of(std::initializer_list<std::pair<uint16_t, std::string>> entries) {
  std::vector<std::byte> out(1024);
  std::size_t at = 0;
  for (const auto& [column, text] : entries)
    at += put_value(std::span(out).subspan(at), column, false, std::as_bytes(std::span(text.data(), text.size())));
  out.resize(at);
  return out;
}

TEST(ProtocolTest, TcKeyReqRoundTrips) {
  const auto key = values_of({{0, "abcd"}});
  const auto vals = values_of({{1, "hello"}, {2, "x"}});
  const uint16_t cols[] = {1, 2};
  TcKeyReq m;
  m.api_conn = 5;
  m.tx = TxId{(uint64_t{3} << 48) | 99};
  m.table_id = 11;
  m.table_version = 2;
  m.op = OpType::kUpdate;
  m.lock = LockMode::kExclusive;
  m.flags = kFlagStartTx | kFlagExecute | kFlagCommit;
  m.op_index = 4;
  m.batch_ops = 20;
  m.key = key;
  m.values = vals;
  m.columns = std::as_bytes(std::span(cols));
  Wire w;
  auto back = decode_tc_key_req(w.carry(encode(m)));
  ASSERT_TRUE(back) << back.status().to_string();
  EXPECT_EQ(back->api_conn, 5u);
  EXPECT_EQ(back->tx, m.tx);
  EXPECT_EQ(back->tx.api_node(), 3);
  EXPECT_EQ(back->op, OpType::kUpdate);
  EXPECT_EQ(back->lock, LockMode::kExclusive);
  EXPECT_EQ(back->flags, m.flags);
  EXPECT_EQ(back->batch_ops, 20u);
  EXPECT_EQ(back->values.size(), vals.size());
  ValueCursor c(back->values);
  ValueEntry e;
  ASSERT_TRUE(c.next(e));
  EXPECT_EQ(e.column, 1);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(e.bytes.data()), e.bytes.size()), "hello");
  ASSERT_TRUE(c.next(e));
  EXPECT_FALSE(c.next(e));
  EXPECT_TRUE(c.error().is_ok());
}

TEST(ProtocolTest, TcKeyReqRefusesMalformedRequests) {
  Wire w;
  const auto key = values_of({{0, "k"}});
  auto err = [&](std::vector<uint32_t> words, std::vector<std::vector<std::byte>> sections = {}) {
    if (sections.empty()) sections = {key};
    auto r = decode_tc_key_req(w.raw(gsn::kTcKeyReq, std::move(words), std::move(sections)));
    return r.is_ok() ? std::string("accepted") : r.status().message();
  };
  EXPECT_EQ(err({1, 2, 3}), "signal 200: has 3 data words, expected 10");
  EXPECT_EQ(err({1, 0, 0, 1, 1, 9, 0, 0, 0, 0}), "signal 200: operation type 9");
  EXPECT_EQ(err({1, 0, 0, 1, 1, 1 | 3 << 8, 0, 0, 0, 0}), "signal 200: lock mode 3");
  EXPECT_EQ(err({1, 0, 0, 1, 1, 1, 0x40, 0, 0, 0}), "signal 200: unknown flags 64");
  EXPECT_EQ(err({1, 0, 0, 1, 1, 1, kFlagCommit, 0, 0, 0}), "signal 200: commit flag without execute");
  EXPECT_EQ(err({1, 0, 0, 1, 1, 2, kFlagViaUnique, 0, 0, 0}), "signal 200: unique-key access is read-only");
  EXPECT_EQ(err({1, 0, 0, 1, 1, 1, 0, 0, 0, 0}, {std::vector<std::byte>{}}), "signal 200: no key values");
  EXPECT_EQ(err({1, 0, 0, 1, 1, 5, 0, 0, 0, 0}, {key, key}), "signal 200: delete carries values");
  EXPECT_EQ(err({1, 0, 0, 1, 1, 1 | 1u << 16, 0, 0, 0, 0}), "signal 200: reserved operation bits set");
  EXPECT_EQ(decode_tc_key_conf(w.raw(gsn::kTcKeyConf, {1, 0, 0, 1, 1, 1}, {key})).status().message(),
            "signal " + std::to_string(gsn::kTcKeyConf) + ": has 1 sections, at most 0 allowed");
  // Both forms of the decoder say the same; another signal is not a TcKeyReq.
  TcKeyReq into;
  EXPECT_EQ(decode_tc_key_req(w.raw(gsn::kTcKeyReq, {1, 2, 3}, {key}), into).message(),
            "signal 200: has 3 data words, expected 10");
  EXPECT_EQ(decode_tc_key_req(w.raw(gsn::kTcKeyConf, {1, 0, 0, 1, 1, 1, 0, 0, 0, 0}, {key})).status().message(),
            "signal " + std::to_string(gsn::kTcKeyConf) + ": expected signal 200");
}

// A train of every kind of request: each record comes back as it went in
// (api_conn and tx from the train), padding and all; the records of a
// KeyDataTrain too.
TEST(ProtocolTest, TrainsRoundTrip) {
  Wire w;
  const auto key = values_of({{0, "key"}});
  const auto values = values_of({{1, "a value of odd length"}, {2, "b"}});
  const uint16_t columns_odd[] = {2, 0, 1};  // 6 bytes: padded to 8
  std::vector<TcKeyReq> in;
  for (uint32_t i = 0; i < kMaxTrainOps; ++i) {
    TcKeyReq r;
    r.table_id = 10 + i;
    r.table_version = 3;
    r.op = static_cast<OpType>(1 + i % 5);
    r.lock = r.op == OpType::kRead ? static_cast<LockMode>(i % 3) : LockMode::kExclusive;
    r.flags = (i == 0 ? kFlagStartTx : 0) | (i + 1 == kMaxTrainOps ? kFlagExecute | kFlagCommit : 0);
    r.op_index = 100 + i;
    r.index_id = i;
    r.batch_ops = i + 1 == kMaxTrainOps ? kMaxTrainOps : 0;
    r.key = key;
    const bool writes = r.op == OpType::kInsert || r.op == OpType::kUpdate || r.op == OpType::kWrite;
    if (writes) r.values = values;
    if (r.op == OpType::kRead && i % 2 == 0) r.columns = std::as_bytes(std::span(columns_odd));
    in.push_back(r);
  }
  std::vector<std::byte> records(frame::kMaxFrameBytes);
  std::size_t used = 0;
  for (const TcKeyReq& r : in) {
    const std::size_t n = put_tc_key_train_record(std::span(records).subspan(used), r);
    ASSERT_EQ(n, tc_key_train_record_bytes(r));
    ASSERT_EQ(n % 4, 0u);
    used += n;
  }
  EXPECT_EQ(put_tc_key_train_record(std::span(records).first(tc_key_train_record_bytes(in[0]) - 1), in[0]), 0u)
      << "a record that does not fit is not written";
  const TxId tx = TxId::from(0x320000, 77);
  TcKeyTrainCursor cursor(w.carry(encode(TcKeyTrain{9, tx, kMaxTrainOps, std::span(records).first(used)})));
  ASSERT_TRUE(cursor.error().is_ok()) << cursor.error().message();
  EXPECT_EQ(cursor.train().count, kMaxTrainOps);
  TcKeyReq out;
  std::size_t i = 0;
  while (cursor.next(out)) {
    ASSERT_LT(i, in.size());
    const TcKeyReq& want = in[i++];
    EXPECT_EQ(out.api_conn, 9u);
    EXPECT_EQ(out.tx, tx);
    EXPECT_EQ(out.table_id, want.table_id);
    EXPECT_EQ(out.op, want.op);
    EXPECT_EQ(out.lock, want.lock);
    EXPECT_EQ(out.flags, want.flags);
    EXPECT_EQ(out.op_index, want.op_index);
    EXPECT_EQ(out.index_id, want.index_id);
    EXPECT_EQ(out.batch_ops, want.batch_ops);
    EXPECT_TRUE(std::ranges::equal(out.key, want.key));
    EXPECT_TRUE(std::ranges::equal(out.values, want.values));
    EXPECT_TRUE(std::ranges::equal(out.columns, want.columns));
  }
  EXPECT_TRUE(cursor.error().is_ok()) << cursor.error().message();
  EXPECT_EQ(i, in.size());

  // KeyDataTrain: records written in place, read back in order.
  std::vector<std::byte> data(256);
  std::size_t at = 0;
  for (uint32_t op = 0; op < 3; ++op) {
    const auto v = values_of({{0, std::string(op + 1, 'x')}});
    std::memcpy(data.data() + at + kKeyDataRecordHeaderBytes, v.data(), v.size());
    put_key_data_record_header(data.data() + at, 40 + op, static_cast<uint32_t>(v.size()));
    at += kKeyDataRecordHeaderBytes + v.size();
  }
  const KeyDataTrain reply{9, tx, 3, true, 5, 4, std::span(data).first(at)};
  auto back = decode_key_data_train(w.carry(encode(reply)));
  ASSERT_TRUE(back) << back.status().to_string();
  EXPECT_TRUE(back->ends_batch);
  EXPECT_EQ(back->batch_ops, 5u);
  EXPECT_EQ(back->data_messages, 4u);
  KeyDataTrainCursor records_back(back->records);
  uint32_t op_index = 0;
  std::span<const std::byte> v;
  for (uint32_t op = 0; op < 3; ++op) {
    ASSERT_TRUE(records_back.next(op_index, v));
    EXPECT_EQ(op_index, 40 + op);
    ValueCursor c(v);
    ValueEntry e;
    ASSERT_TRUE(c.next(e));
    EXPECT_EQ(e.bytes.size(), op + 1);
  }
  EXPECT_FALSE(records_back.next(op_index, v));
}

TEST(ProtocolTest, TrainsRefuseMalformedRecordsNamingThem) {
  Wire w;
  const auto key = values_of({{0, "k"}});
  TcKeyReq read;
  read.key = key;
  std::vector<std::byte> good(256);
  const std::size_t one = put_tc_key_train_record(good, read);
  // The words of a record as bytes, to break them one at a time.
  const auto record = [&](std::vector<uint32_t> head, std::size_t key_bytes = 0) {
    std::vector<std::byte> out(head.size() * 4 + key_bytes);
    std::memcpy(out.data(), head.data(), head.size() * 4);
    if (key_bytes) std::memcpy(out.data() + head.size() * 4, key.data(), std::min(key_bytes, key.size()));
    return out;
  };
  const uint32_t k = static_cast<uint32_t>(key.size());
  auto err = [&](uint32_t count, std::vector<std::byte> section, std::vector<uint32_t> words = {}) {
    if (words.empty()) words = {1, 0x320000, 2, count};
    TcKeyTrainCursor c(w.raw(gsn::kTcKeyTrain, words, {std::move(section)}));
    TcKeyReq out;
    while (c.next(out)) {
    }
    return c.error().is_ok() ? std::string("accepted") : c.error().message();
  };
  std::vector<std::byte> two(good.begin(), good.begin() + static_cast<long>(one));
  two.insert(two.end(), good.begin(), good.begin() + static_cast<long>(one));
  EXPECT_EQ(err(2, two), "accepted");
  EXPECT_EQ(err(1, two), "signal 207: " + std::to_string(one) + " bytes after the last record");
  EXPECT_EQ(err(3, two), "signal 207: record 2: section ends inside the header (0 bytes left)");
  EXPECT_EQ(err(0, two), "signal 207: train of 0 operations, expected 1..32");
  EXPECT_EQ(err(33, two), "signal 207: train of 33 operations, expected 1..32");
  EXPECT_EQ(err(2, two, {1, 0x320000, 2}), "signal 207: has 3 data words, expected 4");
  EXPECT_EQ(err(1, record({0, 0, 9, 0, 0, 0, 0, k, 0, 0}, k)), "signal 207: record 0: operation type 9");
  EXPECT_EQ(err(1, record({0, 0, 1 | 1u << 16, 0, 0, 0, 0, k, 0, 0}, k)),
            "signal 207: record 0: reserved operation bits set");
  EXPECT_EQ(err(1, record({0, 0, 1, kFlagCommit, 0, 0, 0, k, 0, 0}, k)),
            "signal 207: record 0: commit flag without execute");
  EXPECT_EQ(err(1, record({0, 0, 1, 0, 0, 0, 0, 0, 0, 0})), "signal 207: record 0: no key values");
  EXPECT_EQ(err(1, record({0, 0, 1, 0, 0, 0, 0, k, 0, 0}, k - 4)),
            "signal 207: record 0: key of " + std::to_string(k) + " bytes runs past the section");
  EXPECT_EQ(err(1, record({0, 0, 1, 0, 0, 0, 0, k, 0xFFFFFFFF, 0}, k)),
            "signal 207: record 0: values of 4294967295 bytes runs past the section");
  EXPECT_EQ(err(1, record({0, 0, 1, 0, 0, 0, 0, k, 4, 0}, k + 4)), "signal 207: record 0: read carries values");
  EXPECT_EQ(err(1, record({0, 0, 1, 0, 0, 0, 0, 9, 0, 0}, 10)),
            "signal 207: record 0: key of 9 bytes runs past the section");
  std::vector<std::byte> starts_late = two;
  const uint32_t start = kFlagStartTx;
  std::memcpy(starts_late.data() + one + 12, &start, 4);
  EXPECT_EQ(err(2, starts_late), "signal 207: record 1: starts the transaction but is not the first");
  std::vector<std::byte> ends_early = two;
  const uint32_t execute = kFlagExecute;
  std::memcpy(ends_early.data() + 12, &execute, 4);
  EXPECT_EQ(err(2, ends_early), "signal 207: record 0: ends the batch but is not the last");

  // KeyDataTrain: the words and every record's framing.
  std::vector<std::byte> data(64);
  const auto v = values_of({{0, "row"}});
  std::memcpy(data.data() + 8, v.data(), v.size());
  put_key_data_record_header(data.data(), 0, static_cast<uint32_t>(v.size()));
  data.resize(8 + v.size());
  auto kerr = [&](std::vector<uint32_t> words, std::vector<std::byte> section) {
    auto r = decode_key_data_train(w.raw(gsn::kKeyDataTrain, std::move(words), {std::move(section)}));
    return r.is_ok() ? std::string("accepted") : r.status().message();
  };
  EXPECT_EQ(kerr({1, 0, 2, 1, 0, 0, 0}, data), "accepted");
  EXPECT_EQ(kerr({1, 0, 2, 1, 2, 0, 0}, data), "signal 212: ends_batch flag 2");
  EXPECT_EQ(kerr({1, 0, 2, 0, 0, 0, 0}, data), "signal 212: train of 0 records, expected 1..32");
  EXPECT_EQ(kerr({1, 0, 2, 2, 0, 0, 0}, data), "signal 212: record 1: section ends inside its header");
  EXPECT_EQ(kerr({1, 0, 2, 1, 1, 1, 0}, data), "signal 212: ends a batch of 0 data messages but carries 1");
  std::vector<std::byte> longer = data;
  longer.resize(data.size() + 8);
  EXPECT_EQ(kerr({1, 0, 2, 1, 0, 0, 0}, longer), "signal 212: 8 bytes after the last record");
  std::vector<std::byte> odd = data;
  put_key_data_record_header(odd.data(), 0, 6);
  EXPECT_EQ(kerr({1, 0, 2, 1, 0, 0, 0}, odd),
            "signal 212: record 0: 6 value bytes, not a multiple of 4 or past the section");
  put_key_data_record_header(odd.data(), 0, 400);
  EXPECT_EQ(kerr({1, 0, 2, 1, 0, 0, 0}, odd),
            "signal 212: record 0: 400 value bytes, not a multiple of 4 or past the section");
}

TEST(ProtocolTest, PutPaddedCopiesEveryLengthAndZeroesItsPadding) {
  // Every length 0..40 crosses each copy path (1-3, 4-7, 8-16 bytes by
  // overlapping loads, longer by memcpy): the bytes, zeros to a multiple of
  // 4, nothing past that, and the end it returns.
  for (std::size_t length = 0; length <= 40; ++length) {
    std::vector<std::byte> part(length);
    for (std::size_t i = 0; i < length; ++i) part[i] = static_cast<std::byte>(0x40 + i);
    std::vector<std::byte> out(64, std::byte{0xEE});
    std::byte* end = put_padded(out.data(), part);
    const std::size_t padded = padded_to_4(length);
    ASSERT_EQ(static_cast<std::size_t>(end - out.data()), padded) << length;
    std::vector<std::byte> want(padded, std::byte{0});
    if (length != 0) std::memcpy(want.data(), part.data(), length);
    EXPECT_EQ(std::vector<std::byte>(out.begin(), out.begin() + static_cast<long>(padded)), want) << length;
    EXPECT_EQ(out[padded], std::byte{0xEE}) << "wrote past its padding, length " << length;
  }
}

TEST(ProtocolTest, PutValueWritesExactlyItsEntryOverADirtyBuffer) {
  // Every length 0..12 and NULL: the header, the bytes, zero padding to 4,
  // nothing past the entry; too small a buffer is refused untouched.
  for (std::size_t length = 0; length <= 13; ++length) {
    const bool is_null = length == 13;
    std::vector<std::byte> value(is_null ? 0 : length);
    for (std::size_t i = 0; i < value.size(); ++i) value[i] = static_cast<std::byte>(0xA0 + i);
    std::vector<std::byte> out(64, std::byte{0xEE});
    const std::size_t n = put_value(out, 0x1234, is_null, value);
    ASSERT_EQ(n, value_entry_bytes(value.size())) << length;
    std::vector<std::byte> want(n, std::byte{0});
    const uint8_t head[] = {0x34, 0x12, uint8_t(is_null ? 1 : 0), 0, uint8_t(value.size()), 0, 0, 0};
    std::memcpy(want.data(), head, 8);
    std::memcpy(want.data() + 8, value.data(), value.size());
    EXPECT_EQ(std::vector<std::byte>(out.begin(), out.begin() + static_cast<long>(n)), want) << length;
    EXPECT_EQ(out[n], std::byte{0xEE}) << "wrote past its entry, length " << length;
    std::vector<std::byte> small(n - 1, std::byte{0xEE});
    EXPECT_EQ(put_value(small, 1, is_null, value), 0u);
    EXPECT_EQ(small, std::vector<std::byte>(n - 1, std::byte{0xEE})) << "a refused entry wrote";
  }
}

TEST(ProtocolTest, KeyDataAndKeyDataConfRoundTrip) {
  Wire w;
  const auto values = values_of({{0, "row"}});
  KeyData plain{9, TxId::from(0x320000, 5), 3, values};
  SignalOut out = encode(plain);
  EXPECT_EQ(out.number, gsn::kKeyData);
  auto back = decode_key_data(w.carry(out));
  ASSERT_TRUE(back) << back.status().to_string();
  EXPECT_FALSE(back->ends_batch);
  EXPECT_EQ(back->op_index, 3u);
  EXPECT_EQ(back->values.size(), values.size());
  // The batch's last read with its TcKeyConf.
  KeyData end = plain;
  end.ends_batch = true;
  end.batch_ops = 4;
  end.data_messages = 2;
  out = encode(end);
  EXPECT_EQ(out.number, gsn::kKeyDataConf);
  back = decode_key_data(w.carry(out));
  ASSERT_TRUE(back) << back.status().to_string();
  EXPECT_TRUE(back->ends_batch);
  EXPECT_EQ(back->tx, end.tx);
  EXPECT_EQ(back->batch_ops, 4u);
  EXPECT_EQ(back->data_messages, 2u);
  EXPECT_EQ(back->values.size(), values.size());
  // Refused: a KeyDataConf that counts no data message, either with the
  // other's word count, a TcKeyConf.
  const std::vector<std::vector<std::byte>> sections = {values};
  auto bad = decode_key_data(w.raw(gsn::kKeyDataConf, {9, 0x320000, 5, 3, 4, 0}, sections));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("counts no data message"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(decode_key_data(w.raw(gsn::kKeyDataConf, {9, 0x320000, 5, 3}, sections)));
  EXPECT_FALSE(decode_key_data(w.raw(gsn::kKeyData, {9, 0x320000, 5, 3, 4, 1}, sections)));
  EXPECT_FALSE(decode_key_data(w.raw(gsn::kTcKeyConf, {9, 0x320000, 5, 1, 1, 1})));
}

// Each field travels in the word its layout names, and comes back from the
// decoder unchanged (distinct values, so a swap or a missed word shows).
TEST(ProtocolTest, FieldsTravelInTheWordsTheirLayoutNames) {
  Wire w;
  const TxId tx = TxId::from(0x330000, 77);
  SignalOut out = encode(TcKeyConf{11, tx, 3, 2, true});
  EXPECT_EQ(out.word_count, layout::TcKeyConf::kWordCount);
  EXPECT_EQ(out.words[layout::TcKeyConf::kDataMessages], 2u);
  auto conf = decode_tc_key_conf(w.carry(out));
  ASSERT_TRUE(conf) << conf.status().to_string();
  EXPECT_EQ(conf->tx, tx);
  EXPECT_EQ(conf->ops, 3u);
  EXPECT_TRUE(conf->committed);
  auto ref = decode_tc_key_ref(w.carry(encode(TcKeyRef{11, tx, 5, ErrorCode::kNoSuchRow})));
  ASSERT_TRUE(ref) << ref.status().to_string();
  EXPECT_EQ(ref->op_index, 5u);
  EXPECT_EQ(ref->error, ErrorCode::kNoSuchRow);
  auto abort = decode_tc_abort_rep(w.carry(encode(TcAbortRep{11, tx, ErrorCode::kDeadlockTimeout})));
  ASSERT_TRUE(abort) << abort.status().to_string();
  EXPECT_EQ(abort->tx, tx);
  EXPECT_EQ(abort->error, ErrorCode::kDeadlockTimeout);
  auto commit = decode_tc_tx_message(w.carry(encode(TcTxMessage{gsn::kTcCommitReq, 11, tx})));
  ASSERT_TRUE(commit) << commit.status().to_string();
  EXPECT_EQ(commit->api_conn, 11u);
  EXPECT_EQ(commit->tx, tx);
  auto done = decode_lqh_tx_conf(w.carry(encode(gsn::kLqhCommitConf, LqhTxConf{tx, 6, 40})));
  ASSERT_TRUE(done) << done.status().to_string();
  EXPECT_EQ(done->ldm_instance, 6);
  EXPECT_EQ(done->ops, 40u);

  ScanFragReq frag;
  frag.tc_scan = 21;
  frag.tx = tx;
  frag.table_id = 4;
  frag.table_version = 2;
  frag.index_id = 9;
  frag.lock = LockMode::kShared;
  frag.partition = 13;
  frag.batch_rows = 100;
  frag.api_node = 50;
  frag.api_conn = 12;
  frag.scan_id = 8;
  out = encode(frag);
  EXPECT_EQ(out.words[layout::ScanFragReq::kPartition], 13u);
  auto frag_back = decode_scan_frag_req(w.carry(out));
  ASSERT_TRUE(frag_back) << frag_back.status().to_string();
  EXPECT_EQ(frag_back->tc_scan, 21u);
  EXPECT_EQ(frag_back->tx, tx);
  EXPECT_EQ(frag_back->table_version, 2u);
  EXPECT_EQ(frag_back->index_id, 9u);
  EXPECT_EQ(frag_back->lock, LockMode::kShared);
  EXPECT_EQ(frag_back->batch_rows, 100u);
  EXPECT_EQ(frag_back->api_node, 50);
  EXPECT_EQ(frag_back->api_conn, 12u);
  EXPECT_EQ(frag_back->scan_id, 8u);
  auto next = decode_scan_frag_next(w.carry(encode(gsn::kScanFragCloseReq, ScanFragNext{21, 13})));
  ASSERT_TRUE(next) << next.status().to_string();
  EXPECT_EQ(next->partition, 13u);
  auto frag_conf = decode_scan_frag_conf(w.carry(encode(ScanFragConf{21, 13, 70, 3, true})));
  ASSERT_TRUE(frag_conf) << frag_conf.status().to_string();
  EXPECT_EQ(frag_conf->rows, 70u);
  EXPECT_EQ(frag_conf->messages, 3u);
  EXPECT_TRUE(frag_conf->finished);
  auto frag_ref = decode_scan_frag_ref(w.carry(encode(ScanFragRef{21, 13, ErrorCode::kTooManyScans})));
  ASSERT_TRUE(frag_ref) << frag_ref.status().to_string();
  EXPECT_EQ(frag_ref->partition, 13u);
  EXPECT_EQ(frag_ref->error, ErrorCode::kTooManyScans);
  auto scan_conf = decode_scan_conf(w.carry(encode(ScanConf{12, 8, 70, 3, false})));
  ASSERT_TRUE(scan_conf) << scan_conf.status().to_string();
  EXPECT_EQ(scan_conf->scan_id, 8u);
  EXPECT_EQ(scan_conf->messages, 3u);
  EXPECT_FALSE(scan_conf->finished);
  auto scan_ref = decode_scan_ref(w.carry(encode(ScanRef{12, 8, ErrorCode::kScanError})));
  ASSERT_TRUE(scan_ref) << scan_ref.status().to_string();
  EXPECT_EQ(scan_ref->error, ErrorCode::kScanError);
  auto scan_next = decode_scan_next(w.carry(encode(gsn::kScanNextReq, ScanNext{12, 8})));
  ASSERT_TRUE(scan_next) << scan_next.status().to_string();
  EXPECT_EQ(scan_next->scan_id, 8u);

  const auto table = values_of({{0, "t1"}});
  auto install = decode_schema_install(w.carry(encode(SchemaInstall{31, 4, false, table})));
  ASSERT_TRUE(install) << install.status().to_string();
  EXPECT_EQ(install->install_id, 31u);
  EXPECT_EQ(install->table_id, 4u);
  EXPECT_EQ(install->table.size(), table.size());
  auto installed = decode_schema_install_conf(w.carry(encode(SchemaInstallConf{31})));
  ASSERT_TRUE(installed) << installed.status().to_string();
  EXPECT_EQ(installed->install_id, 31u);
  auto get = decode_schema_message(w.carry(encode(SchemaMessage{gsn::kGetTableReq, 14, table})));
  ASSERT_TRUE(get) << get.status().to_string();
  EXPECT_EQ(get->request_id, 14u);
  EXPECT_EQ(get->payload.size(), table.size());
  auto refused = decode_schema_ref(w.carry(encode(SchemaRef{14, ErrorCode::kNoSuchTable})));
  ASSERT_TRUE(refused) << refused.status().to_string();
  EXPECT_EQ(refused->error, ErrorCode::kNoSuchTable);
  auto reg_req = decode_api_reg_req(w.carry(encode(ApiRegReq{15})));
  ASSERT_TRUE(reg_req) << reg_req.status().to_string();
  EXPECT_EQ(reg_req->request_id, 15u);
  auto reg = decode_api_reg_conf(w.carry(encode(ApiRegConf{14, 2, 3, 16})));
  ASSERT_TRUE(reg) << reg.status().to_string();
  EXPECT_EQ(reg->tc_instances, 2);
  EXPECT_EQ(reg->ldm_instances, 3);
  EXPECT_EQ(reg->default_partitions, 16u);
}

TEST(ProtocolTest, ValueCursorRefusesTruncatedAndInconsistentEntries) {
  auto v = values_of({{3, "hello"}});
  ValueEntry e;
  ValueCursor short_header{std::span<const std::byte>(v).first(5)};
  EXPECT_FALSE(short_header.next(e));
  EXPECT_EQ(short_header.error().message(), "value entry shorter than its 8-byte header");
  ValueCursor truncated{std::span<const std::byte>(v).first(10)};
  EXPECT_FALSE(truncated.next(e));
  EXPECT_NE(truncated.error().message().find("past the end"), std::string::npos);
  auto bad_flags = v;
  bad_flags[2] = std::byte{4};
  ValueCursor flags(bad_flags);
  EXPECT_FALSE(flags.next(e));
  EXPECT_EQ(flags.error().message(), "value entry for column 3 has flags 4");
  std::vector<std::byte> null_with_length(16);
  const char ab[] = {'a', 'b'};
  ASSERT_EQ(put_value(null_with_length, 1, false, std::as_bytes(std::span(ab))), 12u);
  null_with_length[2] = std::byte{1};
  ValueCursor nl(null_with_length);
  EXPECT_FALSE(nl.next(e));
  EXPECT_EQ(nl.error().message(), "NULL value with length for column 1");
}

TEST(ProtocolTest, LdmMessagesRoundTrip) {
  Wire w;
  const auto key = values_of({{0, "key"}});
  LqhKeyReq q;
  q.tc_op = 17;
  q.tx = TxId{42};
  q.op = OpType::kInsert;
  q.lock = LockMode::kExclusive;
  q.result_to = ResultTo::kTc;
  q.partition = 6;
  q.api_node = 9;
  q.key_hash = 0xdeadbeef;
  q.key = key;
  auto back = decode_lqh_key_req(w.carry(encode(q)));
  ASSERT_TRUE(back) << back.status().to_string();
  EXPECT_EQ(back->tc_op, 17u);
  EXPECT_EQ(back->result_to, ResultTo::kTc);
  EXPECT_EQ(back->partition, 6u);
  EXPECT_EQ(back->key_hash, 0xdeadbeefu);
  q.table_id = 4;
  LqhKeyRoute route;
  ASSERT_TRUE(peek_lqh_key_route(w.carry(encode(q)), route));
  EXPECT_EQ(route.table_id, 4u);
  EXPECT_EQ(route.partition, 6u);
  EXPECT_EQ(route.key_hash, 0xdeadbeefu);
  EXPECT_FALSE(peek_lqh_key_route(w.raw(gsn::kLqhKeyReq, {1, 2, 3}), route));  // not this layout
  LqhKeyConf c;
  c.tc_op = 17;
  c.tx = TxId{42};
  c.unique_after = key;  // sections keep their positions even when earlier ones are empty
  auto cb = decode_lqh_key_conf(w.carry(encode(c)));
  ASSERT_TRUE(cb);
  EXPECT_TRUE(cb->data.empty());
  EXPECT_TRUE(cb->unique_before.empty());
  EXPECT_EQ(cb->unique_after.size(), key.size());
  auto ref = decode_lqh_key_ref(w.carry(encode(LqhKeyRef{17, TxId{42}, ErrorCode::kDuplicateKey})));
  ASSERT_TRUE(ref);
  EXPECT_EQ(ref->error, ErrorCode::kDuplicateKey);
  EXPECT_FALSE(decode_lqh_key_ref(w.raw(gsn::kLqhKeyRef, {1, 0, 0, 12345})));  // unknown error code
  auto tx = decode_lqh_tx_req(w.carry(encode(gsn::kLqhAbortReq, LqhTxReq{TxId{5}, 3})));
  ASSERT_TRUE(tx);
  EXPECT_EQ(tx->tc_instance, 3);
  EXPECT_EQ(error_text(ErrorCode::kNoSuchRow), "626: Tuple did not exist");
}

// A transaction id names its API node in its top 16 bits: an LqhKeyReq,
// LqhCommitReq or LqhAbortReq whose id names none (the all-ones id among
// them) is refused.
TEST(ProtocolTest, LqhKeyReqRefusesATransactionIdOfNoNode) {
  Wire w;
  const auto key = values_of({{0, "key"}});
  LqhKeyReq q;
  q.op = OpType::kInsert;
  q.lock = LockMode::kExclusive;
  q.result_to = ResultTo::kTc;
  q.key = key;
  q.tx = TxId{UINT64_MAX};
  auto refused = decode_lqh_key_req(w.carry(encode(q)));
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.status().message().find("names no node"), std::string::npos) << refused.status().message();
  q.tx = TxId{uint64_t{kMaxNodeId} << 48 | 5};
  EXPECT_TRUE(decode_lqh_key_req(w.carry(encode(q))));
  for (uint16_t n : {gsn::kLqhCommitReq, gsn::kLqhAbortReq}) {
    EXPECT_FALSE(decode_lqh_tx_req(w.carry(encode(n, LqhTxReq{TxId{UINT64_MAX}, 0}))));
    EXPECT_TRUE(decode_lqh_tx_req(w.carry(encode(n, LqhTxReq{q.tx, 0}))));
  }
}

// Schema installs: the table id within 1..kMaxTableId, and an install's
// table decoded, of the id it names and of 1..kMaxPartitions partitions.
TEST(ProtocolTest, SchemaInstallsRefuseTablesTcAndLdmCannotHold) {
  Wire w;
  TableDef t;
  t.name = "t";
  t.columns = {{"id", ColumnType::kUint64, 0, false}};
  t.primary_key = {0};
  t.table_id = 9;
  t.partitions = 4;
  const std::vector<std::byte> bytes = encode_table(t);
  auto ok = decode_schema_install(w.carry(encode(SchemaInstall{1, 9, false, bytes})));
  ASSERT_TRUE(ok) << ok.status().to_string();
  ASSERT_TRUE(decode_installed_table(*ok)) << decode_installed_table(*ok).status().to_string();
  EXPECT_FALSE(decode_schema_install(w.carry(encode(SchemaInstall{1, 0, true, {}}))));
  EXPECT_FALSE(decode_schema_install(w.carry(encode(SchemaInstall{1, kMaxTableId + 1, true, {}}))));
  auto other_id = decode_schema_install(w.carry(encode(SchemaInstall{1, 10, false, bytes})));
  ASSERT_TRUE(other_id);
  EXPECT_FALSE(decode_installed_table(*other_id));
  for (uint32_t partitions : {0u, kMaxPartitions + 1}) {
    t.partitions = partitions;
    const std::vector<std::byte> wrong = encode_table(t);
    auto m = decode_schema_install(w.carry(encode(SchemaInstall{1, 9, false, wrong})));
    ASSERT_TRUE(m);
    EXPECT_FALSE(decode_installed_table(*m)) << partitions << " partitions";
  }
  EXPECT_FALSE(decode_installed_table(SchemaInstall{1, 9, false, std::span(bytes).first(bytes.size() / 2)}));
}

TEST(ProtocolTest, ScanMessagesBoundsAndFiltersRoundTrip) {
  std::vector<std::byte> bounds(256);
  Bounds b;
  b.has_lower = b.lower_inclusive = b.has_upper = true;
  b.lower_count = 1;
  b.upper_count = 2;
  std::size_t at = put_bounds_header(bounds, b);
  const auto lo = values_of({{4, "a"}});
  const auto hi = values_of({{4, "m"}, {5, "zz"}});
  std::copy(lo.begin(), lo.end(), bounds.begin() + static_cast<long>(at));
  at += lo.size();
  std::copy(hi.begin(), hi.end(), bounds.begin() + static_cast<long>(at));
  at += hi.size();
  bounds.resize(at);
  auto db = decode_bounds(bounds);
  ASSERT_TRUE(db) << db.status().to_string();
  EXPECT_TRUE(db->lower_inclusive);
  EXPECT_FALSE(db->upper_inclusive);
  EXPECT_EQ(db->lower.size(), lo.size());
  EXPECT_EQ(db->upper.size(), hi.size());
  bounds[2] = std::byte{3};
  EXPECT_FALSE(decode_bounds(bounds));

  std::vector<std::byte> filter(128);
  const char q = 'q';
  std::size_t f = put_predicate(filter, 2, FilterOp::kGe, false, std::as_bytes(std::span(&q, 1)));
  f += put_predicate(std::span(filter).subspan(f), 3, FilterOp::kIsNull, false, {});
  filter.resize(f);
  FilterCursor fc(filter);
  Predicate p;
  ASSERT_TRUE(fc.next(p));
  EXPECT_EQ(p.column, 2);
  EXPECT_EQ(p.op, FilterOp::kGe);
  ASSERT_TRUE(fc.next(p));
  EXPECT_EQ(p.op, FilterOp::kIsNull);
  EXPECT_FALSE(fc.next(p));
  EXPECT_TRUE(fc.error().is_ok());

  Wire w;
  ScanReq s;
  s.scan_id = 3;
  s.flags = kScanFlagOrderedIndex;
  s.batch_rows = 64;
  s.bounds = bounds;
  s.filter = filter;
  auto sb = decode_scan_req(w.carry(encode(s)));
  ASSERT_TRUE(sb) << sb.status().to_string();
  EXPECT_EQ(sb->batch_rows, 64u);
  s.batch_rows = 0;
  EXPECT_EQ(decode_scan_req(w.carry(encode(s))).status().message(), "signal 230: batch of 0 rows; accepted 1..4096");
  s.batch_rows = 10;
  s.flags = 0;
  EXPECT_EQ(decode_scan_req(w.carry(encode(s))).status().message(), "signal 230: bounds on a table scan");
  std::vector<std::byte> rows(64);
  const uint32_t len = 0;
  std::memcpy(rows.data(), &len, 4);
  rows.resize(4);
  EXPECT_TRUE(decode_scan_rows(w.carry(encode(ScanRows{1, 2, 1, rows}))));
  EXPECT_FALSE(decode_scan_rows(w.carry(encode(ScanRows{1, 2, 2, rows}))));
}

TEST(ProtocolTest, TableDefinitionsRoundTripAndAreValidated) {
  TableDef t;
  t.name = "accounts";
  t.table_id = 4;
  t.version = 2;
  t.partitions = 8;
  t.columns = {{"id", ColumnType::kUint64, 0, false},
               {"name", ColumnType::kVarChar, 64, true},
               {"email", ColumnType::kVarChar, 128, false}};
  t.primary_key = {0};
  t.indexes = {{"by_email", IndexKind::kUnique, {2}, 1}, {"by_name", IndexKind::kOrdered, {1}, 2}};
  const auto bytes = encode_table(t);
  auto back = decode_table(bytes);
  ASSERT_TRUE(back) << back.status().to_string();
  EXPECT_EQ(back->name, "accounts");
  EXPECT_EQ(back->columns[1].type, ColumnType::kVarChar);
  EXPECT_TRUE(back->columns[1].nullable);
  EXPECT_EQ(back->indexes[1].columns, std::vector<uint16_t>{1});
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) EXPECT_FALSE(decode_table(std::span(bytes).first(cut))) << cut;
  TableDef bad = t;
  bad.primary_key = {7};
  EXPECT_FALSE(decode_table(encode_table(bad)));  // validate_table runs on decode
}

// A table whose primary key is `types` (integer columns) placed after a
// non-key column, so key positions are not 0..n-1.
TableDef integer_key_table(const std::vector<ColumnType>& types) {
  TableDef t;
  t.name = "ints";
  t.table_id = 1;
  t.version = 1;
  t.partitions = 8;
  t.columns = {{"filler", ColumnType::kBinary, 4, false}};
  for (std::size_t i = 0; i < types.size(); ++i) {
    t.columns.push_back({"k" + std::to_string(i), types[i], 0, false});
    t.primary_key.push_back(static_cast<uint16_t>(i + 1));
  }
  return t;
}

// The integer-key path of encode_key_section writes what KeyCodec::encode
// writes, whatever the order of the entries, for random values of every
// integer type (edges included).
TEST(ProtocolTest, EncodeKeySectionOfIntegersMatchesTheCodec) {
  const ColumnType kTypes[] = {ColumnType::kInt32, ColumnType::kUint32, ColumnType::kInt64, ColumnType::kUint64};
  const uint64_t kEdges[] = {
      0, 1, 0x7F, 0x80, 0xFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x7FFFFFFFFFFFFFFF, 0x8000000000000000, UINT64_MAX};
  std::mt19937_64 rng(7);
  for (int round = 0; round < 400; ++round) {
    std::vector<ColumnType> types(1 + rng() % 4);
    for (ColumnType& t : types) t = kTypes[rng() % 4];
    const TableDef table = integer_key_table(types);
    const KeyCodec codec = KeyCodec::for_primary_key(table);
    ASSERT_TRUE(codec.integer_key());
    std::vector<uint64_t> raw(types.size());
    for (uint64_t& v : raw) v = rng() % 3 == 0 ? kEdges[rng() % std::size(kEdges)] : rng();
    std::vector<ValueRef> in_order;
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < types.size(); ++i) {
      const std::size_t width = integer_width(types[i]);
      in_order.push_back(ValueRef::of_bytes(std::as_bytes(std::span(&raw[i], 1)).first(width)));
      order.push_back(i);
    }
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<std::byte> section(256);
    std::size_t at = 0;
    for (std::size_t i : order)
      at += put_value(std::span(section).subspan(at), static_cast<uint16_t>(i + 1), false, in_order[i].bytes);
    std::vector<std::byte> expected(kMaxKeyBytes), got(kMaxKeyBytes, std::byte{0xAA});
    auto want = codec.encode(in_order, expected);
    ASSERT_TRUE(want);
    auto n = encode_key_section(codec, std::span(section).first(at), got);
    ASSERT_TRUE(n) << n.status().to_string();
    ASSERT_EQ(*n, *want);
    EXPECT_EQ(std::memcmp(got.data(), expected.data(), *n), 0) << "round " << round;
  }
}

// encode_key_section refuses `section` with a message that says `why`.
void expect_key_refused(const KeyCodec& codec, std::span<const std::byte> section, const std::string& why) {
  std::vector<std::byte> out(kMaxKeyBytes);
  const auto n = encode_key_section(codec, section, out);
  ASSERT_FALSE(n) << why;
  EXPECT_NE(n.status().message().find(why), std::string::npos) << n.status().message();
}

// Whatever an integer key's section gets wrong is refused with the general
// path's message naming it.
TEST(ProtocolTest, EncodeKeySectionOfIntegersRefusesWhatIsWrong) {
  const TableDef table = integer_key_table({ColumnType::kUint64, ColumnType::kInt32});
  const KeyCodec codec = KeyCodec::for_primary_key(table);
  const uint64_t a = 5;
  const int32_t b = -3;
  const auto a_bytes = std::as_bytes(std::span(&a, 1));
  const auto b_bytes = std::as_bytes(std::span(&b, 1));
  const auto refused = [&](const std::vector<std::byte>& section, std::size_t length, const std::string& why) {
    expect_key_refused(codec, std::span(section).first(length), why);
  };
  std::vector<std::byte> s(256);
  std::size_t at = put_value(s, 1, false, a_bytes);
  refused(s, at, "no value for key column 'k1'");
  at += put_value(std::span(s).subspan(at), 1, false, a_bytes);
  refused(s, at, "column 'k0' given twice");
  at = put_value(s, 1, false, a_bytes);
  at += put_value(std::span(s).subspan(at), 2, false, a_bytes);  // 8 bytes for an INT32
  refused(s, at, "needs 4 bytes, got 8");
  at = put_value(s, 1, false, a_bytes);
  at += put_value(std::span(s).subspan(at), 2, true, {});
  refused(s, at, "is not nullable, got NULL");
  at = put_value(s, 1, false, a_bytes);
  at += put_value(std::span(s).subspan(at), 0, false, b_bytes);
  refused(s, at, "column 0 is not a key column");
  at = put_value(s, 1, false, a_bytes);
  at += put_value(std::span(s).subspan(at), 2, false, b_bytes);
  refused(s, at - 2, "past the end of its section");
  refused(s, at - 5, "shorter than its 8-byte header");
  std::vector<std::byte> small(4);
  const auto n = encode_key_section(codec, std::span(s).first(at), small);  // 12 bytes needed
  ASSERT_FALSE(n);
  EXPECT_NE(n.status().message().find("buffer has 4"), std::string::npos) << n.status().message();
}

// A key of one integer column takes its own short path: the same refusals,
// named by the general path, and the same encoding as the codec's.
TEST(ProtocolTest, EncodeKeySectionOfOneIntegerColumnRefusesWhatIsWrong) {
  for (const ColumnType type : {ColumnType::kInt32, ColumnType::kUint64}) {
    const TableDef table = integer_key_table({type});
    const KeyCodec codec = KeyCodec::for_primary_key(table);
    const int64_t v = -7;
    const std::size_t width = integer_width(type);
    const auto value = std::as_bytes(std::span(&v, 1)).first(width);
    std::vector<std::byte> out(kMaxKeyBytes), expected(kMaxKeyBytes);
    const auto refused = [&](const std::vector<std::byte>& section, std::size_t length, const std::string& why) {
      expect_key_refused(codec, std::span(section).first(length), why);
    };
    std::vector<std::byte> s(256);
    std::size_t at = put_value(s, 1, false, value);
    auto n = encode_key_section(codec, std::span(s).first(at), out);
    ASSERT_TRUE(n) << n.status().to_string();
    const std::vector<ValueRef> values = {ValueRef::of_bytes(value)};
    auto want = codec.encode(values, expected);
    ASSERT_TRUE(want);
    ASSERT_EQ(*n, *want);
    EXPECT_EQ(std::memcmp(out.data(), expected.data(), *n), 0);
    refused(s, at - 1, "past the end of its section");
    refused(s, 0, "no value for key column 'k0'");
    std::vector<std::byte> flagged = s;  // the NULL flag set, the value left behind it
    flagged[2] = std::byte{1};
    EXPECT_FALSE(encode_key_section(codec, std::span(flagged).first(at), out));
    at = put_value(s, 1, true, {});
    refused(s, at, "is not nullable, got NULL");
    const uint64_t wide = 5;
    at = put_value(s, 1, false, std::as_bytes(std::span(&wide, 1)).first(12 - width));  // the other width
    refused(s, at, "needs " + std::to_string(width) + " bytes, got " + std::to_string(12 - width));
    at = put_value(s, 0, false, value);
    refused(s, at, "column 0 is not a key column");
    at = put_value(s, 1, false, value);
    at += put_value(std::span(s).subspan(at), 1, false, value);
    refused(s, at, "column 'k0' given twice");
  }
}

}  // namespace
}  // namespace fjord::engine::protocol
